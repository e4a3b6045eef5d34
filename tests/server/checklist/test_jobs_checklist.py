"""Durable jobs, artifacts and presets over HTTP: items 34–42 of the black-box checklist of the
original's observable behaviours (the others are in ``test_api_checklist.py``)."""

from __future__ import annotations

import hashlib
import io
import time
import uuid
from typing import Any

import httpx
import pytest
from PIL import Image

from imagebridge.artifacts.filesystem.store import AsyncArtifactStore
from tests.server.conftest import LiveServer, ServeFactory
from tests.support.images import png_bytes
from tests.support.waiting import wait_until

TOKEN_A = "jobs-token-a"
TOKEN_B = "jobs-token-b"


def job_body(prompt: str = "DURABLE TEST fox", **parameters: Any) -> dict[str, Any]:
    return {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"size": "16x16", **parameters},
    }


def wait_status(client: httpx.Client, job_id: str, wanted: set[str]) -> Any:
    """The job once its status is one of ``wanted`` (or its last state: a hang guard)."""
    job: dict[str, Any] = {}

    def reached() -> bool:
        job.update(client.get(f"/v1/jobs/{job_id}").json())
        return job["status"] in wanted

    wait_until(reached, interval=0.05)
    return job


@pytest.fixture(scope="module")
def jobs_server(serve_module: ServeFactory) -> LiveServer:
    return serve_module("server.jobs.max_running=1")


def succeeded_job(client: httpx.Client, prompt: str = "DURABLE TEST fox") -> dict[str, Any]:
    created = client.post("/v1/jobs", json=job_body(prompt))
    assert created.status_code == 202, created.text
    job: dict[str, Any] = wait_status(client, created.json()["id"], {"succeeded", "failed"})
    assert job["status"] == "succeeded", job
    return job


def test_34_jobs_are_accepted_queued_and_finish_with_artifacts(jobs_server: LiveServer) -> None:
    with jobs_server.client() as client:
        created = client.post(
            "/v1/jobs", json={**job_body(), "idempotency_key": "body-key-is-not-stored"}
        )
        assert created.status_code == 202
        job = created.json()
        assert job["status"] == "queued"
        assert job["request"]["output"]["response_format"] == "artifact"
        assert "idempotency_key" not in job["request"]
        assert job["cancel_requested"] is False and job["favorite"] is False
        done = wait_status(client, job["id"], {"succeeded", "failed"})
    assert done["status"] == "succeeded"
    item = done["result"]["data"][0]
    assert item["type"] == "artifact" and item["id"] and item["name"]
    assert done["result"]["id"] == job["id"]


def test_35_job_submissions_are_idempotent(jobs_server: LiveServer) -> None:
    key = {"Idempotency-Key": f"job-{uuid.uuid4()}"}
    with jobs_server.client() as client:
        before = len(client.get("/v1/jobs?limit=100&visibility=all").json()["items"])
        first = client.post("/v1/jobs", json=job_body("idempotent job"), headers=key)
        # As in the original: the fingerprint is taken over the parsed request with defaults
        # filled in (and delivery forced to artifact), so key order, spelt-out defaults and the
        # requested response_format do not turn a retry into a conflict.
        spelled = {
            "parameters": {"n": 1, "size": "16x16", "quality": "auto"},
            "output": {"response_format": "b64_json"},
            "prompt": "idempotent job",
            "operation": "generate",
        }
        second = client.post("/v1/jobs", json=spelled, headers=key)
        assert first.status_code == second.status_code == 202
        assert first.json()["id"] == second.json()["id"]
        after = len(client.get("/v1/jobs?limit=100&visibility=all").json()["items"])
        assert after == before + 1
        conflict = client.post("/v1/jobs", json=job_body("another prompt"), headers=key)
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "idempotency_conflict"


