"""``GET /v1/gallery``: the history read as images, newest first, a cursor page at a time.

Pages end in the middle of a request of many images and resume there; rows without an image
(failed, running) are items of their own; the history's filters and owner scopes apply; the
admin reads one API key's gallery with ``?key=`` and nobody else may.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.support.jobs_api import finished_job

ADMIN = "gallery-admin-token"


def make(client: httpx.Client, prompt: str, n: int = 1) -> dict[str, Any]:
    body = {"operation": "generate", "prompt": prompt, "parameters": {"size": "8x8", "n": n}}
    created = client.post("/v1/jobs", json=body)
    assert created.status_code == 202, created.text
    return finished_job(client, created.json()["id"])


def pages(client: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    """Every page of the gallery with ``params``, following the cursor."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        response = client.get("/v1/gallery", params={**params, "cursor": cursor or ""})
        assert response.status_code == 200, response.text
        page = response.json()
        found.append(page)
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def tiles(found: list[dict[str, Any]]) -> list[tuple[str, int, str | None]]:
    return [
        (item["job"], item["position"], (item.get("image") or {}).get("id"))
        for page in found
        for item in page["items"]
    ]


@pytest.fixture(scope="module")
def history(serve_module: ServeFactory) -> tuple[LiveServer, list[dict[str, Any]]]:
    """Four finished rows, oldest first: 3 images, a failure, 2 images, 1 image."""
    server = serve_module("server.jobs.max_running=1")
    with server.client() as client:
        made = [
            make(client, "gallery three foxes", n=3),
            make(client, "[mock:fail=upstream] gallery a fox that fails"),
            make(client, "gallery two owls", n=2),
            make(client, "gallery one heron"),
        ]
    assert [job["status"] for job in made] == ["succeeded", "failed", "succeeded", "succeeded"]
    return server, made


def expected(made: list[dict[str, Any]]) -> list[tuple[str, int, str | None]]:
    """The tiles newest first: each image of a row in output order, a failure as one tile."""
    rows = sorted(made, key=lambda job: (job["created"], job["id"]), reverse=True)
    found: list[tuple[str, int, str | None]] = []
    for job in rows:
        images = list((job.get("result") or {}).get("data", []))
        if not images:
            found.append((job["id"], 0, None))
        found.extend((job["id"], position, item["id"]) for position, item in enumerate(images))
    return found


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 7, 100])
def test_pages_of_any_size_list_every_image_once_newest_first(
    history: tuple[LiveServer, list[dict[str, Any]]], limit: int
) -> None:
    server, made = history
    with server.client() as client:
        found = pages(client, limit=limit, search="gallery")
    assert tiles(found) == expected(made)
    assert all(len(page["items"]) <= limit for page in found)
    assert not found[-1].get("next_cursor")
    for page in found:
        named = [job["id"] for job in page["jobs"]]
        assert named == list(dict.fromkeys(item["job"] for item in page["items"]))


def test_an_item_carries_its_image_and_its_row(
    history: tuple[LiveServer, list[dict[str, Any]]],
) -> None:
    server, made = history
    foxes, failed = made[0], made[1]
    with server.client() as client:
        [page] = pages(client, limit=100, search="gallery")
    jobs = {job["id"]: job for job in page["jobs"]}
    row = jobs[foxes["id"]]
    assert row["prompt"] == "gallery three foxes"
    assert row["status"] == "succeeded" and row["operation"] == "generate"
    assert (row["requested"], row["images"]) == (3, 3)
    assert (row["provider"], row["model"]) == ("mock", "mock-image-1")
    assert row["favorite"] is False and "deleted" not in row and "error" not in row
    second = next(
        item for item in page["items"] if item["job"] == foxes["id"] and item["position"] == 1
    )
    output = foxes["result"]["data"][1]
    assert second["image"] == {
        key: output[key] for key in ("id", "index", "name", "format", "width", "height", "bytes")
    }
    broken = jobs[failed["id"]]
    assert broken["status"] == "failed" and broken["images"] == 0
    assert broken["error"]["code"] == "upstream"
    [lonely] = [item for item in page["items"] if item["job"] == failed["id"]]
    assert lonely == {"job": failed["id"], "position": 0}


