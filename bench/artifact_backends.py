"""Publishing and reading a 4 MB image: the S3 artifact store against the filesystem one.

Issue 35's benchmark row at the store level: the same ~4 MB PNG (1280×1024 noise, so it
does not compress) is published and read back, one at a time, through
:class:`~imagebridge.artifacts.filesystem.store.AsyncArtifactStore` (the filesystem store the
bridge uses today, in a temporary directory) and through
:class:`~imagebridge.artifacts.s3.store.S3ArtifactStore` on a private Ceph RADOS Gateway
(``scripts/s3-server``, objects in memory, 127.0.0.1). Both verify the image on publish
and on read (SHA-256 and format). ``ROUNDS`` rounds alternate the two and each keeps its
best median of ``OPS`` publish+read pairs. It prints

    artifacts.s3_over_filesystem.publish_read_p50   S3 / filesystem, report

with the absolute medians as ``#`` notes, then the end-to-end figure: two bridge processes
(mock provider, zero latency), one with ``artifacts.backend = "filesystem"`` and one with
``"s3"`` on the same gateway, each asked ``E2E_OPS`` times one after another (concurrency
1) for a 1024×1024 PNG as an artifact; it prints

    artifacts.s3_e2e.c1_added_p50_ms   p50 (S3 bridge) - p50 (filesystem bridge), report

Without Ceph (``scripts/install-test-deps``) nothing is measured.

Run from the repository root: ``.venv/bin/python bench/artifact_backends.py``.
"""

from __future__ import annotations

import asyncio
import io
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from imagebridge.artifacts.filesystem.store import ArtifactStore, AsyncArtifactStore
from imagebridge.artifacts.publication import Publication
from imagebridge.artifacts.s3.objects import S3Credentials, S3ObjectStore, S3Settings
from imagebridge.artifacts.s3.store import S3ArtifactStore

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.s3 import missing_s3_programs, running_s3_server  # noqa: E402

from _server import ServerProcess  # noqa: E402

OPS = 12
ROUNDS = 3
OWNER = "anonymous-local"


