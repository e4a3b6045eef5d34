"""What putting the bridge in front of an image API costs, next to LiteLLM's proxy.

One static OpenAI-Images-compatible upstream on 127.0.0.1 answers every
``POST …/images/generations`` with the same 1024×1024 noise PNG as ``b64_json`` (~3 MB
PNG, ~4 MB base64): ``/fast/v1`` at once, ``/slow/v1`` after 200 ms. Three ways to reach it
are measured in one run, one after another, by one client in this process:

- **direct**: the upstream itself;
- **bridge**: ``/v1/images/generations`` of imagebridge with
  ``[providers.openai_compatible.fast]`` / ``.slow`` pointed at the upstream (every image
  decoded and fully verified, as always);
- **LiteLLM**: its proxy with one image model on the same upstream, when an install is
  found: ``$GATEWAY_LITELLM`` (the ``litellm`` executable), else
  ``bench/.litellm-venv/bin/litellm``; ``--install-litellm`` creates that venv
  (``pip install 'litellm[proxy]'``). Without one its figures are not printed and a note
  says "not measured".

Figures (ratios of the same run)::

    gateway.c1.added_p50/litellm  bridge's added p50 / LiteLLM's, concurrency 1      <= 0.5
    gateway.c32.rps/litellm       bridge req/s / LiteLLM req/s, concurrency 32       >= 2
    gateway.c32.rps/direct        bridge req/s / direct req/s, concurrency 32        report
    gateway.fanout16.wall/direct  one n=16 bridge request (200 ms upstream, one
                                  image a call) / 16 parallel direct calls           <= 1.3
    gateway.c1.recorded_p50/unrecorded
                                  the bridge's p50 at concurrency 1 / the p50 of a
                                  second bridge with server.jobs.enabled = false,
                                  requests alternating                               report
    gateway.c32.recorded_rps/unrecorded
                                  the bridge's req/s at concurrency 32 / the second
                                  bridge's                                           report

The last two figures are what the history costs each synchronous request (issue 39): its
record written when it starts and when it ends, and the image kept as an artifact although
the caller asked for ``b64_json`` (published after the answer is sent: the caller's latency
barely moves, the machine's work per request does); a note gives the latency in
milliseconds. The second bridge has no history, so it records nothing and keeps nothing.

"Added p50" is the gateway's p50 minus the direct p50 measured alongside it. Every load
loop is bounded (``ROUNDS``); all servers listen on 127.0.0.1 only.

``--tracing [BASELINE_SRC]`` measures what OpenTelemetry traces cost instead (issue 42):
three bridges on the same upstream, in interleaved blocks (each round in another order):
``before`` (the package under ``BASELINE_SRC``, a checkout of the code before the traces
came in; left out when not given), ``off`` (this tree, traces off: the default) and ``on``
(this tree, exporting every span over OTLP/HTTP, batched as by default, to a sink on
127.0.0.1 that answers like a collector). Besides each bridge's c1 p50 and c32 requests/s,
the CPU time of each bridge process (``/proc/<pid>/stat``, its export thread included) is
divided by the requests it served::

    gateway.tracing.off_c1_p50/before     report (1 within noise: no cost when off)
    gateway.tracing.off_c32_rps/before    report
    gateway.tracing.off_cpu/before        report
    gateway.tracing.on_c32_rps/off        report
    gateway.tracing.on_cpu/off            report (the notes give the µs added per request)

The client is a load generator, so it spends as little CPU as it can: aiohttp reads each
answer piece by piece and checks its status, its declared size and its count of
``"b64_json"`` keys, without keeping the pieces (the warm-up answers of each route and the
first fan-out answer are parsed whole). An httpx
client that parses every answer took ~10 ms of CPU per 4 MB answer, a third of a core at
c32 on a 2-core machine, which capped every route's rate; ``--client httpx`` measures that
way still (the figures of issue 22's first three rounds).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

from _server import ServerProcess, stop_process  # bench/ is on sys.path when a benchmark runs

BENCH_DIR = Path(__file__).resolve().parent
LITELLM_VENV = BENCH_DIR / ".litellm-venv"
SLOW_S = 0.2
FANOUT_N = 16
ROUNDS = {1: 40, 32: 128}
WARMUP = 6
FANOUT_REPEATS = 3
PAIR_PAUSE_S = 0.3
PROMPT = "benchmark paper fox"


# -- the static upstream (child mode) ------------------------------------------------------


def _noise_png() -> bytes:
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(22).integers(0, 256, (1024, 1024, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


def _upstream_main() -> None:
    """Child mode: an OpenAI Images double answering one noise PNG as ``b64_json``."""
    import base64

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    png = _noise_png()
    body = json.dumps(
        {"created": 1, "data": [{"b64_json": base64.b64encode(png).decode()}]}
    ).encode()

    async def fast(request: Request) -> Response:
        await request.body()
        return Response(body, media_type="application/json")

    async def slow(request: Request) -> Response:
        await request.body()
        await asyncio.sleep(SLOW_S)
        return Response(body, media_type="application/json")

    app = Starlette(
        routes=[
            Route("/fast/v1/images/generations", fast, methods=["POST"]),
            Route("/slow/v1/images/generations", slow, methods=["POST"]),
        ]
    )
    print(f"# upstream png {len(png)} bytes, body {len(body)} bytes", file=sys.stderr)
    _serve(app)


def _serve(app: object) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False)  # type: ignore[arg-type]
    print(f"listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


# -- the gateways ----------------------------------------------------------------------------


def _bridge_config(upstream: str, *, history: bool = True) -> str:
    tables = []
    for name in ("fast", "slow"):
        tables.append(
            f"""
