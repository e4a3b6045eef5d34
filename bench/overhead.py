"""HTTP overhead benchmark: the bridge versus a bare Starlette app serving the same bytes.

Both servers are real uvicorn processes on 127.0.0.1; one httpx async client in this
process drives them. The bridge serves ``POST /v1/images`` for a 1024×1024 PNG from the
mock provider at zero latency; the baseline answers the same POST with the exact response
bytes the bridge produced (captured once at start-up). For concurrency 1 and 32 it prints

    overhead.c<N>.p50 <bridge p50 / baseline p50> report
    overhead.c<N>.p99 <bridge p99 / baseline p99> report
    overhead.c<N>.own_work_p50_ms <p50 of total_ms - provider_ms> <=50

``own_work`` is the bridge's own share of each request as it reports it in ``timings``
(validation, negotiation, admission, verification, encoding): the ratio lines include the
mock provider's rendering of a 1024×1024 image, which is provider time, not overhead.
Request counts are bounded so the run stays well under a minute.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from _server import ServerProcess  # bench/ is on sys.path when a benchmark runs

REQUEST = {
    "operation": "generate",
    "prompt": "benchmark paper fox",
    "parameters": {"size": "1024x1024"},
}
BRIDGE_SETS = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
    "providers.codex_images.enabled=false",
]
ROUNDS = {1: 50, 32: 160}
WARMUP = 8


def _baseline_main(body_path: str) -> None:
    """Child mode: a bare Starlette app that returns ``body_path``'s bytes to any POST."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    payload = Path(body_path).read_bytes()

    async def images(request: Request) -> Response:
        await request.body()
        return Response(payload, media_type="application/json")

    app = Starlette(routes=[Route("/v1/images", images, methods=["POST"])])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)  # connections wait in the backlog until uvicorn accepts them
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False)
    print(f"listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


async def _drive(
    client: httpx.AsyncClient, url: str, concurrency: int, total: int
) -> tuple[list[float], list[float]]:
    latencies: list[float] = []
    own_work: list[float] = []
    pending = iter(range(total))

    async def worker() -> None:
        for _ in pending:
            started = time.perf_counter()
            response = await client.post(url, json=REQUEST)
            latencies.append(time.perf_counter() - started)
            response.raise_for_status()
            timings = json.loads(response.content).get("timings")
            if timings is not None:
                own_work.append(timings["total_ms"] - timings["provider_ms"])

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, own_work


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _measure(bridge: str, baseline: str) -> list[tuple[str, float, str]]:
    results: list[tuple[str, float, str]] = []
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        for url in (bridge, baseline):
            await _drive(client, f"{url}/v1/images", 4, WARMUP)
        for concurrency, total in ROUNDS.items():
            bridge_times, own = await _drive(client, f"{bridge}/v1/images", concurrency, total)
            base_times, _ = await _drive(client, f"{baseline}/v1/images", concurrency, total)
            for q, label in ((0.5, "p50"), (0.99, "p99")):
                ratio = _percentile(bridge_times, q) / _percentile(base_times, q)
                results.append((f"overhead.c{concurrency}.{label}", ratio, "report"))
            results.append(
                (f"overhead.c{concurrency}.own_work_p50_ms", statistics.median(own), "<=50")
            )
    return results


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--baseline":
        _baseline_main(sys.argv[2])
        return
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
        env["IMAGEGEN_BRIDGE_DATA_DIR"] = scratch
        args = ["-m", "imagebridge.server", "--bind", "127.0.0.1:0"]
        for item in BRIDGE_SETS:
            args += ["--set", item]
        bridge = ServerProcess(args, env)
        baseline: ServerProcess | None = None
        try:
            bridge_url = bridge.url()
            body = httpx.post(f"{bridge_url}/v1/images", json=REQUEST, timeout=60)
            body.raise_for_status()
            body_path = Path(scratch) / "response.json"
            body_path.write_bytes(body.content)
            baseline = ServerProcess([__file__, "--baseline", str(body_path)], env)
            results = asyncio.run(_measure(bridge_url, baseline.url()))
        finally:
            bridge.stop()
            if baseline is not None:
                baseline.stop()
    print(f"# response {len(body.content)} bytes; run took {time.monotonic() - started:.1f} s")
    for name, ratio, target in results:
        print(f"{name} {ratio:.2f} {target}")


if __name__ == "__main__":
    main()
