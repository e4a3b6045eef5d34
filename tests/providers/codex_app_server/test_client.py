"""The client end to end against the fake codex: handshake, turns, images, failures, restarts."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server import (
    AppServerClient,
    TurnImageCollector,
    TurnImages,
    collect_turn_images,
)
from imagebridge.providers.codex_app_server.client import ActiveTurn
from imagebridge.providers.codex_app_server.threads import turn_prompt_text, turn_start_params
from tests.support.fake_codex import FINAL_PNG, read_log

from .support import FakeCodexFactory, assert_reaped

Schema = Callable[[str], dict[str, Any]]


def received(fake: FakeCodexFactory, method: str) -> list[dict[str, Any]]:
    return [
        entry["received"]
        for entry in read_log(fake.state_dir)
        if entry.get("received", {}).get("method") == method
    ]


def events(fake: FakeCodexFactory, name: str) -> list[dict[str, Any]]:
    return [entry for entry in read_log(fake.state_dir) if entry.get("event") == name]


async def start_turn(client: AppServerClient, thread_id: str, prompt: str = "a cat") -> ActiveTurn:
    params = turn_start_params(thread_id, turn_prompt_text(prompt))
    return await client.start_turn(thread_id, params["input"])


async def generate(
    client: AppServerClient, thread_id: str, *, wait: bool = True, timeout: float = 10
) -> TurnImages:
    turn = await start_turn(client, thread_id)
    async with turn:
        collector = TurnImageCollector(
            thread_id=thread_id, turn_id=turn.turn_id, codex_home=client.codex_home
        )
        async with asyncio.timeout(timeout):
            return await collect_turn_images(turn, collector, wait_for_turn_completed=wait)


async def new_thread(client: AppServerClient, tmp_path: Path, *, ephemeral: bool = True) -> str:
    return await client.start_thread(cwd=tmp_path, ephemeral=ephemeral)


# -- handshake and readiness --------------------------------------------------------------


async def test_handshake_sends_initialize_then_initialized(
    fake_codex: FakeCodexFactory, schema: Schema
) -> None:
    client = fake_codex.client()
    await client.start()
    await client.read_capabilities()  # a round trip: the fake has logged what came before
    (init,) = received(fake_codex, "initialize")
    assert init["id"] == 1
    jsonschema.validate(init["params"], schema("InitializeParams.json"))
    assert init["params"]["clientInfo"] == {
        "name": "imagegen-bridge",
        "title": "Imagegen Bridge",
        "version": "0.3.0",
    }
    assert init["params"]["capabilities"] == {
        "experimentalApi": False,
        "requestAttestation": False,
        "mcpServerOpenaiFormElicitation": False,
    }
    assert len(received(fake_codex, "initialized")) == 1
    assert client.server_info is not None
    assert client.server_info.user_agent == "imagegen-bridge/0.169.0-fake"
    assert client.codex_home == fake_codex.codex_home  # CODEX_HOME reached the child
    assert client.restart_count() == 0


async def test_readiness_reads_account_and_capabilities(fake_codex: FakeCodexFactory) -> None:
    client = fake_codex.client()
    account = await client.check_ready()
    assert account.signed_in and account.account_type == "chatgpt"
    assert account.plan_type == "plus"
    assert "fake@example.invalid" not in repr(account)
    capabilities = await client.read_capabilities()
    assert capabilities.image_generation and capabilities.web_search


async def test_readiness_fails_without_an_account(fake_codex: FakeCodexFactory) -> None:
    client = fake_codex.client({"account": None})
    with pytest.raises(BridgeError) as caught:
        await client.check_ready()
    assert caught.value.code is ErrorCode.AUTHENTICATION


async def test_readiness_fails_without_image_generation(fake_codex: FakeCodexFactory) -> None:
    client = fake_codex.client({"image_generation": False})
    with pytest.raises(BridgeError) as caught:
        await client.check_ready()
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY


async def test_a_failing_executable_fails_start(fake_codex: FakeCodexFactory) -> None:
    client = fake_codex.client({"exit_on_start": 1})
    with pytest.raises(BridgeError) as caught:
        await client.start()
    assert caught.value.code is ErrorCode.UPSTREAM


# -- requests -----------------------------------------------------------------------------


async def test_per_request_timeout_leaves_the_link_usable(fake_codex: FakeCodexFactory) -> None:
    client = fake_codex.client({"delays": {"account/read": 1.0}})
    await client.start()
    with pytest.raises(BridgeError) as caught:
        await client.read_account(timeout=0.1)
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.retryable
    assert (await client.read_capabilities()).image_generation
    assert client.restart_count() == 0


async def test_concurrent_requests_are_correlated_by_id(fake_codex: FakeCodexFactory) -> None:
    # account/read is answered last although it was sent first.
    client = fake_codex.client({"delays": {"account/read": 0.3}})
    await client.start()
    account, capabilities = await asyncio.gather(client.read_account(), client.read_capabilities())
    assert account.signed_in
    assert capabilities.image_generation


async def test_default_timeout_comes_from_the_options(fake_codex: FakeCodexFactory) -> None:
    client = fake_codex.client(
        {"no_answer": ["account/read"]}, rpc_timeout_ms=200, wait_started=True
    )

    async def start_and_read() -> None:
        # the handshake runs under the same default: on a busy machine the fake may answer
        # ``initialize`` after 200 ms, and that request is then the one that times out
        await client.start()
        await client.read_account()

    with pytest.raises(BridgeError) as caught:
        await start_and_read()
    assert caught.value.details["rpc_method"] in ("initialize", "account/read")
    assert caught.value.details["timeout_ms"] == 200


# -- turns and images ---------------------------------------------------------------------


async def test_a_full_session_generate_resume_and_archive(
    fake_codex: FakeCodexFactory, tmp_path: Path
) -> None:
    client = fake_codex.client()
    thread_id = await new_thread(client, tmp_path, ephemeral=False)
    first = await generate(client, thread_id)
    assert first.turn_completed and first.turn_status == "completed"
    (image,) = first.images
    assert image.data == FINAL_PNG and image.revised_prompt == "a tiny blue square (fake)"
    await client.resume_thread(thread_id)
    second = await generate(client, thread_id)
    assert second.images[0].data == FINAL_PNG
    await client.archive_thread(thread_id)
    with pytest.raises(BridgeError) as gone:
        await client.resume_thread(thread_id)
    assert gone.value.code is ErrorCode.UPSTREAM
    (resume, _) = received(fake_codex, "thread/resume")
    assert resume["params"] == {"threadId": thread_id, "excludeTurns": True}
    (start,) = received(fake_codex, "thread/start")
    assert start["params"]["approvalPolicy"] == "never"
    assert start["params"]["sandbox"] == "read-only"
    turns = received(fake_codex, "turn/start")
    assert [t["params"]["input_types"] for t in turns] == [["text"], ["text"]]


async def test_capture_can_stop_at_the_image_and_interrupt(
    fake_codex: FakeCodexFactory, tmp_path: Path
) -> None:
    client = fake_codex.client()
    thread_id = await new_thread(client, tmp_path)
    turn = await start_turn(client, thread_id)
    collector = TurnImageCollector(
        thread_id=thread_id, turn_id=turn.turn_id, codex_home=client.codex_home
    )
    result = await collect_turn_images(turn, collector)
    assert collector.image_arrived.is_set()
    assert not result.turn_completed
    assert result.images[0].data == FINAL_PNG
    assert await turn.interrupt(timeout=2) in {"completed", "interrupted"}
    turn.close()


@pytest.mark.parametrize("mode", ["saved_path", "file_id", "partial", "late_turn_noise"])
async def test_images_in_every_form_current_codex_emits(
    fake_codex: FakeCodexFactory, tmp_path: Path, mode: str
) -> None:
    client = fake_codex.client({"default_turn": {"mode": mode}})
    thread_id = await new_thread(client, tmp_path)
    result = await generate(client, thread_id)
    (image,) = result.images
    assert image.data == FINAL_PNG
    expected = {"saved_path": "saved_path", "file_id": "file_id"}.get(mode, "result")
    assert image.source == expected


@pytest.mark.parametrize("mode", ["saved_path_outside", "saved_path_symlink"])
async def test_a_saved_path_outside_generated_images_is_refused(
    fake_codex: FakeCodexFactory, tmp_path: Path, mode: str
) -> None:
    client = fake_codex.client({"default_turn": {"mode": mode}})
    thread_id = await new_thread(client, tmp_path)
    with pytest.raises(BridgeError) as caught:
        await generate(client, thread_id)
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.details["reason"] == "outside_generated_images"


@pytest.mark.parametrize(
    ("mode", "code", "retryable"),
    [
        ("policy", ErrorCode.SAFETY_REJECTED, False),
        ("rate_limit", ErrorCode.RATE_LIMITED, True),
        ("usage_limit", ErrorCode.RATE_LIMITED, True),
        ("no_image", ErrorCode.UPSTREAM, True),
        ("image_failed", ErrorCode.UPSTREAM, True),
    ],
)
async def test_turn_failures_are_classified(
    fake_codex: FakeCodexFactory, tmp_path: Path, mode: str, code: ErrorCode, retryable: bool
) -> None:
    client = fake_codex.client({"default_turn": {"mode": mode}})
    thread_id = await new_thread(client, tmp_path)
    with pytest.raises(BridgeError) as caught:
        await generate(client, thread_id)
    error = caught.value
    assert error.code is code
    assert error.retryable is retryable
    assert "turn_diagnostics" in error.details
    if mode == "rate_limit":
        assert error.details["upstream_status"] == 429
    if mode == "usage_limit":
        assert 0 < error.details["retry_after_ms"] <= 120_000
    if mode == "image_failed":
        assert error.details["turn_diagnostics"]["failed_image_items"] == 1
    # the next turn on the same link works: a failed turn is not a broken child
    assert client.restart_count() == 0


async def test_a_hanging_turn_is_interrupted_on_deadline(
    fake_codex: FakeCodexFactory, tmp_path: Path
) -> None:
    client = fake_codex.client({"default_turn": {"mode": "hang"}})
    thread_id = await new_thread(client, tmp_path)
    turn = await start_turn(client, thread_id)
    collector = TurnImageCollector(thread_id=thread_id, turn_id=turn.turn_id)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await collect_turn_images(turn, collector)
    assert await turn.interrupt(timeout=2) == "interrupted"
    (interrupt,) = received(fake_codex, "turn/interrupt")
    assert interrupt["params"] == {"threadId": thread_id, "turnId": turn.turn_id}
    assert events(fake_codex, "interrupted")


async def test_two_turns_run_side_by_side(fake_codex: FakeCodexFactory, tmp_path: Path) -> None:
    client = fake_codex.client()
    threads = [await new_thread(client, tmp_path) for _ in range(3)]
    results = await asyncio.gather(*(generate(client, t) for t in threads))
    assert all(r.images[0].data == FINAL_PNG for r in results)


# -- server requests ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "item/permissions/requestApproval",
        "execCommandApproval",
        "applyPatchApproval",
    ],
)
async def test_approval_requests_are_declined_and_the_turn_goes_on(
    fake_codex: FakeCodexFactory, tmp_path: Path, method: str
) -> None:
    client = fake_codex.client({"default_turn": {"mode": "approval", "approval_method": method}})
    thread_id = await new_thread(client, tmp_path)
    result = await generate(client, thread_id)
    assert result.images[0].data == FINAL_PNG
    (answered,) = events(fake_codex, "server_request_answered")
    assert answered["method"] == method
    assert answered["verdict"] == "ok"


async def test_unknown_server_requests_get_an_error_not_silence(
    fake_codex: FakeCodexFactory, tmp_path: Path
) -> None:
    client = fake_codex.client({"default_turn": {"mode": "unknown_server_request"}})
    thread_id = await new_thread(client, tmp_path)
    await generate(client, thread_id)
    (answered,) = events(fake_codex, "server_request_answered")
    assert answered["answer"]["error"]["code"] == -32601
    assert answered["verdict"] == "ok"


# -- broken children and restarts ---------------------------------------------------------


async def test_a_crash_mid_turn_fails_that_turn_and_the_next_call_gets_a_fresh_child(
    fake_codex: FakeCodexFactory, tmp_path: Path
) -> None:
    client = fake_codex.client({"turns": [{"mode": "crash", "exit_code": 17}]})
    thread_id = await new_thread(client, tmp_path, ephemeral=False)
    first_pid = client.pid
    assert first_pid is not None
    with pytest.raises(BridgeError) as caught:
        await generate(client, thread_id)
    error = caught.value
    assert error.code is ErrorCode.UPSTREAM
    assert error.details["outcome"] == "unknown"
    assert not error.retryable
    # next call: a new child, the persistent thread is resumed there and works
    await client.resume_thread(thread_id)
    assert client.restart_count() == 1
    assert client.pid != first_pid
    assert_reaped([first_pid])
    result = await generate(client, thread_id)
    assert result.images[0].data == FINAL_PNG
    assert len(received(fake_codex, "initialize")) == 2
    assert {entry["run"] for entry in read_log(fake_codex.state_dir)} == {1, 2}


@pytest.mark.parametrize("how", ["oversize", "malformed"])
async def test_a_broken_line_mid_turn_is_a_protocol_error_and_replaces_the_child(
    fake_codex: FakeCodexFactory, tmp_path: Path, how: str
) -> None:
    client = fake_codex.client(
        {"turns": [{"mode": how}], "oversize_bytes": 2 * 1024 * 1024},
        rpc_max_message_bytes=1024 * 1024,
        rpc_max_notification_bytes=1024 * 1024,
    )
    thread_id = await new_thread(client, tmp_path, ephemeral=False)
    with pytest.raises(BridgeError) as caught:
        await generate(client, thread_id)
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.details["outcome"] == "unknown"
    await client.resume_thread(thread_id)
    assert client.restart_count() == 1
    assert (await generate(client, thread_id)).images


@pytest.mark.parametrize("how", ["malformed", "non_object", "crash"])
async def test_a_broken_answer_to_a_plain_request_fails_only_that_call(
    fake_codex: FakeCodexFactory, how: str
) -> None:
    client = fake_codex.client({"on_method": {"account/read": how}})
    await client.start()
    with pytest.raises(BridgeError) as caught:
        await client.read_account()
    expected = ErrorCode.UPSTREAM if how == "crash" else ErrorCode.PROTOCOL
    assert caught.value.code is expected
    assert (await client.read_capabilities()).image_generation
    assert client.restart_count() == 1


async def test_shutdown_cancels_pending_calls_and_stops_everything(
    fake_codex: FakeCodexFactory,
) -> None:
    client = fake_codex.client({"no_answer": ["account/read"]})
    await client.start()
    pending = asyncio.create_task(client.read_account())
    await asyncio.sleep(0.1)
    await client.shutdown()
    with pytest.raises(BridgeError) as caught:
        await pending
    assert caught.value.code is ErrorCode.CANCELLED
    assert_reaped(client.spawned_pids)
    with pytest.raises(BridgeError) as after:
        await client.read_account()
    assert after.value.code is ErrorCode.CANCELLED


async def test_the_stderr_tail_is_redacted(fake_codex: FakeCodexFactory) -> None:
    client = fake_codex.client(
        {"stderr_flood_bytes": 4096, "stderr_text": "error: Bearer sekrit-token-1234\n"}
    )
    await client.start()
    await client.read_account()  # the child has run past its stderr writes
    for _ in range(100):  # bounded: the drain task catches up within moments
        if "error:" in client.stderr_tail(100):
            break
        await asyncio.sleep(0.02)
    tail = client.stderr_tail(100)
    assert tail.startswith("error: Bearer")  # the newest line, cut at a line boundary
    assert "sekrit" not in tail and "<redacted>" in tail
    assert len(tail) <= 100


async def test_no_child_outlives_the_client(fake_codex: FakeCodexFactory) -> None:
    async with fake_codex.client() as client:
        pid = client.pid
        assert pid is not None
        os.kill(pid, 0)  # alive while in use
    assert_reaped([pid])


async def test_a_large_image_crosses_the_link_intact(
    fake_codex: FakeCodexFactory, tmp_path: Path
) -> None:
    # ~8 MiB of incompressible PNG → an ~11 MiB notification line.
    client = fake_codex.client({"default_turn": {"mode": "result", "size": [1448, 1448]}})
    thread_id = await new_thread(client, tmp_path)
    result = await generate(client, thread_id, timeout=30)
    expected = (fake_codex.state_dir / "last_image.png").read_bytes()
    assert len(expected) > 8 * 1024 * 1024
    assert result.images[0].data == expected


async def test_an_unconfirmed_interrupt_returns_none_in_time(
    fake_codex: FakeCodexFactory, tmp_path: Path
) -> None:
    client = fake_codex.client({"default_turn": {"mode": "hang"}, "no_answer": ["turn/interrupt"]})
    thread_id = await new_thread(client, tmp_path)
    async with await start_turn(client, thread_id) as turn:
        async with asyncio.timeout(3):
            assert await turn.interrupt(timeout=0.3) is None
        assert not turn.completed


async def test_cancelling_an_interrupt_propagates(
    fake_codex: FakeCodexFactory, tmp_path: Path
) -> None:
    client = fake_codex.client({"default_turn": {"mode": "hang"}, "no_answer": ["turn/interrupt"]})
    thread_id = await new_thread(client, tmp_path)
    async with await start_turn(client, thread_id) as turn:
        waiting = asyncio.create_task(turn.interrupt(timeout=5))
        await asyncio.sleep(0.1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