[providers.openai_compatible.{name}]
base_url = "{upstream}/{name}/v1"
model = "gpt-image-1"
native_max_outputs = 1
max_parallel_outputs = {FANOUT_N}
"""
        )
    return (
        'default_provider = "fast"\n'
        "[providers.codex_responses]\nenabled = false\n"
        "[providers.codex_app_server]\nenabled = false\n"
        "[providers.codex_images]\nenabled = false\n"
        + ("" if history else "[server.jobs]\nenabled = false\n")
        + "".join(tables)
    )


def _litellm_executable() -> Path | None:
    named = os.environ.get("GATEWAY_LITELLM")
    if named:
        return Path(named) if Path(named).exists() else None
    candidate = LITELLM_VENV / "bin" / "litellm"
    return candidate if candidate.exists() else None


def _install_litellm() -> None:
    subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
    pip = LITELLM_VENV / "bin" / "pip"
    subprocess.run([str(pip), "install", "-q", "litellm[proxy]"], check=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _LiteLLM:
    """The LiteLLM proxy (it prints no URL we can await, so its port is polled)."""

    def __init__(self, executable: Path, upstream: str, scratch: Path, env: dict[str, str]):
        config = scratch / "litellm.yaml"
        config.write_text(
            "model_list:\n"
            "  - model_name: gpt-image-1\n"
            "    litellm_params:\n"
            "      model: openai/gpt-image-1\n"
            f"      api_base: {upstream}/fast/v1\n"
            "      api_key: not-a-key\n"
            "litellm_settings:\n"
            "  telemetry: false\n"
        )
        self.port = _free_port()
        self.key = "sk-bench-" + secrets.token_hex(16)  # this run only, loopback only
        self.process = subprocess.Popen(
            [
                *(str(executable), "--config", str(config), "--host", "127.0.0.1"),
                *("--port", str(self.port), "--num_workers", "1"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={
                **env,
                "LITELLM_LOG": "ERROR",
                "LITELLM_TELEMETRY": "False",
                "LITELLM_MASTER_KEY": self.key,
            },
            cwd=scratch,
        )

    def url(self, timeout: float = 120.0) -> str:
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the LiteLLM proxy exited")
            try:
                if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError("the LiteLLM proxy did not start")

    def stop(self) -> None:
        stop_process(self.process)


# -- measurement -----------------------------------------------------------------------------


class _Client:
    """POSTs JSON and proves each answer carries ``images`` images (see the module doc)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._aiohttp: aiohttp.ClientSession | None = None
        self._httpx: httpx.AsyncClient | None = None

    async def __aenter__(self) -> _Client:
        if self.kind == "httpx":
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
            self._httpx = httpx.AsyncClient(timeout=120, limits=limits)
        else:
            # idle connections dropped before the servers' 5 s keep-alive closes them
            connector = aiohttp.TCPConnector(limit=64, keepalive_timeout=3)
            self._aiohttp = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=120),
                auto_decompress=False,
            )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._httpx is not None:
            await self._httpx.aclose()
        if self._aiohttp is not None:
            await self._aiohttp.close()

    async def post(
        self,
        url: str,
        body: dict[str, object],
        headers: dict[str, str] | None = None,
        *,
        images: int = 1,
        parse: bool = False,
    ) -> None:
        if self._httpx is not None:
            response = await self._httpx.post(url, json=body, headers=headers)
            response.raise_for_status()
            _check_parsed(url, response.json(), images)
            return
        assert self._aiohttp is not None
        async with self._aiohttp.post(url, json=body, headers=headers) as answer:
            if answer.status != 200:
                raise RuntimeError(f"{url} answered HTTP {answer.status}")
            if parse:
                content = await answer.read()
                _check_parsed(url, json.loads(content), images)
                return
            declared = answer.headers.get("content-length")
            size, keys, tail = 0, 0, b""
            async for piece in answer.content.iter_any():
                size += len(piece)
                keys += (tail + piece[: len(_KEY) - 1]).count(_KEY) + piece.count(_KEY)
                tail = piece[-(len(_KEY) - 1) :]
        if (declared is not None and size != int(declared)) or keys != images:
            raise RuntimeError(f"{url} answered without the {images} image(s) asked for")
        if size < images * 1_000_000:
            raise RuntimeError(f"{url} answered images too small to be the upstream's")


