"""Kill -9 a bridge on the S3 backend between an object and its ownership record, restart.

A real server process with ``artifacts.backend = "s3"`` on the real Ceph RADOS Gateway of
``scripts/s3-server`` is killed at each S3 step boundary (the test-only crash points of
engine/crash_points.py): after an image's upload and before its ownership record
(``s3.image_uploaded``), after a sidecar's upload and before the record naming it
(``s3.sidecar_uploaded``), and after a deletion's record and before its objects
(``s3.marker_deleted``). Restarted with the shortest repair grace
(``artifacts.retention.stale_temp_secs`` and ``repair_interval_secs``, 60 s), nothing
incomplete is served (the image nobody owns is 404, the deleted artifact stays deleted,
the artifact whose sidecar never got recorded is served whole without one), and once the
objects are older than the grace the server's own repair has removed every object no
record names: the bucket holds exactly the complete artifacts. Then the next request
succeeds. A kill during a multipart upload (an image larger than the 5 MiB part, killed
after its first part, ``s3.part_uploaded``) leaves an incomplete upload that is never an
object, and the server's repair aborts it once older than ``artifacts.s3.stale_upload_secs``
(here its shortest, 60 s).
"""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagebridge.artifacts.s3.objects import S3ObjectStore, S3Settings
from imagebridge.engine.crash_points import CRASH_ENV
from tests.support.bridge_server import ServerProcess, start_server
from tests.support.images import noise_png
from tests.support.s3 import S3Server

pytestmark = [pytest.mark.s3, pytest.mark.timeout(420)]

PART = 5 * 1024 * 1024  # the smallest artifacts.s3.part_size_bytes
GRACE_S = 60  # the smallest artifacts.retention.stale_temp_secs and repair_interval_secs
IMAGE: dict[str, Any] = {
    "operation": "generate",
    "prompt": "a fox in a crashing bucket",
    "parameters": {"size": "16x16"},
    "output": {"response_format": "artifact"},
}
SIDECAR: dict[str, Any] = {
    **IMAGE,
    "output": {"response_format": "artifact", "metadata": "sidecar"},
}


def _settings(server: S3Server, prefix: str) -> S3Settings:
    return server.settings(prefix, max_attempts=1)


def _listing(server: S3Server, prefix: str) -> list[str]:
    async def listed() -> list[str]:
        async with S3ObjectStore(_settings(server, prefix)) as objects:
            return sorted(item.key for item in await objects.list_objects("", limit=1000))

    return asyncio.run(listed())


def _uploads(server: S3Server, prefix: str) -> list[str]:
    async def listed() -> list[str]:
        async with S3ObjectStore(_settings(server, prefix)) as objects:
            return [upload.key for upload in await objects.incomplete_uploads(limit=100)]

    return asyncio.run(listed())


def _s3_sets(server: S3Server, prefix: str) -> tuple[str, ...]:
    return (
        'artifacts.backend="s3"',
        f'artifacts.s3.endpoint="{server.endpoint}"',
        f'artifacts.s3.region="{server.region}"',
        f'artifacts.s3.bucket="{server.bucket}"',
        f'artifacts.s3.key_prefix="{prefix}"',
        'artifacts.s3.addressing_style="path"',
        'artifacts.s3.access_key_id_env="CRASH_S3_KEY"',
        'artifacts.s3.secret_access_key_env="CRASH_S3_SECRET"',
        f"artifacts.retention.stale_temp_secs={GRACE_S}",
        f"artifacts.retention.repair_interval_secs={GRACE_S}",
        f"artifacts.s3.stale_upload_secs={GRACE_S}",
    )


