"""Named API keys over HTTP: admin API, quotas counted in images, headers, revocation,
expiry, provider allow-lists and the failed-authentication limit (docs/keys.md)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from imagebridge.contract.keys import (
    BridgeKey,
    BridgeKeyIssued,
    BridgeKeyList,
    BridgeKeyUpdate,
    BridgeKeyUsageReport,
)
from imagebridge.providers.mock import MockProvider
from imagebridge.server.routes.keys import _LIMIT_PROPERTIES
from tests.server.auth.keys import BODY, ENV, KEYS_ON, admin, as_key, burst, create_key
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of, with_mock
from tests.support.fakes import FakeProvider
from tests.support.jobs_api import finished_job


def test_forty_concurrent_requests_on_ten_images_a_day_give_exactly_ten(
    serve: ServeFactory,
) -> None:
    server = serve(*KEYS_ON, env=ENV)
    _, secret = create_key(server, "team", images_per_day=10)
    mock = mock_of(server)
    before = mock.calls

    responses = asyncio.run(burst(server, secret, 40))

    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(200) == 10 and statuses.count(429) == 30
    assert mock.calls - before == 10  # nothing was sent upstream for a refusal
    now = time.time()
    for refused in (r for r in responses if r.status_code == 429):
        error = refused.json()["error"]["imagegen_bridge"]
        assert error["code"] == "rate_limited" and error["details"]["windows"] == ["day"]
        # Retry-After points at the next UTC midnight.
        reset = error["details"]["reset_at"]
        assert reset % 86_400 == 0 and 0 < reset - now <= 86_400
        assert abs(int(refused.headers["retry-after"]) - (reset - now)) <= 5
        assert refused.headers["x-imagebridge-images-remaining-day"] == "0"
    with as_key(server, secret) as client:
        listed = client.get("/v1/jobs")
    assert listed.headers["x-imagebridge-images-limit-day"] == "10"
    assert listed.headers["x-imagebridge-images-remaining-day"] == "0"
    with admin(server) as client:
        usage = client.get("/v1/usage", params={"key": "team"}).json()
    (row,) = usage["data"]
    assert (row["requested"], row["delivered"], row["failed"], row["key_name"]) == (
        10,
        10,
        0,
        "team",
    )


def test_every_answer_to_a_key_carries_its_remaining_images(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    _, secret = create_key(server, "ann", images_per_day=5, images_per_month=7)
    with as_key(server, secret) as client:
        made = client.post("/v1/images", json={**BODY, "parameters": {"n": 2}})
        other = client.get("/v1/providers")
        missing = client.get("/v1/jobs/00000000-0000-7000-8000-000000000000")
    assert made.status_code == 200
    assert made.headers["x-imagebridge-images-remaining-day"] == "3"
    assert made.headers["x-imagebridge-images-remaining-month"] == "5"
    assert "x-imagebridge-images-remaining-week" not in made.headers  # no weekly limit
    for answer in (other, missing):
        assert answer.headers["x-imagebridge-images-remaining-day"] == "3"
    with admin(server) as client:
        assert "x-imagebridge-images-remaining-day" not in client.get("/v1/providers").headers


def test_a_failed_image_gives_its_reservation_back(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    _, secret = create_key(server, "bea", images_per_day=2)
    failing = {**BODY, "prompt": "[mock:fail=upstream] a fox"}
    with as_key(server, secret) as client:
        failed = client.post("/v1/images", json=failing)
        partial = client.post(
            "/v1/images",
            json={
                **BODY,
                "prompt": "[mock:fail-output=1] a fox",
                "parameters": {"n": 2, "failure_policy": "best_effort"},
            },
        )
    assert failed.status_code >= 500
    assert failed.headers["x-imagebridge-images-remaining-day"] == "2"
    assert partial.status_code == 200 and len(partial.json()["data"]) == 1
    assert partial.headers["x-imagebridge-images-remaining-day"] == "1"
    with admin(server) as client:
        rows = client.get("/v1/usage").json()["data"]
    assert [(r["requested"], r["delivered"], r["failed"], r["unknown"]) for r in rows] == [
        (3, 1, 2, 0)
    ]


def test_admin_api_is_admin_only_and_never_shows_secrets(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    key_id, secret = create_key(server, "cid")
    with as_key(server, secret) as client:
        assert client.get("/v1/keys").status_code == 403
        assert client.post("/v1/keys", json={"name": "evil"}).status_code == 403
        assert client.get("/v1/usage").status_code == 403
    with admin(server) as client:
        listed = client.get("/v1/keys")
        shown = client.get(f"/v1/keys/{key_id}")
        assert client.get("/v1/keys/key_nope").status_code == 404
        taken = client.post("/v1/keys", json={"name": "cid"})
        unknown = client.post("/v1/keys", json={"name": "dan", "colour": "red"})
        patched = client.patch(f"/v1/keys/{key_id}", json={"images_per_week": 3})
    assert listed.status_code == 200 and [k["name"] for k in listed.json()["data"]] == ["cid"]
    assert secret not in listed.text + shown.text + patched.text
    assert taken.status_code == 422 and unknown.status_code == 422
    assert patched.json()["images_per_week"] == 3
    assert patched.json()["remaining"]["week"]["remaining"] == 3
    with server.client() as anonymous:
        assert anonymous.get("/v1/providers").status_code == 401


def test_an_expiry_before_1970_is_refused_on_its_field(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    key_id, _ = create_key(server, "eve")
    with admin(server) as client:
        created = client.post("/v1/keys", json={"name": "fay", "expires_at": -1})
        patched = client.patch(f"/v1/keys/{key_id}", json={"expires_at": -86400})
        listed = client.get("/v1/keys").json()["data"]
    for refused in (created, patched):
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert (error["code"], error["param"]) == ("invalid_request", "expires_at")
        assert "expires_at must be a Unix time from 0" in error["message"]
    assert [(k["name"], k["expires_at"]) for k in listed] == [("eve", None)]


def test_revoked_and_expired_keys_are_refused_at_once(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    key_id, secret = create_key(server, "eve")
    other_id, other = create_key(server, "fay")
    with as_key(server, secret) as client:
        assert client.get("/v1/providers").status_code == 200
    with admin(server) as client:
        assert client.delete(f"/v1/keys/{key_id}").json()["state"] == "revoked"
        expired = client.patch(f"/v1/keys/{other_id}", json={"expires_at": int(time.time()) - 1})
    assert expired.json()["state"] == "expired"
    for refused in (secret, other):
        with as_key(server, refused) as client:
            answer = client.get("/v1/providers")
        assert answer.status_code == 401
        assert refused not in answer.text


def test_a_key_uses_only_its_allowed_providers(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    _, secret = create_key(server, "gus", providers=["codex-responses"], images_per_day=1)
    with as_key(server, secret) as client:
        refused = client.post("/v1/images", json=BODY)
    assert refused.status_code == 403
    assert refused.headers["x-imagebridge-images-remaining-day"] == "1"


def test_failed_authentications_from_one_address_are_slowed(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, "server.keys.auth_failure_limit=3", env=ENV)
    with server.client(headers={"authorization": "Bearer ibk_wrong"}) as client:
        statuses = [client.get("/v1/providers").status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    with admin(server) as client:  # refused before any secret is checked
        limited = client.get("/v1/providers")
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) <= 60


def test_keys_work_with_jobs_disabled_and_revocation_reaches_another_instance(
    serve: ServeFactory, tmp_path: Any
) -> None:
    database = tmp_path / "shared-keys.sqlite3"
    sets = (*KEYS_ON, f'server.jobs.database="{database}"', "server.jobs.enabled=false")
    first = serve(*sets, env=ENV)
    second = serve(*sets, env=ENV)
    key_id, secret = create_key(first, "hal", images_per_day=1)
    with as_key(second, secret) as client:
        assert client.post("/v1/images", json=BODY).status_code == 200
    with as_key(first, secret) as client:
        assert client.post("/v1/images", json=BODY).status_code == 429  # the shared quota
    with admin(first) as client:
        client.delete(f"/v1/keys/{key_id}")
    with as_key(second, secret) as client:  # the very next request: no cache between them
        assert client.get("/v1/providers").status_code == 401


def test_the_admin_api_is_in_the_openapi_document_without_colliding_names(
    serve: ServeFactory,
) -> None:
    import json
    from pathlib import Path

    original = json.loads(
        (
            Path(__file__).parents[2] / "fixtures" / "contract" / "imagegen-bridge-v1.openapi.json"
        ).read_text()
    )
    theirs = {
        op["operationId"] for item in original["paths"].values() for op in item.values()
    } | set(original["components"]["schemas"])
    server = serve(*KEYS_ON, env=ENV)
    with admin(server) as client:
        document = client.get("/v1/openapi.json").json()
    ours = {
        (method, path): op["operationId"]
        for path, item in document["paths"].items()
        for method, op in item.items()
        if path.startswith(("/v1/keys", "/v1/usage"))
    }
    assert ours == {
        ("get", "/v1/keys"): "listBridgeKeys",
        ("post", "/v1/keys"): "createBridgeKey",
        ("get", "/v1/keys/{id}"): "getBridgeKey",
        ("patch", "/v1/keys/{id}"): "updateBridgeKey",
        ("delete", "/v1/keys/{id}"): "revokeBridgeKey",
        ("post", "/v1/keys/{id}/rotate"): "rotateBridgeKey",
        ("get", "/v1/usage"): "listBridgeKeyUsage",
    }
    assert not set(ours.values()) & theirs
    assert not any(path.startswith("/v1/keys") for path in original["paths"])


def test_a_key_never_sees_another_keys_jobs_artifacts_sessions_or_changes_presets(
    serve: ServeFactory,
) -> None:
    server = serve(*KEYS_ON, env=ENV)
    owner_id, owner_secret = create_key(server, "owner", images_per_day=5)
    other_id, other_secret = create_key(server, "other")
    session = {"mode": "persistent", "key": "my-story"}
    with as_key(server, owner_secret) as owner, as_key(server, other_secret) as other:
        job = owner.post("/v1/jobs", json={**BODY, "session": session}).json()
        done = finished_job(owner, job["id"])
        assert done["status"] == "succeeded"
        artifact = done["result"]["data"][0]["id"]
        assert done["result"]["session"]["key"] == "my-story"  # as the caller named it
        job_id = job["id"]
        assert owner.get(f"/v1/artifacts/{artifact}").status_code == 200
        assert owner.get("/v1/sessions/my-story", params={"provider": "mock"}).status_code == 200
        # Every route that takes an id answers the other key as if it did not exist.
        for method, path in (
            ("GET", f"/v1/jobs/{job_id}"),
            ("PATCH", f"/v1/jobs/{job_id}"),
            ("DELETE", f"/v1/jobs/{job_id}"),
            ("GET", f"/v1/jobs/{job_id}/partial"),
            ("GET", f"/v1/artifacts/{artifact}"),
            ("GET", f"/v1/artifacts/{artifact}/thumbnail"),
            ("DELETE", f"/v1/artifacts/{artifact}"),
        ):
            body = {"favorite": True} if method == "PATCH" else None
            answer = other.request(method, path, json=body)
            assert answer.status_code == 404, (method, path, answer.status_code)
        assert job_id not in other.get("/v1/jobs").text
        for method in ("GET", "DELETE"):
            answer = other.request(method, "/v1/sessions/my-story", params={"provider": "mock"})
            assert answer.status_code == 404, method
        assert owner.get("/v1/sessions/my-story", params={"provider": "mock"}).status_code == 200
        # The same session name on another key is another session.
        mine = other.post("/v1/images", json={**BODY, "session": session}).json()
        assert mine["session"]["reused"] is False
        # A key's preset is its own: another key cannot read, list, change or delete it.
        preset = {"name": "mine", "template": {"prompt": "a house"}}
        assert owner.post("/v1/presets", json=preset).status_code == 201
        for method in ("GET", "PUT", "DELETE"):
            body = {"template": {}} if method == "PUT" else None
            answer = other.request(method, "/v1/presets/mine", json=body)
            assert answer.status_code == 404, (method, answer.status_code)
        assert other.get("/v1/presets").json()["items"] == []
        assert owner.get("/v1/presets/mine").json()["template"]["prompt"] == "a house"
        # The admin reads one key's jobs and artifacts with ?key=; a key may not.
        assert other.get("/v1/jobs", params={"key": owner_id}).status_code == 403
        assert other.get(f"/v1/artifacts/{artifact}", params={"key": owner_id}).status_code == 403
    with admin(server) as boss:
        assert job_id not in boss.get("/v1/jobs").text  # not in the admin's own history
        listed = boss.get("/v1/jobs", params={"key": owner_id}).json()
        assert [item["id"] for item in listed["items"]] == [job_id]
        assert boss.get("/v1/jobs", params={"key": other_id, "origin": "job"}).json()["items"] == []
        # ... and the other key's history holds its own synchronous request (issue 39)
        theirs = boss.get("/v1/jobs", params={"key": other_id}).json()["items"]
        assert len(theirs) == 1 and theirs[0]["id"] != job_id
        assert boss.get(f"/v1/jobs/{job_id}", params={"key": owner_id}).status_code == 200
        for path in (f"/v1/artifacts/{artifact}", f"/v1/artifacts/{artifact}/thumbnail"):
            assert boss.get(path, params={"key": owner_id}).status_code == 200
            assert boss.get(path, params={"key": other_id}).status_code == 404


def test_metrics_count_images_and_quota_per_key_name_for_the_admin_only(
    serve: ServeFactory,
) -> None:
    server = serve(*KEYS_ON, "server.metrics.enabled=true", env=ENV)
    _, secret = create_key(server, "metered", images_per_day=5)
    with as_key(server, secret) as client:
        assert client.post("/v1/images", json={**BODY, "parameters": {"n": 2}}).status_code == 200
        failing = {**BODY, "prompt": "[mock:fail=upstream] a fox"}
        assert client.post("/v1/images", json=failing).status_code >= 500
        assert client.get("/metrics").status_code == 403
    with admin(server) as client:
        text = client.get("/metrics").text
    images = 'imagegen_bridge_images_total{account="(none)",key="metered",model="%s",'
    images += 'outcome="%s",provider="mock",route="images"} %s'
    assert images % ("mock-image-1", "delivered", "2.0") in text
    assert images % ("(default)", "failed", "1.0") in text
    # the failed image was given back: 2 of 5 used
    assert 'imagegen_bridge_key_quota_used{key="metered",window="day"} 2.0' in text
    assert 'imagegen_bridge_key_quota_remaining{key="metered",window="day"} 3.0' in text
    assert "imagebridge_key_images" not in text  # renamed (docs/operations.md §4)
    assert secret not in text and secret[:12] not in text


def test_the_openai_sdk_on_a_key_gets_its_images_then_a_rate_limit_error(
    serve: ServeFactory,
) -> None:
    import openai

    server = serve(*KEYS_ON, env=ENV)
    _, secret = create_key(server, "sdk", images_per_day=2)
    mock = mock_of(server)
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=secret, max_retries=0)
    result = client.images.generate(
        model="mock-image-1", prompt="two foxes", n=2, response_format="b64_json"
    )
    assert result.data is not None and len(result.data) == 2
    calls = mock.calls
    with pytest.raises(openai.RateLimitError) as refused:
        client.images.generate(model="mock-image-1", prompt="one more", n=1)
    headers = refused.value.response.headers
    assert headers["x-should-retry"] == "true" and int(headers["retry-after"]) >= 1
    assert headers["x-imagebridge-images-remaining-day"] == "0"
    assert mock.calls == calls  # refused before the provider


async def _two_at_once(server: LiveServer, secret: str, body: dict[str, Any]) -> list[int]:
    async with server.async_client(headers={"authorization": f"Bearer {secret}"}) as client:
        answers = await asyncio.gather(*(client.post("/v1/images", json=body) for _ in range(2)))
    return sorted(answer.status_code for answer in answers)


def test_max_concurrent_waits_within_the_deadline(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    _, secret = create_key(server, "single", max_concurrent=1)
    slow = {**BODY, "prompt": "[mock:latency=400] a fox"}
    started = time.monotonic()
    assert asyncio.run(_two_at_once(server, secret, slow)) == [200, 200]
    assert time.monotonic() - started >= 0.8  # the second waited for the first
    # A deadline shorter than the wait: the second is refused, nothing reserved for it.
    mock = mock_of(server)
    slow = {**BODY, "prompt": "[mock:latency=3000] a fox"}
    hurried = {**BODY, "timeout_ms": 500}
    assert asyncio.run(_behind(server, secret, mock, slow, hurried)) == (200, 429)
    with admin(server) as client:
        rows = client.get("/v1/usage").json()["data"]
    assert sum(row["requested"] for row in rows) == 3  # the refused one never reserved


async def _behind(
    server: LiveServer,
    secret: str,
    mock: MockProvider,
    first: dict[str, Any],
    second: dict[str, Any],
) -> tuple[int, int]:
    """``second`` sent once ``first`` is running at the provider."""
    async with server.async_client(headers={"authorization": f"Bearer {secret}"}) as client:
        calls = mock.calls
        running = asyncio.create_task(client.post("/v1/images", json=first))
        deadline = time.monotonic() + 30
        # The provider runs on the server thread: poll its counter (bounded).
        while mock.calls == calls and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        refused = await client.post("/v1/images", json=second)
        refused_error = refused.json()["error"]["imagegen_bridge"]
        assert refused_error["details"]["reason"] == "key_concurrency"
        return (await running).status_code, refused.status_code


def test_a_keys_job_reserves_when_it_runs(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    _, secret = create_key(server, "jobs", images_per_day=1)
    with as_key(server, secret) as client:
        failing = client.post("/v1/jobs", json={**BODY, "prompt": "[mock:fail=upstream] x"})
        assert finished_job(client, failing.json()["id"])["status"] == "failed"
        first = client.post("/v1/jobs", json=BODY).json()
        assert finished_job(client, first["id"])["status"] == "succeeded"  # the failure gave back
        second = client.post("/v1/jobs", json=BODY)
        assert second.status_code == 202  # queued: nothing is reserved before it runs
        refused = finished_job(client, second.json()["id"])
    assert refused["status"] == "failed"
    assert refused["error"]["code"] == "rate_limited"
    assert refused["error"]["details"]["reason"] == "key_quota"


def test_presets_are_each_keys_own_over_the_admins_shared_ones(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    a_id, a_secret = create_key(server, "ann")
    _, b_secret = create_key(server, "ben")
    house = {"name": "house", "template": {"prompt": "a shared house"}}
    with admin(server) as boss, as_key(server, a_secret) as ann, as_key(server, b_secret) as ben:
        assert boss.post("/v1/presets", json=house).status_code == 201
        own = {"name": "fox", "template": {"prompt": "ann's fox"}}
        assert ann.post("/v1/presets", json=own).status_code == 201
        assert ann.post("/v1/presets", json=own).status_code == 409  # ann has it already
        # ben may use the same name: it is his own preset
        ben_fox = {"name": "fox", "template": {"prompt": "ben's fox"}}
        assert ben.post("/v1/presets", json=ben_fox).status_code == 201

        def names(client: httpx.Client, **params: str) -> list[str]:
            items = client.get("/v1/presets", params=params).json()["items"]
            return [f"{item['name']}:{item['template']['prompt']}" for item in items]

        assert names(ann) == ["fox:ann's fox", "house:a shared house"]
        assert names(ben) == ["fox:ben's fox", "house:a shared house"]
        assert names(boss) == ["house:a shared house"]  # the admin's own are the shared ones
        assert names(boss, key=a_id) == ["fox:ann's fox"]  # and it reads one key's
        assert boss.get("/v1/presets/fox", params={"key": a_id}).status_code == 200
        assert boss.get("/v1/presets/fox").status_code == 404
        assert ben.get("/v1/presets", params={"key": a_id}).status_code == 403

        # ben changes his own; ann's stays; the shared one is read-only for a key
        assert ben.put("/v1/presets/fox", json={"template": {"prompt": "b2"}}).status_code == 200
        assert ann.get("/v1/presets/fox").json()["template"]["prompt"] == "ann's fox"
        assert ben.put("/v1/presets/house", json={"template": {}}).status_code == 403
        assert ben.delete("/v1/presets/house").status_code == 403
        assert ben.delete("/v1/presets/fox").status_code == 204
        assert ben.delete("/v1/presets/fox").status_code == 404
        assert ann.get("/v1/presets/fox").status_code == 200
        # a key's own preset of a shared name is the one it reads and writes
        mine = {"name": "house", "template": {"prompt": "ann's house"}}
        assert ann.post("/v1/presets", json=mine).status_code == 201
        assert ann.get("/v1/presets/house").json()["template"]["prompt"] == "ann's house"
        assert ann.delete("/v1/presets/house").status_code == 204
        assert ann.get("/v1/presets/house").json()["template"]["prompt"] == "a shared house"
        assert boss.get("/v1/presets/house").status_code == 200


def test_every_admin_answer_is_its_contract_model_byte_for_byte(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    answers: list[tuple[type[BaseModel], httpx.Response]] = []
    with admin(server) as client:
        created = client.post("/v1/keys", json={"name": "ann", "images_per_day": 5})
        answers.append((BridgeKeyIssued, created))
        key_id, secret = created.json()["key"]["id"], created.json()["secret"]
        with as_key(server, secret) as member:
            assert member.post("/v1/images", json=BODY).status_code == 200
        answers += [
            (BridgeKeyList, client.get("/v1/keys")),
            (BridgeKey, client.get(f"/v1/keys/{key_id}")),
            (BridgeKey, client.patch(f"/v1/keys/{key_id}", json={"images_per_week": 9})),
            (BridgeKeyIssued, client.post(f"/v1/keys/{key_id}/rotate")),
            (BridgeKeyUsageReport, client.get("/v1/usage")),
            (BridgeKeyUsageReport, client.get("/v1/usage", params={"key": "nobody"})),
            (BridgeKey, client.delete(f"/v1/keys/{key_id}")),
        ]
    for model, answer in answers:
        assert answer.status_code in (200, 201), answer.text
        decoded = model.model_validate_json(answer.content, strict=True)
        assert decoded.model_dump_json().encode() == answer.content
    usage = BridgeKeyUsageReport.model_validate_json(answers[5][1].content)
    assert usage.time_zone == "UTC" and [row.key_name for row in usage.data] == ["ann"]


def test_the_documented_bodies_are_the_contract_models() -> None:
    """The OpenAPI bodies are written out (their schema predates the models): same fields."""
    assert set(_LIMIT_PROPERTIES) == set(BridgeKeyUpdate.model_fields)


def test_a_keys_request_or_job_never_falls_back_to_a_provider_off_its_allow_list(
    serve: ServeFactory,
) -> None:
    """The route and every fallback are checked, by images and jobs alike (docs/keys.md)."""
    backup = FakeProvider("backup")
    server = serve(*KEYS_ON, providers=with_mock(backup), env=ENV)
    _, secret = create_key(server, "solo", providers=["mock"], images_per_day=3)
    routing = {"provider": "mock", "fallbacks": [{"provider": "backup"}]}
    body = {**BODY, "prompt": "[mock:fail=upstream] a fox", "routing": routing}
    with as_key(server, secret) as client:
        refused = client.post("/v1/images", json=body)
        job = client.post("/v1/jobs", json=body)
        assert job.status_code == 202, job.text
        failed = finished_job(client, job.json()["id"])
        allowed = client.post("/v1/images", json={**BODY, "parameters": {"n": 1}})
    assert refused.status_code == 403
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "permission_denied"
    assert backup.calls == 0
    assert allowed.headers["x-imagebridge-images-remaining-day"] == "2"  # nothing reserved