_KEY = b'"b64_json"'


def _check_parsed(url: str, answer: dict[str, object], images: int) -> None:
    data = answer.get("data")
    if not isinstance(data, list) or len(data) != images:
        raise RuntimeError(f"{url} answered {len(data) if isinstance(data, list) else 0} images")
    for item in data:
        if not isinstance(item, dict) or len(item.get("b64_json") or "") < 1_000_000:
            raise RuntimeError(f"{url} answered without a full image")


async def _drive(
    client: _Client,
    url: str,
    body: dict[str, object],
    concurrency: int,
    total: int,
    headers: dict[str, str] | None = None,
    *,
    parse: bool = False,
) -> tuple[list[float], float]:
    """Latencies of ``total`` requests at ``concurrency``, and the wall time of all."""
    latencies: list[float] = []
    pending = iter(range(total))

    async def worker() -> None:
        for _ in pending:
            started = time.perf_counter()
            await client.post(url, body, headers, parse=parse)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


async def _fanout_pair(client: _Client, upstream: str, bridge: str) -> tuple[float, float]:
    """Walls of 16 parallel direct slow calls, and of one n=16 bridge request."""
    direct_url = f"{upstream}/slow/v1/images/generations"
    direct: list[float] = []
    bridged: list[float] = []
    for repeat in range(FANOUT_REPEATS):
        _, wall = await _drive(client, direct_url, {"prompt": PROMPT}, FANOUT_N, FANOUT_N)
        direct.append(wall)
        started = time.perf_counter()
        await client.post(
            f"{bridge}/v1/images/generations",
            {
                "prompt": PROMPT,
                "n": FANOUT_N,
                "model": "gpt-image-1",
                "imagegen_bridge": {"provider": "slow"},
            },
            images=FANOUT_N,
            parse=repeat == 0,
        )
        bridged.append(time.perf_counter() - started)
    return statistics.median(direct), statistics.median(bridged)


