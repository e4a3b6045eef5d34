"""Two bridges on one PostgreSQL database and one S3 bucket, with nothing on disk in common.

Issue 35's multi-host deployment: each instance has its own data directory and its own
``artifacts.root`` (so no file one writes is visible to the other), ``artifacts.backend =
"s3"`` on the real Ceph RADOS Gateway of ``scripts/s3-server``, and one link key shared
through ``artifacts.url_signing_key_env``. A job run on A is read from B (its record, its
image with the same ETag, its thumbnail, its metadata sidecar); a ``url`` answer minted by
A is fetched from B with no bearer; nothing of A's lands in either local root; deleting
A's artifact on B removes its objects from the bucket, and A answers 404. Then the
gateway is stopped mid-run: artifact reads answer 503 ``store_unavailable`` with
``x-should-retry: true`` (not a 404); a billed image that cannot be stored is delivered
inline with the ``artifact_not_stored`` warning (the full-disk rule) and leaves no object
behind; readiness says not ready; and all of it works again once the gateway is back.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.store import S3ArtifactStore
from tests.multiinstance.bridges import (
    BridgeProcess,
    SharedDatabase,
    bridge_processes,
    start_bridge,
)
from tests.support.jobs_api import finished_job
from tests.support.postgres import PostgresServer
from tests.support.s3 import S3Server

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.timeout(300)]

_KEY_ENV = "MULTI_INSTANCE_S3_KEY"
_SECRET_ENV = "MULTI_INSTANCE_S3_SECRET"
_LINK_ENV = "MULTI_INSTANCE_LINK_KEY"


def _objects(server: S3Server, prefix: str) -> S3ObjectStore:
    return S3ObjectStore(server.settings(prefix, max_attempts=1))


def _keys(server: S3Server, prefix: str) -> list[str]:
    async def listed() -> list[str]:
        async with _objects(server, prefix) as objects:
            return [item.key for item in await objects.list_objects("", limit=1000)]

    return asyncio.run(listed())


def _sidecar(server: S3Server, prefix: str, artifact_id: str) -> dict[str, Any] | None:
    async def read() -> dict[str, Any] | None:
        async with _objects(server, prefix) as objects:
            return await S3ArtifactStore(objects).read_sidecar(artifact_id, None)

    return asyncio.run(read())


def _wait_ready(url: str, ready: bool, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while (httpx.get(f"{url}/health/ready", timeout=10).status_code == 200) is not ready:
        if time.monotonic() > deadline:
            pytest.fail(f"{url} did not become {'ready' if ready else 'not ready'}")
        time.sleep(0.2)


def _files(root: Path) -> list[Path]:
    """Every image or sidecar file under a local root (the link key and the empty
    ownership directory of the local store are not artifacts)."""
    return [
        path
        for path in root.rglob("*")
        if path.is_file() and path.suffix in {".png", ".jpeg", ".webp", ".json"}
    ]


@pytest.fixture
def pair(
    postgres_server: PostgresServer,
    postgres_schema: str,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
) -> Iterator[tuple[BridgeProcess, BridgeProcess]]:
    database = SharedDatabase.on(postgres_server, postgres_schema)
    env = {
        _KEY_ENV: s3_server.access_key_id,
        _SECRET_ENV: s3_server.secret_access_key,
        _LINK_ENV: secrets.token_urlsafe(32),
    }
    s3 = [
        'artifacts.backend="s3"',
        f'artifacts.s3.endpoint="{s3_server.endpoint}"',
        f'artifacts.s3.region="{s3_server.region}"',
        f'artifacts.s3.bucket="{s3_server.bucket}"',
        f'artifacts.s3.key_prefix="{s3_prefix}"',
        'artifacts.s3.addressing_style="path"',
        f'artifacts.s3.access_key_id_env="{_KEY_ENV}"',
        f'artifacts.s3.secret_access_key_env="{_SECRET_ENV}"',
        "artifacts.s3.max_attempts=1",
        "artifacts.s3.connect_timeout_ms=2000",
        "artifacts.s3.read_timeout_ms=5000",
        f'artifacts.url_signing_key_env="{_LINK_ENV}"',
    ]
    with bridge_processes() as started:
        serving = start_bridge(
            "s3-b",
            database,
            tmp_path / "b",
            f'artifacts.root="{tmp_path / "b-artifacts"}"',
            *s3,
            env=env,
        )
        started.append(serving)
        minting = start_bridge(
            "s3-a",
            database,
            tmp_path / "a",
            f'artifacts.root="{tmp_path / "a-artifacts"}"',
            f'artifacts.public_base_url="{serving.url}/"',
            *s3,
            env=env,
        )
        started.append(minting)
        yield minting, serving


def test_a_job_run_on_one_instance_is_served_by_the_other(
    pair: tuple[BridgeProcess, BridgeProcess],
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
) -> None:
    a, b = pair
    body = {
        "operation": "generate",
        "prompt": "a fox in a bucket",
        "parameters": {"size": "16x16"},
        "output": {"response_format": "artifact", "metadata": "sidecar"},
    }
    with (
        httpx.Client(base_url=a.url, timeout=60) as on_a,
        httpx.Client(base_url=b.url, timeout=60) as on_b,
    ):
        submitted = on_a.post("/v1/jobs", json=body)
        assert submitted.status_code == 202, submitted.text
        job = finished_job(on_a, submitted.json()["id"], 90)
        assert job["status"] == "succeeded", job
        [item] = job["result"]["data"]
        artifact_id = item["id"]
        assert item["metadata_name"]

        # B: the record, the image (same bytes and ETag as A), the thumbnail
        assert finished_job(on_b, job["id"])["result"]["data"][0]["id"] == artifact_id
        from_a = on_a.get(f"/v1/artifacts/{artifact_id}")
        from_b = on_b.get(f"/v1/artifacts/{artifact_id}")
        assert from_b.status_code == 200, from_b.text
        assert from_b.content == from_a.content
        assert from_b.headers["etag"] == f'"{hashlib.sha256(from_b.content).hexdigest()}"'
        assert from_b.headers["etag"] == from_a.headers["etag"]
        assert from_b.headers["content-type"] == "image/png"
        assert from_b.headers["cache-control"] == from_a.headers["cache-control"]
        thumbnail = on_b.get(f"/v1/artifacts/{artifact_id}/thumbnail", params={"edge": 32})
        assert thumbnail.status_code == 200 and thumbnail.content.startswith(b"\x89PNG")
        # the metadata sidecar is in the bucket, verified against the marker
        sidecar = _sidecar(s3_server, s3_prefix, artifact_id)
        assert sidecar is not None
        assert sidecar["image"]["sha256"] == hashlib.sha256(from_b.content).hexdigest()
        assert sidecar["image"]["artifact_name"] == item["name"]

        # a url answer minted by A (its links point at B) is fetched with no bearer
        linked = on_a.post(
            "/v1/images/generations",
            json={"prompt": "a linked fox", "size": "16x16", "response_format": "url"},
        )
        assert linked.status_code == 200, linked.text
        [url] = [entry["url"] for entry in linked.json()["data"]]
        assert url.startswith(b.url + "/")
        fetched = httpx.get(url, timeout=30)
        assert fetched.status_code == 200 and fetched.content.startswith(b"\x89PNG")

    # nothing of either instance's artifacts is on a local disk: it is all in the bucket
    assert _files(tmp_path / "a-artifacts") == []
    assert _files(tmp_path / "b-artifacts") == []
    keys = _keys(s3_server, s3_prefix)
    assert f"ownership/{artifact_id}.json" in keys
    assert f"metadata/{artifact_id}.json" in keys
    assert sum(key.startswith("images/") for key in keys) == 2

    # deleting on B removes A's artifact from the bucket: image, sidecar and marker
    mine = [key for key in keys if artifact_id in key]
    assert len(mine) == 3
    with (
        httpx.Client(base_url=a.url, timeout=60) as on_a,
        httpx.Client(base_url=b.url, timeout=60) as on_b,
    ):
        deleted = on_b.delete(f"/v1/artifacts/{artifact_id}")
        assert deleted.status_code == 204, deleted.text
        assert _keys(s3_server, s3_prefix) == [key for key in keys if key not in mine]
        for path in (f"/v1/artifacts/{artifact_id}", f"/v1/artifacts/{artifact_id}/thumbnail"):
            assert on_a.get(path).status_code == 404
            assert on_b.get(path).status_code == 404
        assert on_a.delete(f"/v1/artifacts/{artifact_id}").status_code == 404
        # the linked image (minted on A) deleted from A: its link, served by B, is 404
        linked_id = url.split("/v1/artifact-links/")[1].split("/")[0]
        assert on_a.delete(f"/v1/artifacts/{linked_id}").status_code == 204
        assert httpx.get(url, timeout=30).status_code == 404
    assert [key for key in _keys(s3_server, s3_prefix) if key.startswith("images/")] == []


def test_the_store_stopped_mid_run_fails_clearly_and_service_resumes(
    pair: tuple[BridgeProcess, BridgeProcess],
    s3_server: S3Server,
    s3_prefix: str,
) -> None:
    a, b = pair
    generate = {"prompt": "a fox before the outage", "size": "16x16", "response_format": "url"}
    native = {
        "operation": "generate",
        "prompt": "a fox during the outage",
        "parameters": {"size": "16x16"},
        "output": {"response_format": "artifact"},
    }
    with (
        httpx.Client(base_url=a.url, timeout=60) as on_a,
        httpx.Client(base_url=b.url, timeout=60) as on_b,
    ):
        before = on_a.post("/v1/images", json=native)
        assert before.status_code == 200, before.text
        artifact_id = before.json()["data"][0]["id"]
        _wait_ready(b.url, True)
        keys_before = _keys(s3_server, s3_prefix)
        s3_server.halt_gateway()
        try:
            # a read: the store did not answer, which is not "gone": 503, retry it
            read = on_b.get(f"/v1/artifacts/{artifact_id}")
            assert read.status_code == 503, read.text
            assert read.headers["x-should-retry"] == "true"
            assert "retry-after" in read.headers
            error = read.json()["error"]
            assert error["imagegen_bridge"]["details"]["reason"] == "store_unavailable"
            thumb = on_b.get(f"/v1/artifacts/{artifact_id}/thumbnail")
            assert thumb.status_code == 503 and thumb.headers["x-should-retry"] == "true"
            # a billed image that cannot be stored is delivered inline, as on a full disk
            inline = on_a.post("/v1/images", json=native)
            assert inline.status_code == 200, inline.text
            answer = inline.json()
            assert answer["data"][0]["type"] == "b64_json"
            assert "artifact_not_stored" in answer["warnings"]
            assert any(
                n["reason"] == "artifact_storage_store_unavailable"
                for n in answer["normalizations"]
            )
            compat = on_a.post("/v1/images/generations", json=generate)
            assert compat.status_code == 200, compat.text
            assert compat.json()["data"][0]["b64_json"]  # no link to a missing object
            # readiness follows the bucket
            _wait_ready(b.url, False)
        finally:
            s3_server.resume_gateway()
        # nothing was half-published while the store was away
        assert _keys(s3_server, s3_prefix) == keys_before
        _wait_ready(b.url, True)
        again = on_b.get(f"/v1/artifacts/{artifact_id}")
        assert again.status_code == 200 and again.content.startswith(b"\x89PNG")
        after = on_a.post("/v1/images", json=native)
        assert after.status_code == 200, after.text
        fresh = after.json()["data"][0]["id"]
        assert on_b.get(f"/v1/artifacts/{fresh}").status_code == 200
