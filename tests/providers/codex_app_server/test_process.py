"""The child process: spawn, stderr drain, bounded stop and restarts (with the fake codex)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.process import AppServerProcess, ChildProcess
from imagebridge.providers.codex_app_server.rpc import RpcConnection
from tests.support.fake_codex import read_log

from .support import FakeCodexFactory, assert_reaped

MiB = 1024 * 1024


@pytest.fixture
async def children() -> AsyncIterator[list[ChildProcess]]:
    started: list[ChildProcess] = []
    yield started
    for child in started:
        if child.alive:
            await child.stop(2.0)
    assert_reaped([child.pid for child in started])


async def spawn(options: AppServerOptions, children: list[ChildProcess]) -> ChildProcess:
    child = await ChildProcess.spawn(options, generation=len(children) + 1)
    children.append(child)
    return child


async def initialize(child: ChildProcess, options: AppServerOptions, timeout: float) -> object:
    link = RpcConnection(child.stdout, child.stdin, options)
    link.start()
    try:
        return await link.request(
            "initialize", {"clientInfo": {"name": "t", "version": "1"}}, timeout=timeout
        )
    finally:
        await link.close()


async def test_a_child_that_exits_on_stdin_close_is_reaped_cleanly(
    fake_codex: FakeCodexFactory, children: list[ChildProcess]
) -> None:
    child = await spawn(fake_codex.options(), children)
    assert child.alive
    result = await initialize(child, fake_codex.options(), 5)
    assert isinstance(result, dict) and result["codexHome"] == str(fake_codex.codex_home)
    code = await child.stop(3.0)
    assert code == 0
    assert child.returncode == 0
    assert_reaped([child.pid])
    assert read_log(fake_codex.state_dir)[-1]["event"] == "stdin_closed"


async def test_a_stderr_flood_never_blocks_the_child(
    fake_codex: FakeCodexFactory, children: list[ChildProcess]
) -> None:
    options = fake_codex.options({"stderr_flood_bytes": 10 * MiB}, stderr_buffer_bytes=64 * 1024)
    child = await spawn(options, children)
    # The fake writes 10 MiB to stderr before it reads stdin: an undrained pipe (64 KiB)
    # would freeze it and initialize would time out.
    assert await initialize(child, options, 20)
    assert child.stderr_tail.total_bytes >= 10 * MiB
    assert len(child.stderr_tail) <= 64 * 1024
    await child.stop(3.0)


async def test_shutdown_kills_a_child_that_ignores_stdin_close_and_sigterm(
    fake_codex: FakeCodexFactory, children: list[ChildProcess]
) -> None:
    options = fake_codex.options({"ignore_stdin_close": True, "ignore_sigterm": True})
    child = await spawn(options, children)
    await initialize(child, options, 5)
    started = time.monotonic()
    code = await child.stop(1.0)
    elapsed = time.monotonic() - started
    assert code == -signal.SIGKILL
    # close stdin (0.5 s) → SIGTERM (0.3 s) → SIGKILL; without the kill it would never end
    assert 0.75 <= elapsed < 10
    assert_reaped([child.pid])
    assert read_log(fake_codex.state_dir)[-1]["event"] == "stdin_closed"


async def test_sigterm_stops_a_child_that_only_ignores_stdin_close(
    fake_codex: FakeCodexFactory, children: list[ChildProcess]
) -> None:
    options = fake_codex.options({"ignore_stdin_close": True})
    child = await spawn(options, children)
    await initialize(child, options, 5)
    assert await child.stop(1.0) == -signal.SIGTERM
    assert_reaped([child.pid])


async def test_an_already_dead_child_is_just_reaped(
    fake_codex: FakeCodexFactory, children: list[ChildProcess]
) -> None:
    child = await spawn(fake_codex.options({"exit_on_start": 3}), children)
    assert await asyncio.wait_for(child.wait(), 5) == 3
    assert await child.stop(1.0) == 3


async def test_spawn_problems_are_configuration_errors(tmp_path: Path) -> None:
    with pytest.raises(BridgeError) as missing:
        await ChildProcess.spawn(
            AppServerOptions(executable=str(tmp_path / "no-codex")), generation=1
        )
    assert missing.value.code is ErrorCode.CONFIGURATION
    assert "executable not found" in missing.value.message

    plain = tmp_path / "codex"
    plain.write_text("not executable")
    with pytest.raises(BridgeError) as denied:
        await ChildProcess.spawn(AppServerOptions(executable=str(plain)), generation=1)
    assert denied.value.code is ErrorCode.CONFIGURATION

    with pytest.raises(BridgeError) as no_cwd:
        await ChildProcess.spawn(
            AppServerOptions(executable="/bin/true", cwd=tmp_path / "gone"), generation=1
        )
    assert "working directory not found" in no_cwd.value.message


async def test_supervisor_restarts_after_the_backoff_and_counts(
    fake_codex: FakeCodexFactory,
) -> None:
    supervisor = AppServerProcess(fake_codex.options(restart_backoff_ms=300))
    try:
        # The backoff runs from the previous spawn, which happens somewhere inside start():
        # measure from before it, so a slow handshake on a loaded machine cannot eat into it.
        began = time.monotonic()
        first = await supervisor.start()
        assert await supervisor.start() is first  # alive: no new child
        assert supervisor.restart_count == 0
        second = await supervisor.restart()
        assert time.monotonic() - began >= 0.295
        assert second.pid != first.pid
        assert supervisor.generation == 2 and supervisor.restart_count == 1
        assert_reaped([first.pid])
        assert supervisor.spawned_pids == [first.pid, second.pid]
    finally:
        await supervisor.shutdown()
    assert_reaped(supervisor.spawned_pids)
    with pytest.raises(BridgeError) as closed:
        await supervisor.start()
    assert closed.value.code is ErrorCode.CANCELLED


async def test_a_dead_child_is_replaced_without_waiting_when_backoff_has_passed(
    fake_codex: FakeCodexFactory,
) -> None:
    supervisor = AppServerProcess(fake_codex.options(restart_backoff_ms=0))
    try:
        first = await supervisor.start()
        first.stdin.close()
        await asyncio.wait_for(first.wait(), 5)
        assert not supervisor.is_alive()
        second = await supervisor.start()
        assert second.pid != first.pid and supervisor.restart_count == 1
    finally:
        await supervisor.shutdown()
    assert_reaped(supervisor.spawned_pids)


async def test_a_cancelled_shutdown_still_reaps_the_child(fake_codex: FakeCodexFactory) -> None:
    supervisor = AppServerProcess(
        fake_codex.options({"ignore_stdin_close": True}, shutdown_timeout_ms=600)
    )
    child = await supervisor.start()
    stopping = asyncio.create_task(supervisor.shutdown())
    await asyncio.sleep(0.05)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    await asyncio.wait_for(child.wait(), 5)  # SIGTERM still came, from the shielded stop
    assert_reaped([child.pid])