async def _paired_p50(
    client: _Client, recorded: str, unrecorded: str, body: dict[str, object]
) -> tuple[float, float]:
    """p50 latencies of the two bridges at concurrency 1, their requests alternating (so
    the machine's drifting load falls on both alike), with a pause after each so the
    recorded bridge's writes after an answer do not fall on the next request (one caller
    with a moment between its images; the cost at load is the c32 figure)."""
    first: list[float] = []
    second: list[float] = []
    for _ in range(ROUNDS[1]):
        for url, latencies in ((recorded, first), (unrecorded, second)):
            started = time.perf_counter()
            await client.post(url, body)
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(PAIR_PAUSE_S)
    return statistics.median(first), statistics.median(second)


async def _measure(
    upstream: str,
    bridge: str,
    unrecorded: str,
    litellm: tuple[str, str] | None,
    client_kind: str,
) -> tuple[list[tuple[str, float, str]], list[str]]:
    routes: dict[str, tuple[str, dict[str, str] | None]] = {
        "direct": (f"{upstream}/fast/v1/images/generations", None),
        "bridge": (f"{bridge}/v1/images/generations", None),
        "unrecorded": (f"{unrecorded}/v1/images/generations", None),
    }
    if litellm is not None:
        url, key = litellm
        routes["litellm"] = (f"{url}/v1/images/generations", {"Authorization": f"Bearer {key}"})
    body: dict[str, object] = {"prompt": PROMPT, "model": "gpt-image-1"}
    p50: dict[str, float] = {}
    rps: dict[str, float] = {}
    async with _Client(client_kind) as client:
        for url, headers in routes.values():
            await _drive(client, url, body, 4, WARMUP, headers, parse=True)
        for name, (url, headers) in routes.items():
            if name == "unrecorded":
                continue  # paired with the bridge below
            latencies, _ = await _drive(client, url, body, 1, ROUNDS[1], headers)
            p50[name] = statistics.median(latencies)
        recorded_p50, unrecorded_p50 = await _paired_p50(
            client, routes["bridge"][0], routes["unrecorded"][0], body
        )
        p50["unrecorded"] = unrecorded_p50
        for name, (url, headers) in routes.items():
            _, wall = await _drive(client, url, body, 32, ROUNDS[32], headers)
            rps[name] = ROUNDS[32] / wall
        direct_wall, bridge_wall = await _fanout_pair(client, upstream, bridge)
    base = p50["direct"]
    notes = [
        f"client: {client_kind}",
        "c1 p50 ms: "
        + ", ".join(f"{k} {v * 1000:.1f} (+{(v - base) * 1000:.1f})" for k, v in p50.items()),
        "c32 req/s: " + ", ".join(f"{k} {v:.1f}" for k, v in rps.items()),
        f"fan-out n={FANOUT_N}, {SLOW_S * 1000:.0f} ms upstream: direct-parallel wall "
        f"{direct_wall:.2f} s, bridge {bridge_wall:.2f} s",
    ]
    results: list[tuple[str, float, str]] = []
    if litellm is not None:
        added_bridge = p50["bridge"] - p50["direct"]
        added_litellm = p50["litellm"] - p50["direct"]
        results.append(("gateway.c1.added_p50/litellm", added_bridge / added_litellm, "<= 0.5"))
        results.append(("gateway.c32.rps/litellm", rps["bridge"] / rps["litellm"], ">= 2"))
    else:
        notes.append("LiteLLM: not measured (no install; see bench/gateway.py --install-litellm)")
    results.append(("gateway.c32.rps/direct", rps["bridge"] / rps["direct"], "report"))
    results.append(("gateway.c1.recorded_p50/unrecorded", recorded_p50 / unrecorded_p50, "report"))
    results.append(
        ("gateway.c32.recorded_rps/unrecorded", rps["bridge"] / rps["unrecorded"], "report")
    )
    notes.append(
        "history per synchronous request (record + kept image), c1 p50 of alternating "
        f"requests: recorded {recorded_p50 * 1000:.1f} ms, unrecorded "
        f"{unrecorded_p50 * 1000:.1f} ms (+{(recorded_p50 - unrecorded_p50) * 1000:.1f} ms)"
    )
    results.append(("gateway.fanout16.wall/direct", bridge_wall / direct_wall, "<= 1.3"))
    return results, notes


