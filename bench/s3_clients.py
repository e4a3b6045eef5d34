"""Async S3 clients on 4 MB objects against a real S3 server: latency, CPU and memory.

The library choice of the S3 artifact backend (issue 35). A private Ceph RADOS Gateway
(``scripts/s3-server``, objects in memory, 127.0.0.1) serves every client in the same run.
Each client runs in a fresh interpreter of its own (``--worker NAME``) so its import cost
and memory are its own: it creates one client, warms up with two put+get pairs, resets the
peak-RSS counter, then times ``OPS`` PUTs and ``OPS`` GETs of one 4 MiB incompressible
object, one at a time, reading each GET's body whole. Per operation it reports the median
wall time, the process CPU time (every thread: the Rust clients work on threads of their
own) and the peak RSS above the RSS before the operations; once, the RSS the import and
the client cost over a bare interpreter. Workers run in alternating order for ``ROUNDS``
rounds and each keeps its best round. It prints, against the filesystem (the same bytes
written to a file with fsync and read back, measured in every worker; the fastest figures
are the one baseline of all clients):

    s3clients.<name>.put_get_p50/filesystem   put + get median wall time, report
    s3clients.<name>.cpu_per_put_get/filesystem
    s3clients.<name>.peak_rss/object          peak RSS growth / 4 MiB, report
    s3clients.<name>.client_rss/object        import + client RSS / 4 MiB, report

and the absolute figures as ``#`` notes. A client whose package is not installed is
"not measured" (the packages are not the project's dependencies except the one chosen);
without Ceph (``scripts/install-test-deps``) nothing is measured.

Run from the repository root: ``.venv/bin/python bench/s3_clients.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.s3 import missing_s3_programs, running_s3_server  # noqa: E402

CLIENTS = ("aiobotocore", "obstore", "opendal")
SIZE = 4 * 1024 * 1024
OPS = 12
WARMUP = 2
ROUNDS = 3
WORKER_TIMEOUT_S = 240.0

Put = Callable[[str, bytes], Awaitable[None]]
Get = Callable[[str], Awaitable[bytes]]


def _rss_kib(field: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


async def _aiobotocore(env: dict[str, str]) -> tuple[Put, Get, Callable[[], Awaitable[None]]]:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    config = AioConfig(
        s3={"addressing_style": "path"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    context = get_session().create_client(
        "s3",
        endpoint_url=env["S3_ENDPOINT"],
        region_name=env["S3_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        config=config,
    )
    client: Any = await context.__aenter__()
    bucket = env["S3_BUCKET"]

    async def put(key: str, data: bytes) -> None:
        await client.put_object(Bucket=bucket, Key=key, Body=data)

    async def get(key: str) -> bytes:
        answer = await client.get_object(Bucket=bucket, Key=key)
        async with answer["Body"] as body:
            return bytes(await body.read())

    async def close() -> None:
        await context.__aexit__(None, None, None)

    return put, get, close


async def _obstore(env: dict[str, str]) -> tuple[Put, Get, Callable[[], Awaitable[None]]]:
    import obstore
    from obstore.store import S3Store

    store = S3Store(
        env["S3_BUCKET"],
        endpoint=env["S3_ENDPOINT"],
        region=env["S3_REGION"],
        access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )

    async def put(key: str, data: bytes) -> None:
        await obstore.put_async(store, key, data)

    async def get(key: str) -> bytes:
        answer = await obstore.get_async(store, key)
        return bytes(await answer.bytes_async())

    async def close() -> None:
        return None

    return put, get, close


async def _opendal(env: dict[str, str]) -> tuple[Put, Get, Callable[[], Awaitable[None]]]:
    import opendal

    operator = opendal.AsyncOperator(
        "s3",
        bucket=env["S3_BUCKET"],
        endpoint=env["S3_ENDPOINT"],
        region=env["S3_REGION"],
        access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )

    async def put(key: str, data: bytes) -> None:
        await operator.write(key, data)

    async def get(key: str) -> bytes:
        return bytes(await operator.read(key))

    async def close() -> None:
        return None

    return put, get, close


def _filesystem(directory: str) -> tuple[Put, Get, Callable[[], Awaitable[None]]]:
    def write(key: str, data: bytes) -> None:
        path = Path(directory) / key.replace("/", "_")
        with path.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    async def put(key: str, data: bytes) -> None:
        await asyncio.to_thread(write, key, data)

    async def get(key: str) -> bytes:
        return await asyncio.to_thread((Path(directory) / key.replace("/", "_")).read_bytes)

    async def close() -> None:
        return None

    return put, get, close


async def _measure(put: Put, get: Get, payload: bytes, prefix: str) -> dict[str, float]:
    for n in range(WARMUP):
        await put(f"{prefix}warm-{n}", payload)
        assert await get(f"{prefix}warm-{n}") == payload
    rss_before = _rss_kib()
    _reset_peak()
    put_walls: list[float] = []
    get_walls: list[float] = []
    cpu_start = time.process_time()
    for n in range(OPS):
        start = time.perf_counter()
        await put(f"{prefix}obj-{n}", payload)
        put_walls.append(time.perf_counter() - start)
    for n in range(OPS):
        start = time.perf_counter()
        data = await get(f"{prefix}obj-{n}")
        get_walls.append(time.perf_counter() - start)
        assert len(data) == SIZE
        del data
    cpu = time.process_time() - cpu_start
    return {
        "put_p50_ms": statistics.median(put_walls) * 1000,
        "get_p50_ms": statistics.median(get_walls) * 1000,
        "cpu_per_put_get_ms": cpu / OPS * 1000,
        "peak_extra_kib": max(_rss_kib("VmHWM") - rss_before, 0),
    }


async def _worker(name: str, env: dict[str, str]) -> dict[str, Any]:
    bare = _rss_kib()
    payload = os.urandom(SIZE)
    factories = {"aiobotocore": _aiobotocore, "obstore": _obstore, "opendal": _opendal}
    before_import = _rss_kib()
    put, get, close = await factories[name](env)
    client_kib = _rss_kib() - before_import
    try:
        measured = await _measure(put, get, payload, f"bench-{name}-{os.getpid()}/")
    finally:
        await close()
    with tempfile.TemporaryDirectory(prefix="s3bench-fs-") as directory:
        fs_put, fs_get, _ = _filesystem(directory)
        baseline = await _measure(fs_put, fs_get, payload, "fs-")
    return {"bare_kib": bare, "client_kib": client_kib, "s3": measured, "fs": baseline}


def _run_worker(name: str, env: dict[str, str]) -> dict[str, Any] | None:
    result = subprocess.run(
        [sys.executable, __file__, "--worker", name],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=WORKER_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        print(f"# {name}: worker failed: {result.stderr.strip()[-400:]}", file=sys.stderr)
        return None
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def _installed(name: str) -> bool:
    probe = subprocess.run(
        [sys.executable, "-c", f"import {name}"], capture_output=True, check=False, timeout=60
    )
    return probe.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=CLIENTS)
    args = parser.parse_args()
    if args.worker:
        env = {key: os.environ[key] for key in os.environ if key.startswith(("S3_", "AWS_"))}
        print(json.dumps(asyncio.run(_worker(args.worker, env))))
        return
    missing = missing_s3_programs()
    if missing:
        print(f"# s3clients: not measured (no S3 server: {missing})")
        return
    clients = [name for name in CLIENTS if _installed(name)]
    for name in CLIENTS:
        if name not in clients:
            print(f"# s3clients.{name}: not measured (the package is not installed)")
    best: dict[str, dict[str, Any]] = {}
    with running_s3_server() as server:
        env = {
            "S3_ENDPOINT": server.endpoint,
            "S3_REGION": server.region,
            "S3_BUCKET": server.bucket,
            "AWS_ACCESS_KEY_ID": server.access_key_id,
            "AWS_SECRET_ACCESS_KEY": server.secret_access_key,
        }
        for round_no in range(ROUNDS):
            order = clients if round_no % 2 == 0 else list(reversed(clients))
            for name in order:
                result = _run_worker(name, env)
                if result is None:
                    continue
                previous = best.get(name)
                total = result["s3"]["put_p50_ms"] + result["s3"]["get_p50_ms"]
                if previous is None or total < (
                    previous["s3"]["put_p50_ms"] + previous["s3"]["get_p50_ms"]
                ):
                    best[name] = result
    if not best:
        return
    # One baseline for every client: the fastest filesystem figures any worker measured.
    fs = {
        key: min(result["fs"][key] for result in best.values())
        for key in ("put_p50_ms", "get_p50_ms", "cpu_per_put_get_ms")
    }
    for name, result in best.items():
        s3 = result["s3"]
        print(
            f"# {name}: put p50 {s3['put_p50_ms']:.1f} ms, get p50 {s3['get_p50_ms']:.1f} ms, "
            f"CPU {s3['cpu_per_put_get_ms']:.1f} ms per put+get, "
            f"peak +{s3['peak_extra_kib'] / 1024:.1f} MiB, import+client "
            f"+{result['client_kib'] / 1024:.1f} MiB RSS"
        )
    print(
        f"# filesystem (write+fsync, read): put p50 {fs['put_p50_ms']:.1f} ms, get p50 "
        f"{fs['get_p50_ms']:.1f} ms, CPU {fs['cpu_per_put_get_ms']:.1f} ms per put+get"
    )
    print(
        f"# {os.cpu_count()} CPUs; {OPS} puts and {OPS} gets of 4 MiB per round, best of {ROUNDS}"
    )
    for name, result in best.items():
        s3 = result["s3"]
        wall = (s3["put_p50_ms"] + s3["get_p50_ms"]) / (fs["put_p50_ms"] + fs["get_p50_ms"])
        cpu = s3["cpu_per_put_get_ms"] / max(fs["cpu_per_put_get_ms"], 0.01)
        print(f"s3clients.{name}.put_get_p50/filesystem {wall:.2f} report")
        print(f"s3clients.{name}.cpu_per_put_get/filesystem {cpu:.2f} report")
        print(f"s3clients.{name}.peak_rss/object {s3['peak_extra_kib'] * 1024 / SIZE:.2f} report")
        print(f"s3clients.{name}.client_rss/object {result['client_kib'] * 1024 / SIZE:.2f} report")


if __name__ == "__main__":
    main()
