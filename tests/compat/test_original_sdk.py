"""The original's own Python SDK (PyPI ``imagegen-bridge==0.3.0``) against our real server.

Existing users' scripts are written against that SDK, so every public method of both its
clients, ``ImagegenBridgeClient`` and ``AsyncImagegenBridgeClient``, runs here unchanged
against ``imagegen-bridge serve`` (tests/compat/conftest.py). The SDK sends empty query
values and JSON nulls for everything unset and decodes answers strictly, so a method that
raises here is a compatibility break. Each client is wrapped in a recorder; the scenario
then fails if any public method the SDK defines (enumerated from the installed package)
was not called, so a method added by a later SDK release cannot be missed silently.
"""

from __future__ import annotations

import base64
import inspect
import io
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import imagegen_bridge as sdk
import pytest
from PIL import Image

from tests.compat.conftest import BridgeProcess

SMALL = sdk.GenerationParameters(size="16x16")
JOB_DEADLINE_S = 30.0


class Recorder:
    """Forwards to an SDK client (or resource) and records each public method called."""

    def __init__(self, target: Any, calls: set[str], prefix: str = "") -> None:
        self._target = target
        self._calls = calls
        self._prefix = prefix

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        path = f"{self._prefix}{name}"
        if _is_resource(value):
            return Recorder(value, self._calls, f"{path}.")
        if callable(value):
            self._calls.add(path)
        return value


def _is_resource(value: Any) -> bool:
    return type(value).__module__.startswith("imagegen_bridge") and type(value).__name__.endswith(
        "Resource"
    )


def public_methods(client: Any) -> set[str]:
    """Every public method of an SDK client and of its resources (``jobs.list``, …)."""
    names: set[str] = set()
    for name, _ in inspect.getmembers(type(client), inspect.isfunction):
        if not name.startswith("_"):
            names.add(name)
    for attribute, resource in vars(client).items():
        if attribute.startswith("_") or not _is_resource(resource):
            continue
        for name, _ in inspect.getmembers(type(resource), inspect.isfunction):
            if not name.startswith("_"):
                names.add(f"{attribute}.{name}")
    return names


async def resolve(value: Any) -> Any:
    """The answer of a sync call, or of an async one once awaited."""
    return await value if inspect.isawaitable(value) else value


async def collect(events: Iterator[Any] | AsyncIterator[Any]) -> list[Any]:
    if isinstance(events, AsyncIterator):
        return [event async for event in events]
    return list(events)


async def api_error(call: Callable[[], Any]) -> sdk.BridgeAPIError:
    with pytest.raises(sdk.BridgeAPIError) as caught:
        await resolve(call())
    return caught.value


def png_bytes(image: sdk.GeneratedImage) -> bytes:
    assert image.b64_json is not None
    data = base64.b64decode(image.b64_json)
    with Image.open(io.BytesIO(data)) as decoded:
        assert decoded.format == "PNG"
        assert decoded.size == (image.width, image.height)
    return data


def make_client(kind: str, bridge: BridgeProcess, token: str | None = None) -> Any:
    cls = sdk.ImagegenBridgeClient if kind == "sync" else sdk.AsyncImagegenBridgeClient
    return cls(bridge.url, bearer_token=bridge.token if token is None else token, timeout=30.0)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_every_public_method_of_the_original_sdk(kind: str, bridge: BridgeProcess) -> None:
    raw = make_client(kind, bridge)
    calls: set[str] = set()
    client = Recorder(raw, calls)
    tag = f"{kind}-{uuid.uuid4().hex[:8]}"
    try:
        await health_and_readiness(client)
        await providers_and_capabilities(client)
        await generate_and_edit(client, tag)
        await stream(client, tag)
        await idempotent_replay(client, tag)
        await sessions(client, tag)
        await jobs(client, tag)
        await presets(client, tag)
        await diagnostics(client)
        await error_mapping(client, kind, bridge)
    finally:
        await resolve(client.close())
    missing = public_methods(raw) - calls
    assert not missing, f"public SDK methods this tier never called: {sorted(missing)}"