def _report(
    results: list[tuple[str, float, str]], notes: list[str], started: float, *, digits: int
) -> None:
    """The notes (with the run's length), then one ``<name> <ratio> <target>`` per figure."""
    notes.append(f"run took {time.monotonic() - started:.1f} s")
    for note in notes:
        print(f"# {note}")
    for name, ratio, target in results:
        print(f"{name} {ratio:.{digits}f} {target}")


# -- tracing: off before and after the change, and on ---------------------------------------

TRACING_ROUNDS = 10
TRACING_C1 = 20
TRACING_C32 = 64


def _sink_main() -> None:
    """Child mode: an OTLP/HTTP collector stand-in; every export is answered 200, empty."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def traces(request: Request) -> Response:
        await request.body()
        return Response(b"", media_type="application/x-protobuf")

    _serve(Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])]))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` so far (all its threads), from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure_tracing(
    bridges: dict[str, tuple[str, int]], client_kind: str
) -> tuple[list[tuple[str, float, str]], list[str]]:
    body: dict[str, object] = {"prompt": PROMPT, "model": "gpt-image-1"}
    latencies: dict[str, list[float]] = {name: [] for name in bridges}
    walls: dict[str, float] = dict.fromkeys(bridges, 0.0)
    cpu: dict[str, float] = dict.fromkeys(bridges, 0.0)
    served: dict[str, int] = dict.fromkeys(bridges, 0)
    per_round: dict[str, list[float]] = {name: [] for name in bridges}
    names = list(bridges)
    async with _Client(client_kind) as client:
        for url, _ in bridges.values():
            await _drive(client, f"{url}/v1/images/generations", body, 4, WARMUP, parse=True)
        for round_index in range(TRACING_ROUNDS):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                url, pid = bridges[name]
                before = _cpu_seconds(pid)
                c1, _ = await _drive(client, f"{url}/v1/images/generations", body, 1, TRACING_C1)
                _, wall = await _drive(
                    client, f"{url}/v1/images/generations", body, 32, TRACING_C32
                )
                spent = _cpu_seconds(pid) - before
                latencies[name].extend(c1)
                walls[name] += wall
                cpu[name] += spent
                served[name] += TRACING_C1 + TRACING_C32
                per_round[name].append(spent / (TRACING_C1 + TRACING_C32))
    p50 = {name: statistics.median(values) for name, values in latencies.items()}
    rps = {name: TRACING_ROUNDS * TRACING_C32 / walls[name] for name in bridges}
    cpu_per = {name: cpu[name] / served[name] for name in bridges}
    notes = [
        f"tracing: {TRACING_ROUNDS} interleaved rounds of {TRACING_C1} c1 + {TRACING_C32} c32 "
        "requests per bridge",
        "c1 p50 ms: " + ", ".join(f"{k} {v * 1000:.1f}" for k, v in p50.items()),
        "c32 req/s: " + ", ".join(f"{k} {v:.1f}" for k, v in rps.items()),
        "bridge CPU ms per request: "
        + ", ".join(f"{k} {v * 1000:.2f}" for k, v in cpu_per.items()),
        "per-round CPU ms per request: "
        + "; ".join(
            f"{k} " + " ".join(f"{v * 1000:.2f}" for v in values) for k, values in per_round.items()
        ),
        f"tracing on adds {(cpu_per['on'] - cpu_per['off']) * 1e6:.0f} µs of bridge CPU and "
        f"{(p50['on'] - p50['off']) * 1000:+.2f} ms of c1 p50 per request",
    ]
    results: list[tuple[str, float, str]] = []
    if "before" in bridges:
        results.append(("gateway.tracing.off_c1_p50/before", p50["off"] / p50["before"], "report"))
        results.append(("gateway.tracing.off_c32_rps/before", rps["off"] / rps["before"], "report"))
        results.append(
            ("gateway.tracing.off_cpu/before", cpu_per["off"] / cpu_per["before"], "report")
        )
    results.append(("gateway.tracing.on_c32_rps/off", rps["on"] / rps["off"], "report"))
    results.append(("gateway.tracing.on_cpu/off", cpu_per["on"] / cpu_per["off"], "report"))
    return results, notes


def _tracing_main(baseline_src: Path | None, client_kind: str) -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("IMAGEGEN_BRIDGE", "OTEL_", "PYTHONPATH"))
        }
        env["IMAGEGEN_BRIDGE_DATA_DIR"] = str(scratch / "data")
        servers: list[ServerProcess] = []
        try:
            upstream = ServerProcess([__file__, "--upstream"], env)
            servers.append(upstream)
            sink = ServerProcess([__file__, "--otlp-sink"], env)
            servers.append(sink)
            config = scratch / "bridge.toml"
            config.write_text(_bridge_config(upstream.url()))
            variants: dict[str, dict[str, str]] = {
                "off": env,
                "on": {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url()},
            }
            if baseline_src is not None:
                variants = {"before": {**env, "PYTHONPATH": str(baseline_src)}, **variants}
            bridges: dict[str, tuple[str, int]] = {}
            for name, variant_env in variants.items():
                bridge = ServerProcess(
                    ["-m", "imagebridge.server", "--config", str(config), "--bind", "127.0.0.1:0"],
                    {**variant_env, "IMAGEGEN_BRIDGE_DATA_DIR": str(scratch / name)},
                )
                servers.append(bridge)
                bridges[name] = (bridge.url(), bridge.process.pid)
                print(f"# {name}: {bridges[name][0]}", flush=True)
            results, notes = asyncio.run(_measure_tracing(bridges, client_kind))
        finally:
            for server in reversed(servers):
                server.stop()
    _report(results, notes, started, digits=3)


def main() -> None:
    if sys.argv[1:] == ["--upstream"]:
        _upstream_main()
        return
    if sys.argv[1:] == ["--otlp-sink"]:
        _sink_main()
        return
    if sys.argv[1:2] == ["--tracing"]:
        baseline = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else None
        _tracing_main(baseline, "aiohttp")
        return
    if sys.argv[1:] == ["--install-litellm"]:
        _install_litellm()
        return
    client_kind = "httpx" if sys.argv[1:] == ["--client", "httpx"] else "aiohttp"
    started = time.monotonic()
    executable = _litellm_executable()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
        env["IMAGEGEN_BRIDGE_DATA_DIR"] = str(scratch / "data")
        upstream = ServerProcess([__file__, "--upstream"], env)
        bridge: ServerProcess | None = None
        unrecorded: ServerProcess | None = None
        litellm: _LiteLLM | None = None
        try:
            upstream_url = upstream.url()
            config = scratch / "bridge.toml"
            config.write_text(_bridge_config(upstream_url))
            bridge = ServerProcess(
                ["-m", "imagebridge.server", "--config", str(config), "--bind", "127.0.0.1:0"],
                env,
            )
            bare_config = scratch / "bridge-unrecorded.toml"
            bare_config.write_text(_bridge_config(upstream_url, history=False))
            bare_env = {**env, "IMAGEGEN_BRIDGE_DATA_DIR": str(scratch / "data-unrecorded")}
            unrecorded = ServerProcess(
                [
                    *("-m", "imagebridge.server", "--config", str(bare_config)),
                    *("--bind", "127.0.0.1:0"),
                ],
                bare_env,
            )
            if executable is not None:
                litellm = _LiteLLM(executable, upstream_url, scratch, env)
            bridge_url = bridge.url()
            litellm_url = (litellm.url(), litellm.key) if litellm is not None else None
            results, notes = asyncio.run(
                _measure(upstream_url, bridge_url, unrecorded.url(), litellm_url, client_kind)
            )
        finally:
            for server in (litellm, bridge, unrecorded, upstream):
                if server is not None:
                    server.stop()
    _report(results, notes, started, digits=2)


if __name__ == "__main__":
    main()
