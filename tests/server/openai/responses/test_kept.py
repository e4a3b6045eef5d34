"""Kept responses through the newest ``openai`` SDK with its default retries and timeouts:
``store``, retrieve, background (queued → in_progress → completed), resume with
``starting_after``, cancel, delete, ``previous_response_id`` and ``item_reference`` edits,
the owner rule, the restart rule and the ``response.*`` webhooks. Every answer is decoded
strictly by the SDK's own models."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response
from openai.types.webhooks import ResponseCompletedWebhookEvent

from imagebridge.server import ServerOptions
from tests.server.conftest import LiveServer, ServeFactory, start_server
from tests.server.openai.responses.conftest import CODEX_SIZE, EVENTS, TOOL, strict
from tests.support.webhook_receiver import Receiver

SLOW = "[mock:latency=2500] a slow red fox"


def client(server: LiveServer, token: str = "x") -> openai.OpenAI:  # noqa: S107
    """The SDK as a user makes it: default retries and timeouts."""
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=token)


def checked(raw: Any) -> Response:
    """A raw SDK answer decoded strictly from its bytes, then as the SDK parses it."""
    strict(json.loads(raw.http_response.text))
    parsed: Response = raw.parse()
    return parsed


def create(sdk: openai.OpenAI, **body: Any) -> Response:
    body.setdefault("model", "gpt-5.5")
    body.setdefault("tools", [TOOL])
    return checked(sdk.responses.with_raw_response.create(**body))


def retrieve(sdk: openai.OpenAI, response_id: str) -> Response:
    return checked(sdk.responses.with_raw_response.retrieve(response_id))


def until(
    sdk: openai.OpenAI, response_id: str, done: Callable[[Response], bool], timeout: float = 30
) -> Response:
    """Poll the response (every answer strict) until ``done`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        answer = retrieve(sdk, response_id)
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def finished(answer: Response) -> bool:
    return answer.status in ("completed", "failed", "cancelled", "incomplete")


def image_of(answer: Response) -> str:
    call = answer.output[0]
    assert call.type == "image_generation_call" and call.result is not None
    return call.result


def raw_events(server: LiveServer, response_id: str, query: str) -> list[dict[str, Any]]:
    """``GET …?stream=true`` as bytes, every event decoded strictly by the SDK's union."""
    with server.client() as http:
        answer = http.get(f"/v1/responses/{response_id}?stream=true{query}")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = []
    for block in answer.text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if lines:
            data = json.loads(lines[1].removeprefix("data: "))
            EVENTS.validate_python(data, strict=True)
            events.append(data)
    return events


@pytest.fixture(scope="module")
def bridge(serve_module: ServeFactory) -> LiveServer:
    return serve_module()


# -- kept synchronous responses ---------------------------------------------------------------


def test_a_response_is_kept_and_retrieved_as_it_was_answered(bridge: LiveServer) -> None:
    sdk = client(bridge)
    made = create(sdk, input="a red fox", metadata={"ticket": "7"})
    got = retrieve(sdk, made.id)  # at once: its record is written just after the answer
    assert (got.id, got.status, got.background) == (made.id, "completed", False)
    assert [item.id for item in got.output] == [item.id for item in made.output]
    assert image_of(got) == image_of(made)
    assert got.metadata == {"ticket": "7"} and got.model == "gpt-5.5"
    assert got.output[1].type == "message"


def test_a_streamed_response_is_kept_too(bridge: LiveServer) -> None:
    sdk = client(bridge)
    with sdk.responses.create(
        model="gpt-5.5",
        input="a fox",
        tools=[TOOL],
        stream=True,  # type: ignore[list-item]
    ) as events:
        done = [event for event in events if event.type == "response.completed"]
    made = done[0].response  # type: ignore[union-attr]
    got = until(sdk, made.id, finished)
    assert got.status == "completed" and image_of(got) == image_of(made)


def test_a_failed_stream_is_kept_failed(serve: ServeFactory) -> None:
    sdk = client(serve(options=ServerOptions(heartbeat_interval=0.05)))  # started at once
    with sdk.responses.create(
        model="gpt-5.5",
        input="[mock:latency=300][mock:fail=upstream] a fox",
        tools=[TOOL],  # type: ignore[list-item]
        stream=True,
    ) as events:
        last = list(events)[-1]
    assert last.type == "response.failed"
    got = until(sdk, last.response.id, finished)  # type: ignore[union-attr]
    assert got.status == "failed" and got.error is not None


def test_a_retried_create_with_the_same_key_answers_the_same_response(
    bridge: LiveServer,
) -> None:
    sdk = client(bridge)
    for background in (False, True):
        key = {"Idempotency-Key": f"same-fox-{background}"}
        first = create(sdk, input="a keyed fox", background=background, extra_headers=key)
        again = create(sdk, input="a keyed fox", background=background, extra_headers=key)
        assert again.id == first.id
        assert until(sdk, first.id, finished).status == "completed"


def test_store_false_is_never_retrievable(bridge: LiveServer) -> None:
    sdk = client(bridge)
    made = create(sdk, input="a fox", store=False)
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.responses.retrieve(made.id)
    assert caught.value.status_code == 404
    body = caught.value.body
    assert isinstance(body, dict) and body["message"] == "response was not found"


def test_unknown_ids_are_not_found_and_queries_are_checked(bridge: LiveServer) -> None:
    sdk = client(bridge)
    for unknown in ("resp_0", "nothing", "resp_" + "0" * 100):
        with pytest.raises(openai.NotFoundError):
            sdk.responses.retrieve(unknown)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.delete("resp_0")
    with pytest.raises(openai.NotFoundError):
        sdk.responses.cancel("resp_0")
    made = create(sdk, input="a fox")
    with bridge.client() as http:
        bad = http.get(f"/v1/responses/{made.id}?starting_after=-1")
        odd = http.get(f"/v1/responses/{made.id}?colour=blue")
    assert (bad.status_code, bad.json()["error"]["param"]) == (422, "starting_after")
    assert odd.status_code == 422


def test_a_synchronous_response_cannot_be_cancelled(bridge: LiveServer) -> None:
    sdk = client(bridge)
    made = create(sdk, input="a fox")
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.responses.cancel(made.id)
    assert caught.value.status_code == 400


# -- background -------------------------------------------------------------------------------


def test_background_answers_queued_then_completes(bridge: LiveServer) -> None:
    sdk = client(bridge)
    made = create(sdk, input="a red fox", background=True)
    assert (made.status, made.background, made.output) == ("queued", True, [])
    seen: set[str] = set()
    got = until(sdk, made.id, lambda answer: seen.add(answer.status) or finished(answer))  # type: ignore[func-returns-value]
    assert got.status == "completed" and got.background is True
    assert seen <= {"queued", "in_progress", "completed"}
    assert got.output[1].type == "message" and image_of(got)
    assert got.error is None and got.completed_at is not None


def test_a_failed_background_response_says_why_in_openai_terms(bridge: LiveServer) -> None:
    sdk = client(bridge)
    made = create(sdk, input="[mock:fail=safety_rejected] a fox", background=True)
    got = until(sdk, made.id, finished)
    assert got.status == "failed" and got.error is not None
    assert got.error.code == "image_content_policy_violation"
    assert got.output[0].status == "failed"  # type: ignore[union-attr]
    with bridge.client() as http:
        native = http.get(f"/v1/responses/{made.id}").json()["imagegen_bridge"]["error"]
    assert native["code"] == "safety_rejected"
    events = raw_events(bridge, made.id, "")
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "image_content_policy_violation"


def test_background_with_store_false_is_refused_naming_store(bridge: LiveServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client(bridge).responses.create(
            model="gpt-5.5",
            input="a fox",
            tools=[TOOL],
            background=True,
            store=False,  # type: ignore[list-item]
        )
    assert caught.value.param == "store"  # type: ignore[attr-defined]


def test_a_background_stream_resumes_after_a_sequence_number(bridge: LiveServer) -> None:
    sdk = client(bridge)
    made = create(sdk, input=SLOW, background=True)
    whole = raw_events(bridge, made.id, "")
    numbers = [event["sequence_number"] for event in whole]
    assert numbers == list(range(len(whole)))
    assert whole[0]["type"] == "response.created"
    assert whole[0]["response"]["status"] == "queued"
    assert whole[-1]["type"] == "response.completed"
    tail = raw_events(bridge, made.id, "&starting_after=3")
    assert tail == whole[4:]
    resumed = list(sdk.responses.retrieve(made.id, stream=True, starting_after=5))
    assert [event.sequence_number for event in resumed] == numbers[6:]
    assert resumed[-1].type == "response.completed"


async def test_the_async_sdk_resumes_too(bridge: LiveServer) -> None:
    sdk = openai.AsyncOpenAI(base_url=f"{bridge.url}/v1", api_key="x")
    made = await sdk.responses.create(
        model="gpt-5.5",
        input=SLOW,
        tools=[TOOL],
        background=True,  # type: ignore[list-item]
    )
    stream = await sdk.responses.retrieve(made.id, stream=True, starting_after=1)
    numbers = [event.sequence_number async for event in stream]
    assert numbers[0] == 2 and numbers == list(range(2, 2 + len(numbers)))
    await sdk.close()


def test_a_background_create_can_stream_from_the_start(bridge: LiveServer) -> None:
    sdk = client(bridge)
    with sdk.responses.create(
        model="gpt-5.5",
        input="a fox",
        tools=[TOOL],
        background=True,
        stream=True,  # type: ignore[list-item]
    ) as events:
        kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"


def test_cancel_stops_a_running_background_response(bridge: LiveServer) -> None:
    sdk = client(bridge)
    made = create(sdk, input="[mock:latency=5000] a fox", background=True)
    until(sdk, made.id, lambda answer: answer.status == "in_progress")
    cancelled = checked(sdk.responses.with_raw_response.cancel(made.id))
    assert cancelled.id == made.id
    got = until(sdk, made.id, finished)
    assert got.status == "cancelled" and got.error is None
    again = checked(sdk.responses.with_raw_response.cancel(made.id))
    assert again.status == "cancelled"


def test_a_queued_background_response_is_cancelled_at_once(serve: ServeFactory) -> None:
    server = serve("server.jobs.max_running=1")
    sdk = client(server)
    blocker = create(sdk, input="[mock:latency=3000] first", background=True)
    waiting = create(sdk, input="second", background=True)
    assert retrieve(sdk, waiting.id).status == "queued"
    cancelled = checked(sdk.responses.with_raw_response.cancel(waiting.id))
    assert cancelled.status == "cancelled"
    sdk.responses.cancel(blocker.id)


# -- delete, follow-ups -----------------------------------------------------------------------


def test_delete_forgets_the_response(bridge: LiveServer) -> None:
    sdk = client(bridge)
    made = create(sdk, input="a fox")
    with bridge.client() as http:
        deleted = http.delete(f"/v1/responses/{made.id}")
    assert deleted.json() == {"id": made.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.delete(made.id)
    with pytest.raises(openai.BadRequestError) as caught:
        create(sdk, input="make it blue", previous_response_id=made.id)
    assert caught.value.param == "previous_response_id"  # type: ignore[attr-defined]


def test_previous_response_id_edits_the_kept_image(bridge: LiveServer) -> None:
    sdk = client(bridge)
    first = create(sdk, input="a red fox")
    edited = create(sdk, input="make it blue", previous_response_id=first.id)
    assert edited.previous_response_id == first.id
    message = edited.output[1]
    assert message.type == "message"
    assert message.content[0].text.startswith("Edited the image")  # type: ignore[union-attr]
    fresh = create(
        sdk,
        input="a new fox",
        previous_response_id=first.id,
        tools=[{**TOOL, "action": "generate"}],
    )
    assert fresh.output[1].content[0].text.startswith("Generated")  # type: ignore[union-attr]


def test_an_item_reference_names_a_kept_image_call(bridge: LiveServer) -> None:
    sdk = client(bridge)
    first = create(sdk, input="a red fox")
    call_id = first.output[0].id
    edited = create(
        sdk,
        input=[
            {"type": "item_reference", "id": call_id},
            {"role": "user", "content": "make it blue"},
        ],
    )
    assert edited.output[1].content[0].text.startswith("Edited the image")  # type: ignore[union-attr]
    with pytest.raises(openai.BadRequestError) as caught:
        create(sdk, input=[{"type": "item_reference", "id": "ig_unknown"}])
    assert caught.value.param == "input[0]"  # type: ignore[attr-defined]


@pytest.mark.parametrize("unusable", ["resp_unknown", "store_false"])
def test_an_unusable_previous_response_is_refused_by_name(
    bridge: LiveServer, unusable: str
) -> None:
    sdk = client(bridge)
    previous = unusable
    if unusable == "store_false":
        previous = create(sdk, input="a fox", store=False).id
    with pytest.raises(openai.BadRequestError) as caught:
        create(sdk, input="make it blue", previous_response_id=previous)
    assert caught.value.param == "previous_response_id"  # type: ignore[attr-defined]


# -- owners -----------------------------------------------------------------------------------

ADMIN = "admin-token-SECRET-1"


def test_another_keys_response_is_not_found(serve: ServeFactory) -> None:
    server = serve(
        "server.keys.enabled=true", 'server.bearer_token_env="BRIDGE_ADMIN"',
        env={"BRIDGE_ADMIN": ADMIN},
    )  # fmt: skip
    with server.client(headers={"authorization": f"Bearer {ADMIN}"}) as boss:
        ann = boss.post("/v1/keys", json={"name": "ann"}).json()["secret"]
        bob = boss.post("/v1/keys", json={"name": "bob"}).json()["secret"]
    made = create(client(server, ann), input="ann's fox", background=True)
    until(client(server, ann), made.id, finished)
    other = client(server, bob)
    for call in (other.responses.retrieve, other.responses.cancel, other.responses.delete):
        with pytest.raises(openai.NotFoundError):
            call(made.id)
    with pytest.raises(openai.BadRequestError) as caught:
        create(other, input="make it blue", previous_response_id=made.id)
    assert caught.value.param == "previous_response_id"  # type: ignore[attr-defined]
    assert retrieve(client(server, ann), made.id).status == "completed"


# -- webhooks ---------------------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.stop()


def test_a_background_response_sends_its_signed_webhook(
    serve: ServeFactory, receiver: Receiver
) -> None:
    receiver.start()
    server = serve(
        "server.webhooks.enabled=true",
        "server.webhooks.allow_private_networks=true",
        f"server.webhooks.allowed_ports=[{receiver.port}]",
        "server.webhooks.retry_initial_ms=50",
        "server.webhooks.poll_interval_ms=20",
    )
    events = ["response.completed", "response.failed", "response.cancelled", "job.succeeded"]
    sdk = client(server)
    created = sdk.webhooks.create(name="hooks", url=receiver.url, event_types=events)  # type: ignore[attr-defined]
    receiver.secret = created.signing_secret
    made = create(sdk, input="a fox", background=True)
    cancelled = create(sdk, input="[mock:latency=5000] a fox", background=True)
    until(sdk, cancelled.id, lambda answer: answer.status == "in_progress")
    sdk.responses.cancel(cancelled.id)
    create(sdk, input="a synchronous fox")  # answered: no webhook
    deadline = time.monotonic() + 20
    while len(receiver.accepted()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    received = receiver.snapshot()
    assert all(item.verified for item in received)
    kinds = {item.event["data"]["id"]: item.event["type"] for item in received if item.event}
    assert kinds == {made.id: "response.completed", cancelled.id: "response.cancelled"}
    first = next(item for item in received if item.event and item.event["data"]["id"] == made.id)
    hooks = openai.OpenAI(api_key="x", webhook_secret=receiver.secret).webhooks
    event = hooks.unwrap(first.body, first.headers)
    assert isinstance(event, ResponseCompletedWebhookEvent)
    assert event.data.id == made.id and event.object == "event"


# -- the restart rule ---------------------------------------------------------------------------


def test_a_started_background_response_fails_at_a_restart_and_a_queued_one_runs(
    tmp_path: Path,
) -> None:
    sets = ("server.shutdown_grace_ms=100", "server.jobs.max_running=1")
    first = start_server(tmp_path / "bridge", sets)
    try:
        sdk = client(first)
        started = create(sdk, input="[mock:latency=20000] a fox", background=True)
        queued = create(sdk, input="a later fox", background=True)
        until(sdk, started.id, lambda answer: answer.status == "in_progress")
        assert retrieve(sdk, queued.id).status == "queued"
    finally:
        first.stop()
    second = start_server(tmp_path / "bridge", sets)
    try:
        sdk = client(second)
        failed = until(sdk, started.id, finished)
        assert failed.status == "failed" and failed.error is not None
        assert failed.error.code == "server_error"
        native = json.loads(httpx.get(f"{second.url}/v1/responses/{started.id}").text)[
            "imagegen_bridge"
        ]["error"]
        assert native["code"] == "cancelled"
        assert native["details"]["recovery"] == "inspect_history_before_retrying"
        assert until(sdk, queued.id, finished).status == "completed"
    finally:
        second.stop()


# -- the Codex backend ------------------------------------------------------------------------


def test_background_and_follow_up_through_the_codex_backend(codex_served: LiveServer) -> None:
    sdk = client(codex_served)
    tool = {"type": "image_generation", "size": CODEX_SIZE}
    made = create(sdk, input="a red fox", tools=[tool], background=True)
    got = until(sdk, made.id, finished, timeout=60)
    assert got.status == "completed" and image_of(got)
    edited = create(sdk, input="make it blue", tools=[tool], previous_response_id=made.id)
    assert edited.output[1].content[0].text.startswith("Edited the image")  # type: ignore[union-attr]
    assert retrieve(sdk, edited.id).status == "completed"