async def health_and_readiness(client: Any) -> None:
    assert await resolve(client.health()) == {"status": "live"}
    deadline = time.monotonic() + JOB_DEADLINE_S
    while True:  # the first readiness probe runs in the background after start-up
        try:
            assert await resolve(client.health(ready=True)) == {"status": "ready"}
            return
        except sdk.BridgeAPIError as error:
            assert error.status_code == 503 and time.monotonic() < deadline, error
            time.sleep(0.1)


async def providers_and_capabilities(client: Any) -> None:
    every = await resolve(client.providers())  # sends `cursor=`: the first page
    assert [item.name for item in every.items] == ["local-sd", "mock"]
    assert every.next_cursor is None
    first = await resolve(client.providers(limit=1))
    assert [item.name for item in first.items] == ["local-sd"] and first.next_cursor
    second = await resolve(client.providers(limit=1, cursor=first.next_cursor))
    assert [item.name for item in second.items] == ["mock"] and second.next_cursor is None
    caps = await resolve(client.capabilities("mock"))  # sends `model=`
    assert isinstance(caps, sdk.ProviderCapabilities)
    assert caps.provider == "mock" and caps.sizes.arbitrary and caps.sizes.allowed == ()
    named = await resolve(client.capabilities("mock", model="mock-image-1"))
    assert named.model == "mock-image-1"
    remote = await resolve(client.capabilities("local-sd"))
    assert remote.provider == "local-sd"


async def generate_and_edit(client: Any, tag: str) -> None:
    request = sdk.ImageRequest.generate(
        f"a red fox {tag}", parameters=sdk.GenerationParameters(n=3, size="16x16")
    )
    response = await resolve(client.images.generate(request))
    assert isinstance(response, sdk.ImageResponse)
    assert [item.index for item in response.data] == [0, 1, 2]
    assert response.requested.n == response.effective.n == 3
    sources = [png_bytes(item) for item in response.data]
    assert len(set(sources)) == 3
    encoded = base64.b64encode(sources[0]).decode()
    for source in (
        sdk.ImageInput.base64(encoded, media_type="image/png", filename="fox.png"),
        sdk.ImageInput.data_url(f"data:image/png;base64,{encoded}"),
    ):
        edit = sdk.ImageRequest.edit(f"make it blue {tag}", (source,), parameters=SMALL)
        edited = await resolve(client.images.edit(edit))
        assert len(edited.data) == 1
        png_bytes(edited.data[0])
    with pytest.raises(ValueError, match="edit ImageRequest"):  # the SDK's own guard
        await resolve(client.images.edit(request))


async def stream(client: Any, tag: str) -> None:
    request = sdk.ImageRequest.generate(
        f"streamed {tag}", parameters=sdk.GenerationParameters(size="16x16", partial_images=2)
    )
    events = await collect(client.images.stream(request))
    assert isinstance(events[0], sdk.StartedEvent)
    partials = [event for event in events if isinstance(event, sdk.PartialImageEvent)]
    assert [event.partial_index for event in partials] == [0, 1]
    assert isinstance(events[-1], sdk.CompletedEvent)
    assert len(events[-1].response.data) == 1
    png_bytes(events[-1].response.data[0])


async def idempotent_replay(client: Any, tag: str) -> None:
    key = f"replay-{tag}"
    request = sdk.ImageRequest.generate(f"replayed {tag}", parameters=SMALL)
    first = await resolve(client.images.generate(request, idempotency_key=key))
    again = await resolve(client.images.generate(request, idempotency_key=key))
    assert (again.id, again.created, again.data) == (first.id, first.created, first.data)
    other = sdk.ImageRequest.generate(f"something else {tag}", parameters=SMALL)
    conflict = await api_error(lambda: client.images.generate(other, idempotency_key=key))
    assert conflict.status_code == 409


