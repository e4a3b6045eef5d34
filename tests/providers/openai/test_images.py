"""The ``openai`` provider against a real loopback mock of the OpenAI Images API."""

from __future__ import annotations

import asyncio
import base64
import gc
import io
import json
import logging
import socket
import time
from typing import Any

import pytest
from PIL import Image

from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.artifacts.inputs.remote import RemoteFetchPolicy, RemoteImageFetcher
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent, ProgressEvent, StartedEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.decoded import take_decoded
from imagebridge.engine.inputs import load_request_inputs
from imagebridge.engine.provider import ProviderContext, ProviderEventT
from imagebridge.providers.openai.images import OpenAIImagesProvider, OpenAIImagesSettings
from imagebridge.providers.openai.models import CapabilityOverrides
from tests.artifacts.http_server import Route, local_server
from tests.support.network_guard import no_external_network  # noqa: F401 - fixture
from tests.support.openai_server import (
    Behaviour,
    OpenAIImagesServer,
    openai_server_fixture,  # noqa: F401 - registers `openai_server`
    openai_server_session_fixture,  # noqa: F401 - registers `openai_server_session`
    png_bytes,
)

KEY = "sk-test-SECRETVALUE-0123456789abcdef"
ORG = "org-test-secret-org"
ENV = {"OPENAI_API_KEY": KEY, "OPENAI_ORG_ID": ORG}


def make_provider(
    server: OpenAIImagesServer, environ: dict[str, str] | None = None, **settings: Any
) -> OpenAIImagesProvider:
    return OpenAIImagesProvider(
        OpenAIImagesSettings(base_url=server.base_url, **settings),
        environ=ENV if environ is None else environ,
    )


def request(**body: Any) -> ImageRequest:
    payload: dict[str, Any] = {"operation": "generate", "prompt": "a red fox"}
    payload.update(body)
    return ImageRequest.model_validate(payload)


def b64(data: bytes) -> dict[str, str]:
    return {"type": "base64", "data": base64.b64encode(data).decode()}


class Events:
    def __init__(self) -> None:
        self.items: list[ProviderEventT] = []

    async def __call__(self, event: ProviderEventT) -> None:
        self.items.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.items if isinstance(e, kind)]


def context(
    events: Events | None = None, *, seconds: float = 20, token: CancelToken | None = None
) -> ProviderContext:
    return ProviderContext(
        request_id="req-1",
        deadline=Deadline.after(seconds),
        cancellation=token or CancelToken(),
        events=events,
    )


def decoded_size(b64_json: str) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(b64_json))) as image:
        return image.size


async def run(
    provider: OpenAIImagesProvider,
    req: ImageRequest,
    ctx: ProviderContext | None = None,
    *,
    loader: InputLoader | None = None,
) -> ImageResponse:
    """Execute as the engine does: the request's inputs loaded first (inline ones only,
    unless ``loader`` allows more)."""
    ctx = ctx or context()
    try:
        ctx.inputs = await load_request_inputs(req, loader or InputLoader([]))
        return await provider.execute(req, ctx)
    finally:
        await provider.shutdown()


async def failure(
    provider: OpenAIImagesProvider, req: ImageRequest, *, loader: InputLoader | None = None
) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        await run(provider, req, loader=loader)
    return caught.value


# -- generations ---------------------------------------------------------------------------------


