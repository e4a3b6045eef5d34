"""The readiness cache: probe in the background, answer from the cache, expire."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.registry import ProviderReadiness
from imagebridge.server.readiness import ReadinessMonitor


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_not_ready_until_probed_then_stale_after_the_window() -> None:
    clock = Clock()
    calls: list[float] = []

    async def probe(timeout: float) -> Sequence[ProviderReadiness]:
        calls.append(timeout)
        return [ProviderReadiness("mock")]

    monitor = ReadinessMonitor(probe, interval=60, timeout=2, stale_after=90, clock=clock)
    assert not monitor.ready and not monitor.probed
    await monitor.refresh()
    assert monitor.ready and calls == [2]
    clock.now += 91
    assert not monitor.ready  # stale, and asking did not probe again
    assert calls == [2]


async def test_any_unready_provider_or_a_hung_probe_is_not_ready() -> None:
    async def mixed(timeout: float) -> Sequence[ProviderReadiness]:
        return [
            ProviderReadiness("a"),
            ProviderReadiness("b", BridgeError(ErrorCode.AUTHENTICATION, "no login")),
        ]

    monitor = ReadinessMonitor(mixed, timeout=1)
    await monitor.refresh()
    assert monitor.probed and not monitor.ready

    async def hung(timeout: float) -> Sequence[ProviderReadiness]:
        await asyncio.sleep(60)
        return []

    stuck = ReadinessMonitor(hung, timeout=0.05)
    await stuck.refresh()
    assert not stuck.ready


async def test_background_task_refreshes_periodically() -> None:
    count = 0

    async def probe(timeout: float) -> Sequence[ProviderReadiness]:
        nonlocal count
        count += 1
        return [ProviderReadiness("mock")]

    monitor = ReadinessMonitor(probe, interval=0.02)
    monitor.start()
    try:
        assert await monitor.latest() is not None
        for _ in range(100):
            if count >= 3:
                break
            await asyncio.sleep(0.01)
        assert count >= 3
    finally:
        await monitor.stop()