async def sessions(client: Any, tag: str) -> None:
    key = f"session-{tag}"
    request = sdk.ImageRequest.generate(
        f"in a session {tag}",
        parameters=SMALL,
        session=sdk.SessionOptions(mode="persistent", key=key),
    )
    response = await resolve(client.images.generate(request))
    assert response.session is not None and response.session.key == key
    bound = await resolve(client.session(key, provider="mock"))
    assert isinstance(bound, sdk.SessionMetadata) and bound.key == key
    by_default = await resolve(client.session(key))  # `provider=`: the default provider
    assert by_default == bound
    assert await resolve(client.delete_session(key, provider="mock")) is None
    gone = await api_error(lambda: client.session(key, provider="mock"))
    assert (gone.status_code, gone.code, gone.bridge_code) == (404, "session_not_found", "session")
    unknown = await api_error(lambda: client.delete_session(key))
    assert unknown.status_code == 404


async def wait_job(client: Any, job_id: str, wanted: set[str]) -> sdk.ImageJob:
    """The SDK has no wait: poll ``jobs.get`` (bounded) as its users do."""
    deadline = time.monotonic() + JOB_DEADLINE_S
    while True:
        job = await resolve(client.jobs.get(job_id))
        if job.status in wanted:
            return job  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, f"job {job_id} stayed {job.status}"
        time.sleep(0.05)


async def jobs(client: Any, tag: str) -> None:
    slow = sdk.ImageRequest.generate(
        f"[mock:latency=4000] a durable job {tag}",
        parameters=sdk.GenerationParameters(size="64x64", partial_images=1),
    )
    job = await resolve(client.jobs.create(slow, idempotency_key=f"job-{tag}"))
    assert isinstance(job, sdk.ImageJob) and job.status in {"queued", "running"}
    assert job.request.prompt == slow.prompt
    preview = await _partial_preview(client, job.id)
    with Image.open(io.BytesIO(preview)) as image:
        assert image.format == "PNG"
    done = await wait_job(client, job.id, {"succeeded", "failed"})
    assert done.status == "succeeded" and done.result is not None
    assert done.result.data[0].type == "artifact"
    listed = await resolve(client.jobs.list())  # every filter sent empty
    assert job.id in [item.id for item in listed.items]
    # The history holds this run's synchronous requests too (issue 39), in the shapes the
    # original's SDK decodes: the search names the job's own prompt.
    everything = await resolve(client.jobs.list(search=tag, limit=100))
    assert len(everything.items) > 1 and job.id in [item.id for item in everything.items]
    found = await resolve(
        client.jobs.list(status="succeeded", search=f"a durable job {tag}", limit=5)
    )
    assert [item.id for item in found.items] == [job.id]
    favorite = await resolve(client.jobs.update(job.id, favorite=True))
    assert favorite.favorite is True
    assert [item.id for item in (await resolve(client.jobs.list(favorite=True))).items] == [job.id]
    hidden = await resolve(client.jobs.update(job.id, deleted=True))
    assert isinstance(hidden.deleted, int)
    assert job.id not in [item.id for item in (await resolve(client.jobs.list())).items]
    for query in ({"visibility": "hidden"}, {"include_deleted": True}):
        page = await resolve(client.jobs.list(search=tag, **query))
        assert job.id in [item.id for item in page.items], query
    finished = await api_error(lambda: client.jobs.partial(job.id))
    assert finished.status_code == 404
    cancelled = await _cancelled_job(client, tag)
    assert cancelled.status == "cancelled" and cancelled.cancel_requested is True


async def _partial_preview(client: Any, job_id: str) -> bytes:
    deadline = time.monotonic() + JOB_DEADLINE_S
    while True:
        try:
            preview: bytes = await resolve(client.jobs.partial(job_id))
            return preview
        except sdk.BridgeAPIError as error:
            assert error.status_code == 404 and time.monotonic() < deadline, error
            time.sleep(0.05)


async def _cancelled_job(client: Any, tag: str) -> sdk.ImageJob:
    request = sdk.ImageRequest.generate(f"[mock:latency=20000] cancel me {tag}", parameters=SMALL)
    job = await resolve(client.jobs.create(request))
    await wait_job(client, job.id, {"running"})
    answer = await resolve(client.jobs.cancel(job.id))
    assert answer.cancel_requested is True
    return await wait_job(client, job.id, {"cancelled", "failed", "succeeded"})