def noise_png() -> bytes:
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(35).integers(0, 256, (1024, 1280, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


async def _median(publish_read: Callable[[], Awaitable[None]]) -> float:
    await publish_read()  # warm-up: connections, caches
    walls: list[float] = []
    for _ in range(OPS):
        start = time.perf_counter()
        await publish_read()
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


async def measure(server: Any, image: bytes) -> tuple[float, float]:
    settings = S3Settings(
        bucket=server.bucket,
        endpoint=server.endpoint,
        region=server.region,
        key_prefix=f"bench-{uuid.uuid4().hex[:8]}/",
        addressing_style="path",
        credentials=S3Credentials(server.access_key_id, server.secret_access_key),
    )
    best_fs = best_s3 = float("inf")
    with tempfile.TemporaryDirectory(prefix="artifact-bench-") as directory:
        publication = Publication(image, expected_format="png", owner=OWNER)
        filesystem = AsyncArtifactStore(ArtifactStore(Path(directory) / "artifacts"))
        async with S3ObjectStore(settings) as objects:
            s3 = S3ArtifactStore(objects)

            async def fs_pair() -> None:
                stored = await filesystem.publish(publication)
                assert len((await filesystem.read(stored.id, OWNER)).data) == len(image)

            async def s3_pair() -> None:
                stored = await s3.publish(publication)
                assert len((await s3.read(stored.id, OWNER)).data) == len(image)

            for round_no in range(ROUNDS):
                order = [fs_pair, s3_pair] if round_no % 2 == 0 else [s3_pair, fs_pair]
                for pair in order:
                    median = await _median(pair)
                    if pair is fs_pair:
                        best_fs = min(best_fs, median)
                    else:
                        best_s3 = min(best_s3, median)
    return best_fs, best_s3


E2E_OPS = 30
E2E_REQUEST = {
    "operation": "generate",
    "prompt": "benchmark fox in a bucket",
    "parameters": {"size": "1024x1024"},
    "output": {"response_format": "artifact"},
}
BRIDGE_SETS = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
    "providers.codex_images.enabled=false",
]


def _bridge(scratch: Path, sets: list[str], extra_env: dict[str, str]) -> ServerProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
    env.update(extra_env)
    env["IMAGEGEN_BRIDGE_DATA_DIR"] = str(scratch)
    args = ["-m", "imagebridge.server", "--bind", "127.0.0.1:0"]
    for item in [*BRIDGE_SETS, *sets]:
        args += ["--set", item]
    return ServerProcess(args, env)


async def _request_p50(url: str) -> float:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        walls: list[float] = []
        for n in range(E2E_OPS + 3):
            start = time.perf_counter()
            answer = await client.post("/v1/images", json=E2E_REQUEST)
            wall = time.perf_counter() - start
            assert answer.status_code == 200, answer.text
            assert answer.json()["data"][0]["type"] == "artifact"
            if n >= 3:  # warm-up: connections, caches
                walls.append(wall)
    return statistics.median(walls)


def measure_e2e(server: Any) -> tuple[float, float]:
    """p50 of one request through a filesystem bridge and through an S3 bridge."""
    s3_sets = [
        'artifacts.backend="s3"',
        f'artifacts.s3.endpoint="{server.endpoint}"',
        f'artifacts.s3.region="{server.region}"',
        f'artifacts.s3.bucket="{server.bucket}"',
        f'artifacts.s3.key_prefix="bench-e2e-{uuid.uuid4().hex[:8]}/"',
        'artifacts.s3.addressing_style="path"',
        'artifacts.s3.access_key_id_env="BENCH_S3_KEY"',
        'artifacts.s3.secret_access_key_env="BENCH_S3_SECRET"',
    ]
    keys = {"BENCH_S3_KEY": server.access_key_id, "BENCH_S3_SECRET": server.secret_access_key}
    with tempfile.TemporaryDirectory(prefix="artifact-e2e-") as directory:
        filesystem = _bridge(Path(directory) / "fs", [], {})
        s3 = _bridge(Path(directory) / "s3", s3_sets, keys)
        try:
            fs_url, s3_url = filesystem.url(), s3.url()
            best_fs = best_s3 = float("inf")
            for _ in range(2):
                best_fs = min(best_fs, asyncio.run(_request_p50(fs_url)))
                best_s3 = min(best_s3, asyncio.run(_request_p50(s3_url)))
        finally:
            filesystem.stop()
            s3.stop()
    return best_fs, best_s3


def main() -> None:
    missing = missing_s3_programs()
    if missing:
        print(f"# artifacts.s3_over_filesystem: not measured (no S3 server: {missing})")
        return
    image = noise_png()
    with running_s3_server() as server:
        best_fs, best_s3 = asyncio.run(measure(server, image))
        e2e_fs, e2e_s3 = measure_e2e(server)
    print(
        f"# {len(image) / 1e6:.1f} MB PNG, publish+read p50: filesystem {best_fs * 1000:.1f} ms, "
        f"S3 (Ceph RGW on 127.0.0.1) {best_s3 * 1000:.1f} ms; best of {ROUNDS} rounds of {OPS}"
    )
    print(f"artifacts.s3_over_filesystem.publish_read_p50 {best_s3 / best_fs:.2f} report")
    print(
        f"# POST /v1/images (1024x1024 PNG artifact, mock provider) c1 p50: filesystem "
        f"{e2e_fs * 1000:.1f} ms, S3 {e2e_s3 * 1000:.1f} ms; best of 2 runs of {E2E_OPS}"
    )
    print(f"artifacts.s3_e2e.c1_added_p50_ms {(e2e_s3 - e2e_fs) * 1000:.1f} report")


if __name__ == "__main__":
    main()