def test_a_kill_between_an_object_and_its_record_leaves_nothing_after_the_sweep(
    tmp_path: Path, processes: list[ServerProcess], s3_server: S3Server, s3_prefix: str
) -> None:
    data = tmp_path / "data"
    env = {"CRASH_S3_KEY": s3_server.access_key_id, "CRASH_S3_SECRET": s3_server.secret_access_key}
    sets = _s3_sets(s3_server, s3_prefix)

    def crash(step: str, path: str, body: dict[str, Any] | None) -> None:
        doomed = start_server(data, *sets, env={**env, CRASH_ENV: step})
        processes.append(doomed)
        with (
            httpx.Client(base_url=doomed.url, timeout=60) as client,
            pytest.raises(httpx.HTTPError),
        ):
            client.request("DELETE" if body is None else "POST", path, json=body)
        assert doomed.wait_dead() == -9, f"the process did not die at {step}"

    # 1. the image is in the bucket, its ownership record never written
    crash("s3.image_uploaded", "/v1/images", IMAGE)
    [unowned_image] = _listing(s3_server, s3_prefix)
    assert unowned_image.startswith("images/")
    unowned_id = unowned_image.split("/")[1]
    # 2. an artifact whose sidecar was uploaded, the record naming it never written
    crash("s3.sidecar_uploaded", "/v1/images", SIDECAR)
    after_sidecar = _listing(s3_server, s3_prefix)
    [record] = [key for key in after_sidecar if key.startswith("ownership/")]
    whole_id = record.removeprefix("ownership/").removesuffix(".json")
    assert f"metadata/{whole_id}.json" in after_sidecar
    # 3. a deletion killed after the record went, before the objects did
    victim_server = start_server(data, *sets, env=env)
    processes.append(victim_server)
    with httpx.Client(base_url=victim_server.url, timeout=60) as client:
        made = client.post("/v1/images", json=SIDECAR)
        assert made.status_code == 200, made.text
        deleted_id = made.json()["data"][0]["id"]
    victim_server.stop()
    crash("s3.marker_deleted", f"/v1/artifacts/{deleted_id}", None)
    left = _listing(s3_server, s3_prefix)
    assert f"ownership/{deleted_id}.json" not in left
    assert sum(deleted_id in key for key in left) == 2  # its image and sidecar, unowned

    server = start_server(data, *sets, env=env)
    processes.append(server)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        # nothing incomplete is served, before or after the sweep
        assert client.get(f"/v1/artifacts/{unowned_id}").status_code == 404
        assert client.get(f"/v1/artifacts/{deleted_id}").status_code == 404
        whole = client.get(f"/v1/artifacts/{whole_id}")
        assert whole.status_code == 200 and whole.content.startswith(b"\x89PNG")
        # the server's own repair (at start, then every GRACE_S) removes what no record
        # names once it is older than the grace: a live writer's object never is
        expected = sorted(
            [record, *(k for k in after_sidecar if k.startswith(f"images/{whole_id}"))]
        )
        deadline = time.monotonic() + 4 * GRACE_S + 60
        while (listed := _listing(s3_server, s3_prefix)) != expected:
            assert time.monotonic() < deadline, f"left after the sweep: {listed}"
            time.sleep(2)
        assert client.get(f"/v1/artifacts/{whole_id}").status_code == 200
        assert client.get(f"/v1/artifacts/{unowned_id}").status_code == 404
        after = client.post("/v1/images", json=SIDECAR)
        assert after.status_code == 200, after.text
        fresh = after.json()["data"][0]["id"]
        assert client.get(f"/v1/artifacts/{fresh}").status_code == 200


def test_a_kill_during_a_multipart_upload_leaves_no_object_and_the_upload_is_aborted(
    tmp_path: Path, processes: list[ServerProcess], s3_server: S3Server, s3_prefix: str
) -> None:
    data = tmp_path / "data"
    env = {"CRASH_S3_KEY": s3_server.access_key_id, "CRASH_S3_SECRET": s3_server.secret_access_key}
    sets = (*_s3_sets(s3_server, s3_prefix), f"artifacts.s3.part_size_bytes={PART}")
    # an edit of noise keeps the noise: a PNG well over the 5 MiB part, so a multipart upload
    edge = 2000
    noise = noise_png(edge, edge, compress_level=1)
    large = {
        "operation": "edit",
        "prompt": "keep the noise",
        "images": [{"type": "base64", "data": base64.b64encode(noise).decode()}],
        "parameters": {"size": f"{edge}x{edge}"},
        "output": {"response_format": "artifact"},
    }
    doomed = start_server(data, *sets, env={**env, CRASH_ENV: "s3.part_uploaded"})
    processes.append(doomed)
    with (
        httpx.Client(base_url=doomed.url, timeout=120) as client,
        pytest.raises(httpx.HTTPError),
    ):
        client.post("/v1/images", json=large)
    assert doomed.wait_dead() == -9, "the process did not die after the first part"
    assert _listing(s3_server, s3_prefix) == []  # an incomplete upload is no object
    [pending] = _uploads(s3_server, s3_prefix)
    assert pending.startswith("images/")

    server = start_server(data, *sets, env=env)
    processes.append(server)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        stray = pending.split("/")[1]
        assert client.get(f"/v1/artifacts/{stray}").status_code == 404
        deadline = time.monotonic() + 4 * GRACE_S + 60
        while _uploads(s3_server, s3_prefix):
            assert time.monotonic() < deadline, "the incomplete upload was never aborted"
            time.sleep(2)
        assert _listing(s3_server, s3_prefix) == []
        made = client.post("/v1/images", json=large)  # the same upload, whole, works
        assert made.status_code == 200, made.text
        artifact_id = made.json()["data"][0]["id"]
        fetched = client.get(f"/v1/artifacts/{artifact_id}")
        assert fetched.status_code == 200 and len(fetched.content) > PART
    assert _uploads(s3_server, s3_prefix) == []