async def test_generation_sends_the_documented_json_and_returns_verified_images(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(openai_server)
    events = Events()
    response = await run(
        provider,
        request(
            parameters={
                "n": 2,
                "size": "1536x1024",
                "quality": "high",
                "output_format": "webp",
                "output_compression": 70,
                "background": "opaque",
                "moderation": "low",
            },
            routing={"model": "gpt-image-1"},
            user="user-42",
        ),
        context(events),
    )
    [sent] = openai_server.requests
    assert sent.route == "generations"
    assert sent.json == {
        "model": "gpt-image-1",
        "prompt": "a red fox",
        "n": 2,
        "size": "1536x1024",
        "quality": "high",
        "output_format": "webp",
        "output_compression": 70,
        "background": "opaque",
        "moderation": "low",
        "user": "user-42",
    }
    assert sent.sent_secret("authorization", KEY)
    assert sent.sent_secret("openai-organization", ORG)
    assert "openai-project" not in sent.headers  # its variable is not set
    assert [(item.index, item.format.value) for item in response.data] == [(0, "webp"), (1, "webp")]
    for item in response.data:
        assert item.b64_json is not None
        assert decoded_size(item.b64_json) == (item.width, item.height) == (1536, 1024)
    assert response.model == "gpt-image-1" and response.provider == "openai"
    assert response.usage is not None and response.usage.input_tokens == 12
    assert response.usage.provider["images"] == 2
    assert response.usage.provider["input_text_tokens"] == 12
    assert [type(e).__name__ for e in events.items] == ["StartedEvent", "ProgressEvent"]


async def test_defaults_are_left_to_the_server_and_dall_e_gets_its_own_vocabulary(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(openai_server)
    response = await run(provider, request())
    assert openai_server.requests[0].json == {
        "model": "gpt-image-1.5",
        "prompt": "a red fox",
        "n": 1,
    }
    assert (response.data[0].width, response.data[0].height) == openai_server.auto_size

    provider = make_provider(openai_server)
    response = await run(
        provider,
        request(routing={"model": "dall-e-3"}, parameters={"quality": "high", "size": "1024x1792"}),
    )
    sent = openai_server.requests[1].json
    assert sent is not None
    assert (sent["quality"], sent["response_format"]) == ("hd", "b64_json")
    assert response.revised_prompt == "a revised prompt"


async def test_a_model_outside_the_served_list_is_refused_without_a_call(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(openai_server, models=("gpt-image-1",))
    error = await failure(provider, request(routing={"model": "gpt-image-2"}))
    assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert error.details["supported_models"] == ["gpt-image-1"]
    assert openai_server.calls() == 0


async def test_capabilities_follow_the_documented_models() -> None:
    provider = OpenAIImagesProvider(environ=ENV)
    gpt = await provider.capabilities(None)
    assert gpt.model == "gpt-image-1.5" and gpt.count.max == 10
    assert gpt.masks.max_count == 1 and gpt.edit_images.max_count == 16
    assert gpt.partial_images.max == 3 and "transparent" in gpt.backgrounds
    dalle3 = await provider.capabilities("dall-e-3")
    assert dalle3.count.max == 1 and not dalle3.edits
    assert dalle3.transparent_background.value == "unsupported"
    assert dalle3.sizes.allowed == ["1024x1024", "1024x1792", "1792x1024"]
    mini = await provider.capabilities("gpt-image-1-mini")
    assert mini.input_fidelities == []
    v2 = await provider.capabilities("gpt-image-2")
    assert v2.sizes.supports("2048x1152") and not v2.sizes.supports("2050x1152")
    assert not v2.sizes.supports("3840x3840")
    dalle2 = await provider.capabilities("dall-e-2")
    assert dalle2.edit_images.max_count == 1 and dalle2.qualities == ["auto"]


async def test_a_caller_changing_its_capabilities_copy_changes_nobody_elses() -> None:
    provider = OpenAIImagesProvider(environ=ENV)
    first = await provider.capabilities(None)
    first.model = "changed"
    first.qualities = []
    again = await provider.capabilities(None)
    assert again.model == "gpt-image-1.5" and again.qualities


# -- edits, references and masks -----------------------------------------------------------------


async def test_edit_with_a_mask_sends_multipart_images_and_the_mask(
    openai_server: OpenAIImagesServer,
) -> None:
    source, second = png_bytes(64, 64), png_bytes(64, 64, color=(10, 200, 10))
    mask = png_bytes(64, 64, alpha=True)
    provider = make_provider(openai_server)
    response = await run(
        provider,
        ImageRequest.model_validate(
            {
                "operation": "edit",
                "prompt": "add a hat",
                "images": [b64(source), b64(second)],
                "mask": b64(mask),
                "parameters": {"input_fidelity": "high", "size": "1024x1024"},
                "routing": {"model": "gpt-image-1"},
            }
        ),
    )
    [sent] = openai_server.requests
    assert sent.route == "edits"
    assert [part.name for part in sent.files] == ["image[]", "image[]", "mask"]
    assert [part.data for part in sent.files] == [source, second, mask]
    assert sent.files[2].content_type == "image/png" and sent.files[2].size == (64, 64)
    assert sent.fields == {
        "model": "gpt-image-1",
        "prompt": "add a hat",
        "n": "1",
        "size": "1024x1024",
        "input_fidelity": "high",
    }
    assert (response.data[0].width, response.data[0].height) == (1024, 1024)


async def test_reference_images_turn_a_generation_into_an_edits_call(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(openai_server)
    await run(provider, request(reference_images=[b64(png_bytes(32, 32)), b64(png_bytes(16, 16))]))
    [sent] = openai_server.requests
    assert sent.route == "edits"
    assert [(p.name, p.filename) for p in sent.files] == [
        ("image[]", "image-0.png"),
        ("image[]", "image-1.png"),
    ]


async def test_dall_e_2_edits_send_a_single_image_field(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(openai_server)
    await run(
        provider,
        ImageRequest.model_validate(
            {
                "operation": "edit",
                "prompt": "x",
                "images": [b64(png_bytes(32, 32))],
                "routing": {"model": "dall-e-2"},
            }
        ),
    )
    [sent] = openai_server.requests
    assert [part.name for part in sent.files] == ["image"]
    assert sent.fields["response_format"] == "b64_json"


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (png_bytes(32, 64, alpha=True), "same dimensions"),
        (png_bytes(64, 64), "alpha channel"),
    ],
)
async def test_a_mask_that_cannot_work_is_refused_before_the_call(
    openai_server: OpenAIImagesServer, mask: bytes, message: str
) -> None:
    provider = make_provider(openai_server)
    error = await failure(
        provider,
        ImageRequest.model_validate(
            {
                "operation": "edit",
                "prompt": "x",
                "images": [b64(png_bytes(64, 64))],
                "mask": b64(mask),
            }
        ),
    )
    assert error.code is ErrorCode.INPUT and message in error.message
    assert error.details["field"] == "mask"
    assert openai_server.calls() == 0


async def test_a_local_file_reaches_the_upstream_as_the_engine_loaded_it(
    openai_server: OpenAIImagesServer, tmp_path: Any
) -> None:
    (tmp_path / "in.png").write_bytes(png_bytes(16, 16))
    provider = make_provider(openai_server)
    edit = {"operation": "edit", "prompt": "x"}
    await run(
        provider,
        ImageRequest.model_validate({**edit, "images": [{"type": "file", "path": "in.png"}]}),
        loader=InputLoader([tmp_path]),
    )
    [sent] = openai_server.requests
    assert [part.data for part in sent.files] == [png_bytes(16, 16)]


async def test_inputs_the_engine_did_not_load_are_never_sent(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(openai_server)
    unloaded = ImageRequest.model_validate(
        {"operation": "edit", "prompt": "x", "images": [b64(png_bytes(8, 8))]}
    )
    with pytest.raises(BridgeError) as caught:
        await provider.execute(unloaded, context())  # no inputs on the context
    await provider.shutdown()
    assert caught.value.code is ErrorCode.INTERNAL
    assert openai_server.calls() == 0


# -- streaming -----------------------------------------------------------------------------------


async def test_streamed_partial_images_arrive_as_engine_events(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(openai_server)
    events = Events()
    response = await run(
        provider,
        request(parameters={"n": 2, "partial_images": 2, "size": "256x256"}),
        context(events),
    )
    sent = openai_server.requests[0].json
    assert sent is not None and sent["stream"] is True and sent["partial_images"] == 2
    partials = events.of(PartialImageEvent)
    assert [(p.index, p.partial_index) for p in partials] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert decoded_size(partials[0].b64_json) == (32, 32)
    assert len(events.of(StartedEvent)) == 1 and events.of(ProgressEvent)
    assert [(i.index, i.width) for i in response.data] == [(0, 256), (1, 256)]
    assert response.usage is not None and response.usage.output_tokens == 200


async def test_streamed_edits_use_the_edit_event_names(openai_server: OpenAIImagesServer) -> None:
    provider = make_provider(openai_server)
    events = Events()
    await run(
        provider,
        ImageRequest.model_validate(
            {
                "operation": "edit",
                "prompt": "x",
                "images": [b64(png_bytes(16, 16))],
                "parameters": {"partial_images": 1},
            }
        ),
        context(events),
    )
    assert openai_server.requests[0].fields["stream"] == "true"
    assert [p.index for p in events.of(PartialImageEvent)] == [0]


async def test_an_error_event_in_the_stream_is_a_known_failure(
    openai_server: OpenAIImagesServer,
) -> None:
    openai_server.script(
        Behaviour(stream_error={"code": "moderation_blocked", "message": "blocked", "type": "x"})
    )
    error = await failure(make_provider(openai_server), request(parameters={"partial_images": 1}))
    assert error.code is ErrorCode.SAFETY_REJECTED
    assert error.details["stage"] == "stream" and not error.outcome_unknown
    assert openai_server.calls() == 1


# -- error mapping -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("behaviour", "code", "retryable", "details"),
    [
        (
            Behaviour.fail(400, "invalid_value", param="size"),
            ErrorCode.INVALID_REQUEST,
            False,
            {"http_status": 400, "upstream_code": "invalid_value", "upstream_param": "size"},
        ),
        (
            Behaviour.fail(400, "unsupported_parameter", param="moderation"),
            ErrorCode.UNSUPPORTED_CAPABILITY,
            False,
            {"field": "moderation"},
        ),
        (
            Behaviour.fail(400, None, message="Value 'x' is not supported with this model."),
            ErrorCode.UNSUPPORTED_CAPABILITY,
            False,
            {"http_status": 400},
        ),
        (
            Behaviour.fail(401, "invalid_api_key", type="invalid_request_error"),
            ErrorCode.AUTHENTICATION,
            False,
            {"http_status": 401},
        ),
        (Behaviour.fail(403, None), ErrorCode.PERMISSION_DENIED, False, {"http_status": 403}),
        (
            Behaviour.fail(400, "moderation_blocked", type="image_generation_user_error"),
            ErrorCode.SAFETY_REJECTED,
            False,
            {"upstream_code": "moderation_blocked", "retry_same_request": False},
        ),
        (
            Behaviour.fail(400, "content_policy_violation"),
            ErrorCode.SAFETY_REJECTED,
            False,
            {"safety_category": "content_policy"},
        ),
        (
            Behaviour.fail(
                429, "rate_limit_exceeded", type="requests", headers={"Retry-After": "7"}
            ),
            ErrorCode.RATE_LIMITED,
            True,
            {"retry_after_ms": 7000},
        ),
        (
            Behaviour.fail(429, "insufficient_quota", type="insufficient_quota"),
            ErrorCode.RATE_LIMITED,
            False,
            {"quota_exhausted": True},
        ),
        (Behaviour.fail(500, None, type="server_error"), ErrorCode.UPSTREAM, True, {}),
        (
            Behaviour.fail(503, None, headers={"retry-after-ms": "1500"}),
            ErrorCode.UPSTREAM,
            True,
            {"retry_after_ms": 1500},
        ),
        (Behaviour.fail(404, None), ErrorCode.CONFIGURATION, False, {"http_status": 404}),
        (
            Behaviour.fail(404, "model_not_found"),
            ErrorCode.UNSUPPORTED_CAPABILITY,
            False,
            {"field": "routing.model"},
        ),
    ],
)
async def test_upstream_errors_map_to_stable_codes_after_exactly_one_call(
    openai_server: OpenAIImagesServer,
    behaviour: Behaviour,
    code: ErrorCode,
    retryable: bool,
    details: dict[str, Any],
) -> None:
    openai_server.script(behaviour)
    error = await failure(make_provider(openai_server), request())
    assert (error.code, error.retryable) == (code, retryable)
    assert details.items() <= error.details.items()
    assert not error.outcome_unknown
    assert error.provider == "openai"
    assert openai_server.calls() == 1


async def test_upstream_request_ids_are_kept(openai_server: OpenAIImagesServer) -> None:
    openai_server.script(Behaviour.fail(500, None, headers={"x-request-id": "req_abc123"}))
    error = await failure(make_provider(openai_server), request())
    assert error.upstream_request_id == "req_abc123"


async def test_a_disconnect_mid_body_is_an_unknown_outcome_after_one_call(
    openai_server: OpenAIImagesServer,
) -> None:
    openai_server.script(Behaviour(disconnect_after=40))
    error = await failure(make_provider(openai_server), request())
    assert error.code is ErrorCode.UPSTREAM
    assert error.outcome_unknown and not error.retryable
    assert openai_server.calls() == 1


async def test_a_disconnect_mid_stream_is_an_unknown_outcome(
    openai_server: OpenAIImagesServer,
) -> None:
    openai_server.script(Behaviour(disconnect_after=1))
    error = await failure(make_provider(openai_server), request(parameters={"partial_images": 1}))
    assert error.outcome_unknown and not error.retryable
    assert openai_server.calls() == 1


async def test_a_connect_failure_before_sending_is_retryable_and_not_ambiguous() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAIImagesProvider(
        OpenAIImagesSettings(base_url=f"http://127.0.0.1:{port}/v1"), environ=ENV
    )
    error = await failure(provider, request())
    assert (error.code, error.retryable) == (ErrorCode.UPSTREAM, True)
    assert error.details["stage"] == "connect" and not error.outcome_unknown


async def test_a_timeout_after_sending_is_an_unknown_outcome(
    openai_server: OpenAIImagesServer,
) -> None:
    openai_server.script(Behaviour(delay=5))
    provider = make_provider(openai_server, timeout_ms=300)
    error = await failure(provider, request())
    assert error.code is ErrorCode.TIMEOUT
    assert error.outcome_unknown and not error.retryable
    assert openai_server.calls() == 1


async def test_an_answer_in_time_is_not_lost_to_the_time_its_check_takes(
    openai_server: OpenAIImagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call's time limit bounds the exchange with the upstream. The answer's check
    starts in a worker thread as soon as the body is in, but a check that outlasts the
    limit does not turn an answer that arrived, perhaps billed, into a timeout."""
    from imagebridge.providers.openai import results as module

    checked = module._decode_and_examine

    def slow_check(payload: str, limits: Any) -> Any:
        time.sleep(0.6)
        return checked(payload, limits)

    monkeypatch.setattr(module, "_decode_and_examine", slow_check)
    response = await run(make_provider(openai_server, timeout_ms=300), request())
    assert len(response.data) == 1 and response.data[0].width > 0
    assert openai_server.calls() == 1


async def test_an_answer_nobody_awaits_leaves_no_unretrieved_failure() -> None:
    """An answer read for a call that was given up on (cancelled as it completed) may fail
    after nobody waits for it any more: that is not reported as an unhandled error."""
    from imagebridge.imaging.inspect import ImageLimits
    from imagebridge.providers.openai.results import start_reading

    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, ctx: reported.append(ctx))
    future = start_reading([b"not json"], ImageLimits(), max_base64_chars=1024)
    await asyncio.wait([future])
    del future
    gc.collect()
    assert reported == []


async def test_cancellation_during_the_call_stops_it_and_is_ambiguous(
    openai_server: OpenAIImagesServer,
) -> None:
    openai_server.script(Behaviour(delay=5))
    token = CancelToken()
    provider = make_provider(openai_server)
    task = asyncio.ensure_future(run(provider, request(), context(token=token)))
    for _ in range(500):
        if openai_server.calls():
            break
        await asyncio.sleep(0.01)
    token.cancel()
    with pytest.raises(BridgeError) as caught:
        await asyncio.wait_for(task, 2)
    assert caught.value.code is ErrorCode.CANCELLED and caught.value.outcome_unknown


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        (Behaviour(raw_body=b"<html>oops</html>", content_type="text/html"), "not valid JSON"),
        (Behaviour(raw_body=b'{"data": [{"b64_json": "!!!"}]}'), "malformed base64"),
        (
            Behaviour(raw_body=json.dumps({"data": [{"b64_json": "aGVsbG8="}]}).encode()),
            "failed verification",
        ),
        (Behaviour(raw_body=b'{"nodata": true}'), "no data list"),
    ],
)
async def test_an_unusable_success_body_is_a_protocol_error_with_unknown_outcome(
    openai_server: OpenAIImagesServer, behaviour: Behaviour, message: str
) -> None:
    openai_server.script(behaviour)
    error = await failure(make_provider(openai_server), request())
    assert error.code is ErrorCode.PROTOCOL and message in error.message
    assert error.outcome_unknown


async def test_response_size_is_bounded(openai_server: OpenAIImagesServer) -> None:
    error = await failure(
        make_provider(openai_server, max_response_bytes=1024),
        request(parameters={"size": "256x256"}),
    )
    assert error.code is ErrorCode.PROTOCOL and error.details["maximum_bytes"] == 1024
    assert error.outcome_unknown


async def test_fewer_images_than_asked_fail_fast_or_become_best_effort_failures(
    openai_server: OpenAIImagesServer,
) -> None:
    openai_server.script(Behaviour(images=1), Behaviour(images=1))
    error = await failure(make_provider(openai_server), request(parameters={"n": 3}))
    assert error.code is ErrorCode.UPSTREAM and error.outcome_unknown
    response = await run(
        make_provider(openai_server),
        request(parameters={"n": 3, "failure_policy": "best_effort"}),
    )
    assert [item.index for item in response.data] == [0]
    assert [failure.index for failure in response.failures] == [1, 2]


# -- credentials -------------------------------------------------------------------------------


async def test_a_missing_api_key_fails_before_any_call(openai_server: OpenAIImagesServer) -> None:
    provider = make_provider(openai_server, environ={})
    error = await failure(provider, request())
    assert error.code is ErrorCode.AUTHENTICATION
    assert error.details["variable"] == "OPENAI_API_KEY"
    with pytest.raises(BridgeError):
        await provider.check_ready()
    assert openai_server.calls() == 0
    await make_provider(openai_server).check_ready()  # the key is set: no error


async def test_keys_are_read_at_call_time(openai_server: OpenAIImagesServer) -> None:
    environ = {"OPENAI_API_KEY": "sk-first"}
    provider = make_provider(openai_server, environ=environ)
    await run(provider, request())
    environ["OPENAI_API_KEY"] = "sk-second"
    await run(provider, request())
    first, second = openai_server.requests
    assert first.sent_secret("authorization", "sk-first")
    assert second.sent_secret("authorization", "sk-second")


async def test_instances_without_a_key_variable_send_no_authorization(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(
        openai_server, api_key_env=None, organization_env=None, project_env=None
    )
    await run(provider, request())
    assert "authorization" not in openai_server.requests[0].headers


async def test_secrets_never_reach_logs_errors_or_reprs(
    openai_server: OpenAIImagesServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    openai_server.script(
        Behaviour.fail(
            401,
            f"invalid_api_key {KEY}",
            param=KEY,
            message=f"Incorrect API key provided: {KEY}",
        )
    )
    provider = make_provider(openai_server)
    error = await failure(provider, request())
    await run(provider, request(prompt="a secret prompt about foxes"))
    texts = [
        caplog.text,
        json.dumps(error.to_dict()),
        repr(error),
        str(error),
        repr(provider),
        repr(provider.settings),
    ]
    for text in texts:
        assert KEY not in text and ORG not in text
        assert "secret prompt" not in text
    assert error.code is ErrorCode.AUTHENTICATION
    assert error.details.get("upstream_code") == "redacted"


# -- capability overrides for compatible servers ---------------------------------------------------


async def test_overrides_describe_what_a_compatible_server_accepts(
    openai_server: OpenAIImagesServer,
) -> None:
    provider = make_provider(
        openai_server,
        name="localai",
        models=("stablediffusion",),
        api_key_env=None,
        overrides=CapabilityOverrides(
            sizes=("512x512", "auto"),
            qualities=("auto", "high"),
            output_formats=("png",),
            transparent_background="emulated",
            masks=False,
            partial_images=0,
        ),
    )
    caps = await provider.capabilities(None)
    assert caps.provider == "localai" and caps.model == "stablediffusion"
    assert caps.sizes.allowed == ["512x512"] and caps.sizes.auto and not caps.sizes.arbitrary
    assert [q.value for q in caps.qualities] == ["auto", "high"]
    assert caps.transparent_background.value == "emulated"
    assert not caps.masks.available and caps.count.max == 1
    await run(provider, request(parameters={"size": "512x512", "quality": "high"}))
    sent = openai_server.requests[0].json
    assert sent == {
        "model": "stablediffusion",
        "prompt": "a red fox",
        "n": 1,
        "size": "512x512",
        "quality": "high",
        "response_format": "b64_json",
    }


def test_inconsistent_overrides_are_a_configuration_error() -> None:
    with pytest.raises(BridgeError) as caught:
        OpenAIImagesProvider(
            OpenAIImagesSettings(
                overrides=CapabilityOverrides(
                    transparent_background="emulated", output_formats=("jpeg",)
                )
            )
        )
    assert caught.value.code is ErrorCode.CONFIGURATION


def test_native_count_is_capped_for_documented_models_only() -> None:
    provider = OpenAIImagesProvider(
        OpenAIImagesSettings(models=("dall-e-3", "gpt-image-1", "sdxl"), native_max_outputs=4)
    )
    assert provider.native_counts() == {"dall-e-3": 1, "gpt-image-1": 4, "sdxl": 4}
    capped = OpenAIImagesProvider(OpenAIImagesSettings(models=("gpt-image-1",), max_outputs=3))
    assert capped.native_counts() == {"gpt-image-1": 3}


# -- image URLs in the answer (DALL-E, OpenedAI Images, LocalAI) ---------------------------------


def url_answer(*urls: str) -> Behaviour:
    return Behaviour(raw_body=json.dumps({"data": [{"url": url} for url in urls]}).encode())


async def test_data_urls_in_the_answer_are_decoded_and_verified(
    openai_server: OpenAIImagesServer,
) -> None:
    image = png_bytes(24, 16)
    openai_server.script(url_answer("data:image/png;base64," + base64.b64encode(image).decode()))
    response = await run(make_provider(openai_server), request())
    [item] = response.data
    assert item.b64_json is not None and base64.b64decode(item.b64_json) == image
    assert (item.width, item.height) == (24, 16)


@pytest.mark.usefixtures("no_external_network")
async def test_remote_image_urls_need_the_remote_output_fetcher(
    openai_server: OpenAIImagesServer,
) -> None:
    openai_server.script(url_answer("https://cdn.example/img.png"))
    error = await failure(make_provider(openai_server), request())
    assert error.code is ErrorCode.CONFIGURATION
    assert "artifacts.remote_output" in error.message
    assert error.outcome_unknown  # the upstream generated (and may have billed) the image
    assert openai_server.calls() == 1


@pytest.mark.usefixtures("no_external_network")
@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/img.png",
        "http://[::ffff:127.0.0.1]/img.png",
    ],
)
async def test_remote_image_urls_pointing_at_private_addresses_are_never_fetched(
    openai_server: OpenAIImagesServer, url: str
) -> None:
    openai_server.script(url_answer(url))
    fetcher = RemoteImageFetcher(RemoteFetchPolicy(enabled=True))
    provider = OpenAIImagesProvider(
        OpenAIImagesSettings(base_url=openai_server.base_url), output_fetcher=fetcher, environ=ENV
    )
    error = await failure(provider, request())
    assert (error.code, error.message) == (
        ErrorCode.UPSTREAM,
        "the upstream image URL could not be fetched",
    )
    assert "private or reserved" in error.details["reason"]
    assert error.outcome_unknown


@pytest.mark.usefixtures("no_external_network")
async def test_remote_image_urls_are_fetched_through_the_guarded_fetcher(
    openai_server: OpenAIImagesServer,
) -> None:
    image = png_bytes(20, 12)
    async with local_server() as images:
        images.routes["/out.png"] = Route(headers={"Content-Type": "image/png"}, body=image)
        openai_server.script(url_answer(f"{images.origin}/out.png"))
        fetcher = RemoteImageFetcher(
            RemoteFetchPolicy(
                enabled=True,
                allowed_ports=frozenset({images.port}),
                allow_private_networks=True,  # the test's image host is on loopback
            )
        )
        provider = OpenAIImagesProvider(
            OpenAIImagesSettings(base_url=openai_server.base_url),
            output_fetcher=fetcher,
            environ=ENV,
        )
        response = await run(provider, request())
    [item] = response.data
    assert item.b64_json is not None and base64.b64decode(item.b64_json) == image
    assert [seen.path for seen in images.seen] == ["/out.png"]


# -- handing the decoded outputs to the materializer ----------------------------------------------


@pytest.mark.parametrize(
    ("early_max_pixels", "output_format", "fully_verified"),
    [
        (2048 * 2048, "webp", True),
        (1, "webp", False),  # its check needs a pixel buffer: left to the materializer
        (1, "png", True),  # a PNG's scanline check needs none, at any size
    ],
)
async def test_outputs_reach_the_materializer_decoded_and_verified_when_cheap(
    openai_server: OpenAIImagesServer,
    monkeypatch: pytest.MonkeyPatch,
    early_max_pixels: int,
    output_format: str,
    fully_verified: bool,
) -> None:
    from imagebridge.providers.openai import results as module

    monkeypatch.setattr(module, "EARLY_VERIFY_MAX_PIXELS", early_max_pixels)
    provider = make_provider(openai_server)
    response = await run(
        provider,
        request(routing={"model": "gpt-image-1"}, parameters={"output_format": output_format}),
    )

    [item] = response.data
    payload = take_decoded(item)
    assert payload is not None
    assert payload.data == base64.b64decode(item.b64_json or "")
    assert (payload.info.width, payload.info.height, payload.info.sha256) == (
        item.width,
        item.height,
        item.sha256,
    )
    limits = provider.settings.image_limits
    assert payload.verified_under == (limits if fully_verified else None)
