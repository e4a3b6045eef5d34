"""Fan-out benchmark: how close batches come to the provider's own latency.

Prints three ratios, each against a baseline measured in the same run:

* parallel:   wall time of n=16 (native count 1, 200 ms mock latency) / 200 ms   (target <= 1.15)
* sequential: wall time of the same batch run one at a time / (16 x 200 ms)       (target <= 1.05)
* overhead:   engine time per image with zero latency / a direct provider call    (reported)
"""

from __future__ import annotations

import asyncio
import statistics
import time

from imagebridge.contract.request import ImageRequest
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.orchestrator import ImageRuntime
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.engine.validation import RequestLimits
from imagebridge.providers.base import ProviderContext
from imagebridge.providers.mock import MockProvider, MockSettings

N = 16
LATENCY_MS = 200
SIZE = "64x64"


def runtime(latency_ms: int) -> tuple[ImageRuntime, MockProvider]:
    inner = MockProvider(MockSettings(latency_ms=latency_ms))
    provider = FanoutProvider(
        inner, max_outputs=255, max_parallel_outputs=255, limits=RequestLimits()
    )
    registry = ProviderRegistry([provider], default=provider.name)
    return ImageRuntime(registry, Materializer()), inner


def request(n: int, execution: str = "auto") -> ImageRequest:
    return ImageRequest.model_validate(
        {
            "operation": "generate",
            "prompt": "benchmark",
            "parameters": {"n": n, "size": SIZE},
            "policies": {"batch_execution": execution},
        }
    )


async def timed(coro_factory, repeats: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await coro_factory()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def main() -> list[tuple[str, float, str]]:
    slow, _ = runtime(LATENCY_MS)
    await slow.execute(request(N))  # warm up threads and caches
    parallel = await timed(lambda: slow.execute(request(N)), 5)
    sequential = await timed(lambda: slow.execute(request(N, "sequential")), 1)

    fast, inner = runtime(0)
    one = request(1)
    await fast.execute(one)  # warm up

    async def direct() -> None:
        context = ProviderContext("bench", Deadline.after(60), CancelToken())
        await inner.execute(one, context)

    repeats = 200
    engine_time = await timed(lambda: fast.execute(one), repeats)
    direct_time = await timed(direct, repeats)
    return [
        ("fanout.parallel_wall/latency", parallel / (LATENCY_MS / 1000), "<= 1.15"),
        ("fanout.sequential_wall/(n*latency)", sequential / (N * LATENCY_MS / 1000), "<= 1.05"),
        ("fanout.engine_per_image/direct_call", engine_time / direct_time, "report"),
    ]


if __name__ == "__main__":
    for name, ratio, target in asyncio.run(main()):
        print(f"{name:45s} {ratio:8.3f}  target {target}")
