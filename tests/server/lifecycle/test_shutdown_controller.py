"""The shutdown controller's bounds, without a process to lose: the exit is recorded."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import NoReturn

import pytest

from imagebridge.config import load_config
from imagebridge.server.shutdown import Drain, ShutdownController, shutdown_grace_seconds


class _Recorder:
    def __init__(self) -> None:
        self.codes: list[int] = []
        self.stops: list[float] = []
        self.exited = threading.Event()
        self.jobs_stopped = 0
        self.stopped = asyncio.Event()
        self.jobs_stopping = asyncio.Event()

    def hard_exit(self, code: int) -> NoReturn:
        self.codes.append(code)
        self.exited.set()
        if threading.current_thread() is threading.main_thread():
            raise SystemExit(code)
        threading.Event().wait()  # the watchdog's daemon thread: stays put, as if exited
        raise AssertionError("unreachable")

    def stop(self, remaining: float) -> None:
        self.stops.append(remaining)
        self.stopped.set()

    async def stop_jobs(self) -> None:
        self.jobs_stopped += 1
        self.jobs_stopping.set()


def _controller(
    recorder: _Recorder, drain: Drain, jobs_idle: asyncio.Event, grace_s: float, settle_s: float
) -> ShutdownController:
    return ShutdownController(
        drain,
        grace_s=grace_s,
        settle_s=settle_s,
        request_stop=recorder.stop,
        stop_accepting_jobs=recorder.stop_jobs,
        jobs_idle=jobs_idle.wait,
        hard_exit=recorder.hard_exit,
    )


async def test_the_drain_waits_for_requests_and_jobs_then_stops() -> None:
    recorder, drain, idle = _Recorder(), Drain(), asyncio.Event()
    controller = _controller(recorder, drain, idle, grace_s=30, settle_s=30)
    controller.attach(asyncio.get_running_loop())
    drain.enter()  # a request in flight
    controller.on_signal(signal.SIGTERM)
    assert drain.draining and drain.refuses("/v1/images") and not drain.refuses("/health/ready")
    await asyncio.wait_for(recorder.jobs_stopping.wait(), 5)
    assert recorder.jobs_stopped == 1 and recorder.stops == []
    drain.leave()
    await asyncio.sleep(0.05)  # a chance to stop too early (it must not)
    assert recorder.stops == []  # a job still runs
    idle.set()
    await asyncio.wait_for(recorder.stopped.wait(), 5)
    assert len(recorder.stops) == 1 and recorder.stops[0] > 29  # most of the grace left


async def test_the_grace_running_out_stops_with_work_in_flight() -> None:
    recorder, drain, idle = _Recorder(), Drain(), asyncio.Event()
    controller = _controller(recorder, drain, idle, grace_s=0.2, settle_s=30)
    controller.attach(asyncio.get_running_loop())
    drain.enter()
    started = time.monotonic()
    controller.on_signal(signal.SIGTERM)
    await asyncio.wait_for(recorder.stopped.wait(), 15)  # half the settle it must not wait for
    assert recorder.stops == [0.0]
    assert time.monotonic() - started >= 0.2
    assert recorder.codes == []


async def test_a_second_signal_exits_at_once_with_128_plus_the_signal() -> None:
    recorder, drain, idle = _Recorder(), Drain(), asyncio.Event()
    controller = _controller(recorder, drain, idle, grace_s=30, settle_s=30)
    controller.attach(asyncio.get_running_loop())
    controller.on_signal(signal.SIGTERM)
    with pytest.raises(SystemExit):
        controller.on_signal(signal.SIGTERM)
    assert recorder.codes == [128 + signal.SIGTERM]


def test_the_watchdog_exits_1_when_the_stop_overruns_grace_and_settle() -> None:
    recorder, drain, idle = _Recorder(), Drain(), asyncio.Event()
    controller = _controller(recorder, drain, idle, grace_s=0.1, settle_s=0.1)
    started = time.monotonic()
    controller.on_signal(signal.SIGTERM)  # not serving yet: stops at once, watchdog armed
    assert recorder.stops == [0.0]
    assert recorder.exited.wait(10)
    assert recorder.codes == [1]
    assert time.monotonic() - started >= 0.2


def test_the_grace_is_the_server_key_or_the_runtime_one(tmp_path: Path) -> None:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    inherited = load_config(env=env, sets=["runtime.shutdown_grace_ms=1500"]).config
    assert shutdown_grace_seconds(inherited) == 1.5
    own = load_config(
        env=env, sets=["runtime.shutdown_grace_ms=1500", "server.shutdown_grace_ms=25000"]
    ).config
    assert shutdown_grace_seconds(own) == 25.0
