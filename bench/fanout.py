"""Fan-out benchmark: how close batches come to the provider's own latency.

Prints three ratios, each against a baseline measured in the same run:

* parallel:   wall time of n=16 (native count 1, 200 ms mock latency) / 200 ms   (target <= 1.15)
* sequential: wall time of the same batch run one at a time / (16 x 200 ms)       (target <= 1.05)
* overhead:   engine time per image with zero latency / a direct provider call that
              produces and verifies the same image                               (reported)

The overhead baseline does the same image work as the engine: every call on both sides uses
a fresh prompt (so neither is served from the mock's render cache) and the direct side
decodes and fully verifies the image it got (base64 decode, ``inspect_image``, declared
metadata checked). The ratio is therefore what validation, negotiation, admission, the
fan-out decorator, materialization and response assembly add on top of the image work.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import statistics
import time
from collections.abc import Awaitable, Callable

from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.engine.materialize import Materializer
from imagebridge.engine.provider import ProviderContext
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.engine.runtime import ImageRuntime
from imagebridge.engine.validation import RequestLimits
from imagebridge.imaging.inspect import inspect_image
from imagebridge.providers.mock import MockProvider, MockSettings

N = 16
LATENCY_MS = 200
SIZE = "64x64"
OVERHEAD_REPEATS = 200


def runtime(latency_ms: int) -> tuple[ImageRuntime, MockProvider]:
    inner = MockProvider(MockSettings(latency_ms=latency_ms))
    provider = FanoutProvider(
        inner, max_outputs=255, max_parallel_outputs=255, limits=RequestLimits()
    )
    registry = ProviderRegistry([provider], default=provider.name)
    # inline inputs only: the fan-out requests carry none (the engine loads inputs once)
    return ImageRuntime(registry, Materializer(), inputs=InputLoader([])), inner


def request(n: int, execution: str = "auto", prompt: str = "benchmark") -> ImageRequest:
    return ImageRequest.model_validate(
        {
            "operation": "generate",
            "prompt": prompt,
            "parameters": {"n": n, "size": SIZE},
            "policies": {"batch_execution": execution},
        }
    )


async def timed(call: Callable[[], Awaitable[object]], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def overhead() -> tuple[float, float]:
    """Median seconds per image: through the engine, and direct call + verification."""
    fast, inner = runtime(0)
    fresh = (f"benchmark {i}" for i in itertools.count())  # never a render-cache hit

    async def through_engine() -> None:
        response = await fast.execute(request(1, prompt=next(fresh)))
        assert len(response.data) == 1

    async def direct() -> None:
        one = request(1, prompt=next(fresh))
        context = ProviderContext("bench", Deadline.after(60), CancelToken())
        response = await inner.execute(one, context)
        (item,) = response.data
        assert item.b64_json is not None
        info = inspect_image(base64.b64decode(item.b64_json, validate=True))
        declared = (item.format, item.width, item.height, item.bytes, item.sha256)
        assert declared == (info.format, info.width, info.height, info.bytes, info.sha256)

    await through_engine()  # warm up both paths
    await direct()
    engine_samples: list[float] = []
    direct_samples: list[float] = []
    for _ in range(4):  # interleave so a busy machine slows both sides alike
        engine_samples.append(await timed(through_engine, OVERHEAD_REPEATS // 4))
        direct_samples.append(await timed(direct, OVERHEAD_REPEATS // 4))
    return statistics.median(engine_samples), statistics.median(direct_samples)


async def main() -> list[tuple[str, float, str]]:
    slow, _ = runtime(LATENCY_MS)
    await slow.execute(request(N))  # warm up threads and caches
    parallel = await timed(lambda: slow.execute(request(N)), 5)
    sequential = await timed(lambda: slow.execute(request(N, "sequential")), 1)
    engine_time, direct_time = await overhead()
    print(
        f"# fanout: {SIZE} PNG, fresh prompt per call: engine {engine_time * 1e6:.0f} us/image,"
        f" direct call + verification {direct_time * 1e6:.0f} us/image"
    )
    return [
        ("fanout.parallel_wall/latency", parallel / (LATENCY_MS / 1000), "<= 1.15"),
        ("fanout.sequential_wall/(n*latency)", sequential / (N * LATENCY_MS / 1000), "<= 1.05"),
        ("fanout.engine_per_image/direct_call", engine_time / direct_time, "report"),
    ]


if __name__ == "__main__":
    for name, ratio, target in asyncio.run(main()):
        print(f"{name:45s} {ratio:8.3f}  target {target}")
