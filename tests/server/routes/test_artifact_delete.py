"""``DELETE /v1/artifacts/{id}`` on the filesystem backend: the caller's artifact goes, with
its sidecar and marker, and every way of reaching it answers 404 afterwards.

The S3 backend's side (objects gone from the bucket, deleted from another instance) is in
tests/multiinstance/test_s3_artifacts.py.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.server.conftest import LiveServer, ServeFactory

TOKEN = "delete-test-token"
BODY = {
    "operation": "generate",
    "prompt": "a fox to forget",
    "parameters": {"size": "16x16"},
    "output": {"response_format": "artifact", "metadata": "sidecar"},
}
LINKED = {**BODY, "output": {"response_format": "url"}}


@pytest.fixture
def bridge(serve: ServeFactory, tmp_path: Path) -> LiveServer:
    return serve(
        'server.bearer_token_env="BRIDGE_TOKEN"',
        f'artifacts.root="{tmp_path / "artifacts"}"',
        env={"BRIDGE_TOKEN": TOKEN},
    )


def client(server: LiveServer, token: str = TOKEN) -> httpx.Client:
    return server.client(headers={"Authorization": f"Bearer {token}"})


def artifact_files(root: Path) -> list[str]:
    """Images, sidecars and markers under the root (the link key is not an artifact)."""
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and path.suffix in {".png", ".json"}
    )


def test_deleting_an_artifact_removes_its_files_and_every_way_to_it(
    bridge: LiveServer, tmp_path: Path
) -> None:
    root = tmp_path / "artifacts"
    with client(bridge) as caller:
        made = caller.post("/v1/images", json=BODY)
        assert made.status_code == 200, made.text
        [item] = made.json()["data"]
        artifact_id = item["id"]
        assert item["metadata_name"]
        assert caller.get(f"/v1/artifacts/{artifact_id}").status_code == 200
        files = artifact_files(root)
        assert len([name for name in files if artifact_id in name]) == 3  # image, sidecar, marker

        # the query of the admin's read-only view is not accepted here
        refused = caller.delete(f"/v1/artifacts/{artifact_id}", params={"key": "k"})
        assert refused.status_code == 422
        deleted = caller.delete(f"/v1/artifacts/{artifact_id}")
        assert deleted.status_code == 204, deleted.text
        assert deleted.content == b""

        assert artifact_files(root) == [name for name in files if artifact_id not in name]
        for path in (f"/v1/artifacts/{artifact_id}", f"/v1/artifacts/{artifact_id}/thumbnail"):
            gone = caller.get(path)
            assert gone.status_code == 404
            assert gone.json()["error"]["imagegen_bridge"]["code"] == "artifact"
        assert caller.delete(f"/v1/artifacts/{artifact_id}").status_code == 404  # already gone

        # a genuine, unexpired link to a deleted artifact: the image is gone
        url = caller.post("/v1/images", json=LINKED).json()["data"][0]["url"]
        kept = caller.post("/v1/images", json=LINKED).json()["data"][0]["url"]
        linked_id = url.split("/v1/artifact-links/")[1].split("/")[0]
        assert httpx.get(url, timeout=30).status_code == 200
        assert caller.delete(f"/v1/artifacts/{linked_id}").status_code == 204
        link = httpx.get(url, timeout=30)
        assert link.status_code == 404
        assert link.json()["error"]["imagegen_bridge"]["code"] == "artifact"
        assert httpx.get(kept, timeout=30).status_code == 200  # the other one stays


def test_another_callers_or_an_unknown_artifact_is_not_found_and_kept(
    serve: ServeFactory, tmp_path: Path
) -> None:
    root = tmp_path / "artifacts"
    server = serve(
        'server.bearer_token_env="BRIDGE_TOKEN"',
        f'artifacts.root="{root}"',
        env={"BRIDGE_TOKEN": TOKEN},
    )
    with client(server) as caller:
        made = caller.post(
            "/v1/images", json={**BODY, "output": {"response_format": "artifact"}}
        ).json()
        artifact_id = made["data"][0]["id"]
        before = artifact_files(root)
        for target in ("0190e5c0-0000-7000-8000-000000000000", "not-an-id"):
            assert caller.delete(f"/v1/artifacts/{target}").status_code == 404
        assert artifact_files(root) == before
        # a tampered image is never touched: not found, left as it is
        [image] = [root / name for name in before if name.endswith(".png")]
        image.write_bytes(image.read_bytes() + b"\0")
        assert caller.delete(f"/v1/artifacts/{artifact_id}").status_code == 404
        assert artifact_files(root) == before
    with server.client() as anonymous:  # no bearer: refused before any file is read
        assert anonymous.delete(f"/v1/artifacts/{artifact_id}").status_code == 401