def test_the_history_filters_apply(history: tuple[LiveServer, list[dict[str, Any]]]) -> None:
    server, made = history
    owls = made[2]
    with server.client() as client:
        assert client.patch(f"/v1/jobs/{owls['id']}", json={"favorite": True}).status_code == 200
        favourites = tiles(pages(client, favorite="true"))
        assert {job for job, _, _ in favourites} == {owls["id"]} and len(favourites) == 2
        failures = tiles(pages(client, status="failed", search="gallery"))
        assert failures == [(made[1]["id"], 0, None)]
        assert tiles(pages(client, search="heron")) == [
            (made[3]["id"], 0, made[3]["result"]["data"][0]["id"])
        ]
        assert client.patch(f"/v1/jobs/{owls['id']}", json={"deleted": True}).status_code == 200
        try:
            shown = {job for job, _, _ in tiles(pages(client, search="gallery"))}
            assert owls["id"] not in shown
            hidden = tiles(pages(client, visibility="hidden"))
            assert [job for job, _, _ in hidden] == [owls["id"], owls["id"]]
            every = {job for job, _, _ in tiles(pages(client, visibility="all", search="gallery"))}
            assert owls["id"] in every
        finally:
            client.patch(f"/v1/jobs/{owls['id']}", json={"deleted": False, "favorite": False})


def test_a_page_resumes_inside_a_row_and_skips_one_hidden_since(
    history: tuple[LiveServer, list[dict[str, Any]]],
) -> None:
    server, made = history
    foxes = made[0]
    with server.client() as client:
        order = tiles(pages(client, limit=100, search="gallery"))
        first_fox = order.index((foxes["id"], 0, foxes["result"]["data"][0]["id"]))
        page = client.get("/v1/gallery", params={"limit": first_fox + 1, "search": "gallery"})
        cursor = page.json()["next_cursor"]
        resumed = client.get("/v1/gallery", params={"cursor": cursor, "search": "gallery"}).json()
        assert tiles([resumed])[:2] == order[first_fox + 1 : first_fox + 3]
        assert client.patch(f"/v1/jobs/{foxes['id']}", json={"deleted": True}).status_code == 200
        try:
            skipped = client.get("/v1/gallery", params={"cursor": cursor, "search": "gallery"})
            assert all(item["job"] != foxes["id"] for item in skipped.json()["items"])
            assert tiles([skipped.json()]) == order[first_fox + 3 :]
        finally:
            client.patch(f"/v1/jobs/{foxes['id']}", json={"deleted": False})


@pytest.mark.parametrize(
    "params",
    [
        {"cursor": "not-a-cursor"},
        {"cursor": "MTox"},  # "1:1": a job cursor's shape, not the gallery's
        {"limit": "0"},
        {"limit": "101"},
        {"limit": "ten"},
        {"status": "done"},
        {"visibility": "some"},
        {"favorite": "yes"},
        {"search": "x" * 513},
        {"include_deleted": "true"},
        {"limt": "5"},
    ],
)
def test_a_malformed_query_is_refused(
    history: tuple[LiveServer, list[dict[str, Any]]], params: dict[str, str]
) -> None:
    server, _ = history
    with server.client() as client:
        response = client.get("/v1/gallery", params=params)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["imagegen_bridge"]["code"] == "invalid_request"


def test_a_cursor_is_canonical_or_refused(
    history: tuple[LiveServer, list[dict[str, Any]]],
) -> None:
    server, _ = history
    with server.client() as client:
        cursor = client.get("/v1/gallery", params={"limit": 1}).json()["next_cursor"]
        assert client.get("/v1/gallery", params={"cursor": cursor}).status_code == 200
        assert client.get("/v1/gallery", params={"cursor": cursor + "="}).status_code == 422


def test_each_owner_sees_only_its_own_and_the_admin_may_look_at_a_key(
    serve: ServeFactory,
) -> None:
    server = serve(
        "server.keys.enabled=true",
        'server.bearer_token_env="GALLERY_ADMIN"',
        env={"GALLERY_ADMIN": ADMIN},
    )
    with server.client(headers={"authorization": f"Bearer {ADMIN}"}) as admin:
        created = admin.post("/v1/keys", json={"name": "painter"})
    assert created.status_code == 201, created.text
    key_id, secret = created.json()["key"]["id"], created.json()["secret"]
    admin = server.client(headers={"authorization": f"Bearer {ADMIN}"})
    member = server.client(headers={"authorization": f"Bearer {secret}"})
    with admin, member:
        mine = make(admin, "the admin's own lighthouse")
        theirs = make(member, "the member's red kite", n=2)
        assert [item["job"] for item in admin.get("/v1/gallery").json()["items"]] == [mine["id"]]
        assert [item["job"] for item in member.get("/v1/gallery").json()["items"]] == [
            theirs["id"],
            theirs["id"],
        ]
        viewed = admin.get("/v1/gallery", params={"key": key_id}).json()
        assert [job["prompt"] for job in viewed["jobs"]] == ["the member's red kite"]
        image = viewed["items"][0]["image"]["id"]
        assert (
            admin.get(f"/v1/artifacts/{image}/thumbnail", params={"key": key_id}).status_code == 200
        )
        refused = member.get("/v1/gallery", params={"key": key_id})
        assert refused.status_code == 403
        assert refused.json()["error"]["imagegen_bridge"]["code"] == "permission_denied"