def test_36_artifacts_are_served_verified_with_cache_headers(jobs_server: LiveServer) -> None:
    with jobs_server.client() as client:
        item = succeeded_job(client)["result"]["data"][0]
        response = client.get(f"/v1/artifacts/{item['id']}")
        assert response.status_code == 200
        assert response.headers["content-type"] == "image/png"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["etag"] == f'"{item["sha256"]}"'
        assert hashlib.sha256(response.content).hexdigest() == item["sha256"]
        assert response.headers["cache-control"] == "private, max-age=31536000, immutable"
        basename = item["name"].rsplit("/", 1)[-1]
        assert response.headers["content-disposition"] == f'inline; filename="{basename}"'
        for bad in (str(uuid.uuid4()), "not-a-uuid"):
            missing = client.get(f"/v1/artifacts/{bad}")
            assert missing.status_code == 404
            assert missing.json()["error"]["imagegen_bridge"]["code"] == "artifact"
        # Every read re-verifies: bytes changed on disk are never served.
        path = jobs_server.data_dir / "artifacts" / item["name"]
        original = path.read_bytes()
        other = png_bytes(16, 16, (1, 2, 3))
        for tampered in (other, original[: len(original) // 2]):
            path.write_bytes(tampered)
            refused = client.get(f"/v1/artifacts/{item['id']}")
            assert refused.status_code == 404, len(tampered)
            assert refused.json()["error"]["imagegen_bridge"]["code"] == "artifact"
            assert client.get(f"/v1/artifacts/{item['id']}/thumbnail").status_code == 404
        path.write_bytes(original)
        assert client.get(f"/v1/artifacts/{item['id']}").content == original


def test_37_thumbnails(jobs_server: LiveServer) -> None:
    with jobs_server.client() as client:
        item = succeeded_job(client)["result"]["data"][0]
        thumb = client.get(f"/v1/artifacts/{item['id']}/thumbnail?edge=128")
        assert thumb.status_code == 200
        assert thumb.headers["content-type"] == "image/png"
        assert thumb.headers["etag"] == f'"{hashlib.sha256(thumb.content).hexdigest()}"'
        with Image.open(io.BytesIO(thumb.content)) as image:
            assert max(image.size) <= 128
        assert client.get(f"/v1/artifacts/{item['id']}/thumbnail?edge=").content == (
            client.get(f"/v1/artifacts/{item['id']}/thumbnail").content
        )
        for edge in ("16", "4096", "x"):
            response = client.get(f"/v1/artifacts/{item['id']}/thumbnail?edge={edge}")
            assert response.status_code == 422, edge
        assert client.get(f"/v1/artifacts/{item['id']}/thumbnail?size=1").status_code == 422
        assert client.get(f"/v1/artifacts/{uuid.uuid4()}/thumbnail").status_code == 404


def test_38_history_favorites_hiding_and_search(serve: ServeFactory) -> None:
    server = serve()
    with server.client() as client:
        job = succeeded_job(client, "DURABLE TEST history")
        other = succeeded_job(client, "another one")
        page = client.get("/v1/jobs?limit=1").json()
        assert len(page["items"]) == 1 and "request" not in page["items"][0]
        assert [item["id"] for item in page["items"]] == [other["id"]]  # newest first
        rest = client.get("/v1/jobs", params={"limit": 1, "cursor": page["next_cursor"]}).json()
        assert [item["id"] for item in rest["items"]] == [job["id"]]
        assert "next_cursor" not in rest
        assert client.get("/v1/jobs?cursor=not-a-cursor").status_code == 422
        # Exactly what the original's SDK sends for `jobs.list()`: empty values are absent.
        sdk_query = "limit=1&cursor=&status=&visibility=&favorite=&search=&include_deleted="
        assert client.get(f"/v1/jobs?{sdk_query}").json() == page
        by_status = client.get("/v1/jobs?status=succeeded").json()["items"]
        assert {item["id"] for item in by_status} == {job["id"], other["id"]}
        assert client.get("/v1/jobs?status=queued").json()["items"] == []
        hidden = client.patch(f"/v1/jobs/{job['id']}", json={"favorite": True, "deleted": True})
        assert hidden.status_code == 200
        assert hidden.json()["favorite"] is True and isinstance(hidden.json()["deleted"], int)
        visible = [item["id"] for item in client.get("/v1/jobs").json()["items"]]
        assert job["id"] not in visible
        found = client.get("/v1/jobs?visibility=hidden&favorite=true&search=durable%20test").json()[
            "items"
        ]
        assert [item["id"] for item in found] == [job["id"]]
        conflict = client.get("/v1/jobs?visibility=hidden&include_deleted=true")
        assert conflict.status_code == 422
        restored = client.patch(f"/v1/jobs/{job['id']}", json={"deleted": False})
        assert restored.status_code == 200 and "deleted" not in restored.json()
        assert job["id"] in [item["id"] for item in client.get("/v1/jobs").json()["items"]]
        for query in ("limit=0", "limit=x", "favorite=yes", "status=done", "extra=1"):
            assert client.get(f"/v1/jobs?{query}").status_code == 422, query


def test_39_patch_rules_not_found_and_cancelling_a_queued_job(jobs_server: LiveServer) -> None:
    with jobs_server.client() as client:
        slow = client.post("/v1/jobs", json=job_body("[mock:latency=3000] blocker")).json()
        queued = client.post("/v1/jobs", json=job_body("waiting")).json()
        assert wait_status(client, slow["id"], {"running"})["status"] == "running"
        assert client.patch(f"/v1/jobs/{queued['id']}", json={}).status_code == 422
        refused = client.patch(f"/v1/jobs/{slow['id']}", json={"deleted": True})
        assert refused.status_code == 422
        assert refused.json()["error"]["param"] == "deleted"
        missing = client.get("/v1/jobs/019f0000-0000-7000-8000-000000000000")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "invalid_request"
        cancelled = client.delete(f"/v1/jobs/{queued['id']}")
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "cancelled"
        assert cancelled.json()["cancel_requested"] is True
        stopping = client.delete(f"/v1/jobs/{slow['id']}").json()
        assert stopping["cancel_requested"] is True
        assert wait_status(client, slow["id"], {"cancelled", "succeeded"})["status"] in {
            "cancelled",
            "succeeded",
        }


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def scope_of(token: str) -> str:
    return "bearer:" + hashlib.sha256(token.encode()).hexdigest()


def same_as_unknown(response: httpx.Response, unknown: httpx.Response) -> None:
    """Another scope's resource is indistinguishable from an id that never existed."""
    assert response.status_code == unknown.status_code == 404
    seen, expected = response.json()["error"], unknown.json()["error"]
    assert (seen["code"], seen["message"]) == (expected["code"], expected["message"])
    assert seen["imagegen_bridge"]["code"] == expected["imagegen_bridge"]["code"]


def test_40_jobs_and_artifacts_belong_to_the_bearer_that_created_them(
    serve: ServeFactory, tmp_path: Any
) -> None:
    """The bridge has one token; rotating it creates a new scope over the same data.

    Three servers share one jobs database and one artifact root: token A, then token B
    (which also runs A's queued job, so the preview exists in B's own process), then
    token A again. B's answers for A's resources match its answers for unknown ids, and
    none of B's attempts changes A's jobs.
    """
    shared = (
        f'server.jobs.database="{tmp_path}/shared/jobs.sqlite3"',
        f'artifacts.root="{tmp_path}/shared/artifacts"',
        "server.jobs.max_running=1",
        'server.bearer_token_env="TOKEN"',
    )
    first = serve(*shared, env={"TOKEN": TOKEN_A})
    with first.client(headers=bearer(TOKEN_A)) as client:
        done = succeeded_job(client)
        blocker = client.post("/v1/jobs", json=job_body("[mock:latency=1200] blocker")).json()
        resumed = client.post(
            "/v1/jobs", json=job_body("[mock:latency=3000] resumed", partial_images=2)
        ).json()
        assert wait_status(client, blocker["id"], {"running"})["status"] == "running"
    first.stop()  # lets the blocker finish; the other job stays queued for the next server
    artifact = done["result"]["data"][0]["id"]
    unknown_job = f"/v1/jobs/{uuid.uuid4()}"
    unknown_artifact = f"/v1/artifacts/{uuid.uuid4()}"

    second = serve(*shared, env={"TOKEN": TOKEN_B})
    assert second.state.jobs is not None
    manager = second.state.jobs.jobs
    key = (scope_of(TOKEN_A), resumed["id"])
    with second.client(headers=bearer(TOKEN_B)) as client:
        # A's job runs in this very process and has a preview: the 404 is the scope's.
        assert wait_until(lambda: manager.partial(*key) is not None, timeout=20)
        path = f"/v1/jobs/{resumed['id']}"
        same_as_unknown(client.get(f"{path}/partial"), client.get(f"{unknown_job}/partial"))
        assert manager.partial(*key) is not None
        own = succeeded_job(client, "token b's own job")  # runs after A's job
        own_artifact = own["result"]["data"][0]["id"]
        for job_path in (path, f"/v1/jobs/{done['id']}"):
            same_as_unknown(client.get(job_path), client.get(unknown_job))
            same_as_unknown(client.delete(job_path), client.delete(unknown_job))
            update = {"favorite": True}
            same_as_unknown(
                client.patch(job_path, json=update), client.patch(unknown_job, json=update)
            )
        listed = client.get("/v1/jobs?visibility=all&limit=100").json()["items"]
        assert [item["id"] for item in listed] == [own["id"]]
        # A's artifact is intact in this server's store, yet B cannot read it.
        store = second.state.application.artifacts
        assert isinstance(store, AsyncArtifactStore)
        assert store.sync.read(artifact, scope_of(TOKEN_A))
        same_as_unknown(client.get(f"/v1/artifacts/{artifact}"), client.get(unknown_artifact))
        same_as_unknown(
            client.get(f"/v1/artifacts/{artifact}/thumbnail"),
            client.get(f"{unknown_artifact}/thumbnail"),
        )
        assert client.get(f"/v1/artifacts/{own_artifact}").status_code == 200
        assert client.get(f"/v1/artifacts/{own_artifact}/thumbnail").status_code == 200
    second.stop()  # the resumed job finishes during the graceful stop

    third = serve(*shared, env={"TOKEN": TOKEN_A})
    with third.client(headers=bearer(TOKEN_A)) as client:
        untouched = client.get(f"/v1/jobs/{done['id']}").json()
        assert untouched["favorite"] is False
        finished = client.get(f"/v1/jobs/{resumed['id']}").json()
        assert finished["status"] == "succeeded", finished
        assert finished["cancel_requested"] is False and finished["favorite"] is False
        assert client.get(f"/v1/artifacts/{artifact}").status_code == 200
        resumed_artifact = finished["result"]["data"][0]["id"]
        assert client.get(f"/v1/artifacts/{resumed_artifact}/thumbnail").status_code == 200
        same_as_unknown(client.get(f"/v1/jobs/{own['id']}"), client.get(unknown_job))
        same_as_unknown(client.get(f"/v1/artifacts/{own_artifact}"), client.get(unknown_artifact))
        listed = client.get("/v1/jobs?visibility=all&limit=100").json()["items"]
        assert {item["id"] for item in listed} == {done["id"], blocker["id"], resumed["id"]}


def test_41_partial_previews_while_running(jobs_server: LiveServer) -> None:
    with jobs_server.client() as client:
        job = client.post(
            "/v1/jobs", json=job_body("[mock:latency=2400] previews", partial_images=2)
        ).json()
        deadline = time.monotonic() + 10
        preview = client.get(f"/v1/jobs/{job['id']}/partial")
        while preview.status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
            preview = client.get(f"/v1/jobs/{job['id']}/partial")
        assert preview.status_code == 200
        assert preview.headers["content-type"] == "image/png"
        assert preview.headers["x-image-output-index"] == "0"
        assert preview.headers["x-image-partial-index"] in {"0", "1"}
        assert preview.headers["cache-control"] == "private, no-store"
        assert preview.content.startswith(b"\x89PNG")
        assert wait_status(client, job["id"], {"succeeded"})["status"] == "succeeded"
        gone = client.get(f"/v1/jobs/{job['id']}/partial")
    assert gone.status_code == 404
    assert gone.json()["error"]["message"] == "partial preview is not available"


def test_42_preset_lifecycle(jobs_server: LiveServer) -> None:
    body = {
        "name": "portrait-high",
        "description": "Editorial portrait",
        "template": {"parameters": {"quality": "high"}},
    }
    with jobs_server.client() as client:
        created = client.post("/v1/presets", json=body)
        assert created.status_code == 201
        assert created.headers["location"] == "/v1/presets/portrait-high"
        preset = created.json()
        assert preset["created"] == preset["updated"]
        template = preset["template"]
        assert template["operation"] == "generate"
        assert template["parameters"]["quality"] == "high"
        assert template["parameters"]["n"] == 1
        assert template["policies"]["compatibility"] == "strict"
        assert client.post("/v1/presets", json=body).status_code == 409
        assert client.get("/v1/presets/portrait-high").status_code == 200
        first = client.get("/v1/presets?limit=1")
        assert first.status_code == 200
        assert client.get("/v1/presets?limit=1&cursor=").json() == first.json()
        replaced = client.put(
            "/v1/presets/portrait-high", json={"description": "Updated", "template": {}}
        )
        assert replaced.status_code == 200
        assert replaced.json()["created"] == preset["created"]
        assert replaced.json()["description"] == "Updated"
        assert client.delete("/v1/presets/portrait-high").status_code == 204
        assert client.get("/v1/presets/portrait-high").status_code == 404
        for name in ("../escape", "-x"):
            response = client.post("/v1/presets", json={**body, "name": name})
            assert response.status_code == 422
            assert response.json()["error"]["param"] == "name"
        assert client.get("/v1/presets/-x").status_code == 422
        with_images = client.post(
            "/v1/presets", json={**body, "name": "imgs", "template": {"images": []}}
        )
        assert with_images.status_code == 422