async def presets(client: Any, tag: str) -> None:
    name = f"portrait-{tag}"
    template = sdk.ImagePresetTemplate(
        prompt="an editorial portrait",
        parameters=sdk.GenerationParameters(quality="high", size="16x16"),
    )
    created = await resolve(
        client.presets.create(sdk.ImagePresetCreate(name, template, description="Portrait"))
    )
    assert isinstance(created, sdk.ImagePreset)
    assert (created.name, created.description) == (name, "Portrait")
    assert created.template.parameters.quality == "high"
    clash = await api_error(lambda: client.presets.create(sdk.ImagePresetCreate(name, template)))
    assert clash.status_code == 409
    assert await resolve(client.presets.get(name)) == created
    listed = await resolve(client.presets.list())  # sends `cursor=`
    assert name in [item.name for item in listed.items]
    page = await resolve(client.presets.list(limit=1))
    assert len(page.items) == 1
    replaced = await resolve(
        client.presets.update(
            name, sdk.ImagePresetWrite(sdk.ImagePresetTemplate(prompt="new"), description="New")
        )
    )
    assert (replaced.description, replaced.template.prompt) == ("New", "new")
    assert replaced.created == created.created
    assert await resolve(client.presets.delete(name)) is None
    assert (await api_error(lambda: client.presets.get(name))).status_code == 404
    assert (await api_error(lambda: client.presets.delete(name))).status_code == 404


async def diagnostics(client: Any) -> None:
    state = await resolve(client.diagnostics())
    assert isinstance(state, sdk.OperatorDiagnostics)
    assert state.configuration.default_provider == "mock"
    assert state.configuration.authentication_required is True
    assert state.jobs is not None and state.jobs.succeeded >= 1
    assert state.events is not None and state.events.items
    assert {item.provider for item in state.providers} == {"local-sd", "mock"}


async def error_mapping(client: Any, kind: str, bridge: BridgeProcess) -> None:
    invalid = await api_error(
        lambda: client.images.generate(sdk.ImageRequest.generate("", parameters=SMALL))
    )
    assert (invalid.status_code, invalid.bridge_code) == (422, "invalid_request")
    assert invalid.request_id
    missing = await api_error(lambda: client.jobs.get(str(uuid.uuid4())))
    assert missing.status_code == 404
    unknown = await api_error(lambda: client.capabilities("nope"))
    assert unknown.status_code == 404
    limited = sdk.ImageRequest.generate("[mock:fail=rate_limited] busy", parameters=SMALL)
    throttled = await api_error(lambda: client.images.generate(limited))
    assert (throttled.status_code, throttled.bridge_code) == (429, "rate_limited")
    assert throttled.retryable is True and throttled.details["retry_after_ms"] == 2000
    # The SDK does not surface headers: the same answer, read raw, carries Retry-After.
    async with httpx.AsyncClient(base_url=bridge.url, timeout=30) as http:
        headers = {"Authorization": f"Bearer {bridge.token}"}
        raw = await http.post("/v1/images", json=limited.to_dict(), headers=headers)
    assert raw.status_code == 429 and raw.headers["retry-after"] == "2"
    stranger = make_client(kind, bridge, token="wrong-token")
    try:
        denied = await api_error(stranger.providers)
        assert (denied.status_code, denied.bridge_code) == (401, "authentication")
    finally:
        await resolve(stranger.close())


async def test_public_methods_are_enumerated_from_the_installed_sdk() -> None:
    """The coverage check above is only as good as this enumeration: it must see the
    resources and their methods, not just the client's own."""
    for cls in (sdk.ImagegenBridgeClient, sdk.AsyncImagegenBridgeClient):
        client = cls("http://127.0.0.1:9")
        try:
            names = public_methods(client)
        finally:
            await resolve(client.close())
        assert {"health", "diagnostics", "jobs.partial", "presets.update"} <= names
        assert not any(name.startswith("_") or "._" in name for name in names)
