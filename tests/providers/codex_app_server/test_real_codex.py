"""The transport layers against the REAL codex (0.169.0 and 0.171.0) and a loopback mock.

Runs codex inside ``scripts/loopback-only`` when this machine allows it (root), so
nothing can leave loopback; see :mod:`tests.support.real_codex`. Skipped only when node is
absent; with node present, a missing codex CLI fails the tests (install-test-deps installs it).
No process they start — launcher, codex, or anything codex starts — may outlive them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server import (
    AppServerClient,
    AppServerOptions,
    TurnImageCollector,
    TurnImages,
    collect_turn_images,
)
from imagebridge.providers.codex_app_server.threads import turn_prompt_text, turn_start_params
from tests.support.real_codex import (
    MOCK_PNG,
    MOCK_PROMPT,
    RealCodexHarness,
    loopback_only_available,
    require_codex_binary,
    skip_reason,
)

from .support import assert_reaped

_SKIP = skip_reason()
pytestmark = [
    pytest.mark.codex,
    pytest.mark.timeout(120),
    pytest.mark.skipif(_SKIP is not None, reason=_SKIP or ""),
]


@pytest.fixture(scope="module")
def isolated_network() -> bool:
    return loopback_only_available()


@pytest.fixture
def real(tmp_path: Path, isolated_network: bool, codex_version: str) -> RealCodexHarness:
    binary = require_codex_binary(codex_version)
    return RealCodexHarness(tmp_path, binary, isolated_network)


@pytest.fixture
async def client(real: RealCodexHarness) -> AsyncIterator[AppServerClient]:
    options = AppServerOptions(
        executable=str(real.wrapper),
        cwd=real.workdir,
        codex_home=real.home,
        rpc_timeout_ms=30_000,
        shutdown_timeout_ms=5_000,
    )
    client = AppServerClient(options)
    try:
        yield client
    finally:
        await client.shutdown()
        assert_reaped(client.spawned_pids)
        await real.assert_no_process_left()


async def run_turn(
    client: AppServerClient, thread_id: str, *, stop_at_image: bool = False
) -> TurnImages:
    params = turn_start_params(thread_id, turn_prompt_text("a small blue square"))
    turn = await client.start_turn(thread_id, params["input"])
    async with turn:
        collector = TurnImageCollector(
            thread_id=thread_id, turn_id=turn.turn_id, codex_home=client.codex_home
        )
        async with asyncio.timeout(60):
            result = await collect_turn_images(
                turn, collector, wait_for_turn_completed=not stop_at_image
            )
        if not result.turn_completed:
            assert await turn.interrupt(timeout=5) in {"interrupted", "completed"}
        return result


def assert_only_the_mock_was_contacted(real: RealCodexHarness) -> None:
    requests = real.requests()
    assert requests, "codex never reached the mock backend"
    for request in requests:
        assert request["path"].startswith("/backend-api/"), request["path"]
    origin = real.origin()
    assert origin is not None and origin.startswith("https://127.0.0.1:")
    real.assert_codex_is_confined()


async def test_a_full_session_through_the_real_binary(
    client: AppServerClient, real: RealCodexHarness
) -> None:
    await client.start()
    assert client.server_info is not None
    assert client.codex_home == real.home
    account = await client.check_ready()
    assert account.signed_in and account.account_type == "chatgpt"
    assert account.plan_type == "plus"

    thread_id = await client.start_thread(cwd=real.workdir, ephemeral=False)
    first = await run_turn(client, thread_id)
    (image,) = first.images
    assert image.data == MOCK_PNG
    assert image.media_type == "image/png"
    assert image.revised_prompt == MOCK_PROMPT
    assert first.turn_completed and first.turn_status == "completed"

    await client.resume_thread(thread_id)
    second = await run_turn(client, thread_id, stop_at_image=True)
    assert second.images[0].data == MOCK_PNG

    await client.archive_thread(thread_id)
    assert client.restart_count() == 0

    requests = real.requests()
    generations = [r for r in requests if r["path"].endswith("/images/generations")]
    assert len(generations) == 2
    turns = [r for r in requests if r["path"].endswith("/codex/responses")]
    assert turns and all(r["headers"]["originator"] == "imagegen-bridge" for r in turns)
    assert all(r["headers"]["authorization"] == "<redacted>" for r in turns)
    assert "image_gen.imagegen" in turns[0]["tools"]
    assert_only_the_mock_was_contacted(real)


async def test_a_content_policy_failure_is_safety_rejected(
    client: AppServerClient, real: RealCodexHarness
) -> None:
    await client.start()
    thread_id = await client.start_thread(cwd=real.workdir, ephemeral=True)
    real.set_mode("policy")
    with pytest.raises(BridgeError) as caught:
        await run_turn(client, thread_id)
    error = caught.value
    assert error.code is ErrorCode.SAFETY_REJECTED
    assert error.details["terminal_status"] == "failed"
    assert "safety system" not in error.message
    assert "safety system" in error.details["upstream_message"]  # the upstream's own words
    assert_only_the_mock_was_contacted(real)


async def test_a_429_from_the_backend_is_rate_limited(
    client: AppServerClient, real: RealCodexHarness
) -> None:
    await client.start()
    thread_id = await client.start_thread(cwd=real.workdir, ephemeral=True)
    real.set_mode("http429")
    with pytest.raises(BridgeError) as caught:
        await run_turn(client, thread_id)
    error = caught.value
    assert error.code is ErrorCode.RATE_LIMITED
    assert error.retryable
    assert error.details["upstream_status"] == 429
    # the same child serves the next turn once the backend recovers
    real.set_mode("auto")
    assert (await run_turn(client, thread_id)).images[0].data == MOCK_PNG
    assert client.restart_count() == 0
