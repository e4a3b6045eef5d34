"""The webhook outbox on both backends: events written with the state change that causes
them, fan-out to endpoints, claims under leases, fenced attempts, endpoints, listings.

Every test runs once on SQLite and once on PostgreSQL (``backend``); ``db.instance()`` opens
one more webhook store on the same database, as a second bridge instance would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    PostgresSharedJobStore,
    PostgresWebhookStore,
    SharedJobStore,
    SqliteSharedJobStore,
    SqliteWebhookStore,
    WebhookStore,
    attach_outbox,
)
from imagebridge.storage.records import OutboxEvent
from imagebridge.storage.rules.webhooks import OutboxLimits
from imagebridge.storage.webhook_store import EndpointWrite

from .conftest import ROOMY, SCOPE, job_id, request, response

LIMITS = OutboxLimits(retry_period_ms=60_000, max_pending=1_000)
NOW_MS = 4_000_000_000_000
"""Later than any outbox write of the tests (which use the real clock)."""
KEY_SCOPE = "key:key_0123456789abcdef"


@dataclass
class Database:
    """One jobs database: its job store (outbox attached) and webhook-store instances."""

    jobs: SharedJobStore
    open_webhooks: Callable[[], Awaitable[WebhookStore]]
    opened: list[Any] = field(default_factory=list)
    webhooks: WebhookStore | None = None

    async def instance(self) -> WebhookStore:
        store = await self.open_webhooks()
        self.opened.append(store)
        return store

    @property
    def store(self) -> WebhookStore:
        assert self.webhooks is not None
        return self.webhooks


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    jobs: SharedJobStore
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("postgres_schema")

        async def open_webhooks() -> WebhookStore:
            return await PostgresWebhookStore.open(url, schema=schema)

        jobs = await PostgresSharedJobStore.open(url, schema=schema)
    else:
        path = tmp_path / "jobs.sqlite3"

        async def open_webhooks() -> WebhookStore:
            return await SqliteWebhookStore.open(path)

        jobs = await SqliteSharedJobStore.open(path)
    database = Database(jobs, open_webhooks)
    try:
        database.webhooks = await database.instance()
        attach_outbox(jobs, database.store, LIMITS)
        yield database
    finally:
        for store in database.opened:
            await store.close()
        await jobs.close()


def endpoint(
    name: str = "ci",
    *,
    types: tuple[str, ...] = ("job.succeeded", "job.failed", "job.cancelled", "job.interrupted"),
    key_id: str | None = None,
) -> EndpointWrite:
    return EndpointWrite(
        name=name,
        url=f"https://{name}.example/hook",
        event_types=types,
        key_id=key_id,
        secret="whsec_" + "A" * 43 + "=",
        secret_env=None,
        secret_hint="whsec_…AAA=",
    )


async def add_endpoint(db: Database, write: EndpointWrite | None = None) -> str:
    record = await db.store.create_endpoint(write or endpoint(), now=1, max_endpoints=10)
    assert record is not None
    return record.id


async def running_job(jobs: SharedJobStore, n: int, scope: str = SCOPE) -> str:
    body = request(f"job {n}")
    await jobs.create(scope, job_id(n), body, body["prompt"], now=10 + n, **ROOMY)
    assert await jobs.claim(scope, job_id(n), now=20 + n)
    return job_id(n)


async def payloads(db: Database) -> list[dict[str, Any]]:
    targets = await db.store.claim("reader", limit=100, now_ms=NOW_MS * 2, lease_ms=1_000)
    return [json.loads(target.payload) for target in targets]


# -- events written with their cause ----------------------------------------------------------


async def test_every_final_status_writes_one_event_in_openai_shape(db: Database) -> None:
    await add_endpoint(db)
    await db.jobs.succeed(SCOPE, await running_job(db.jobs, 1), response(job_id(1)), now=100)
    failed = await running_job(db.jobs, 2)
    error = BridgeError(ErrorCode.UPSTREAM, "upstream broke, with a secret prompt").to_dict()
    await db.jobs.fail(SCOPE, failed, ImageJobStatus.FAILED, error, now=101)
    body = request("queued")
    await db.jobs.create(SCOPE, job_id(3), body, body["prompt"], now=30, **ROOMY)
    await db.jobs.request_cancel(SCOPE, job_id(3), now=102)
    await running_job(db.jobs, 4)
    assert await db.jobs.recover_interrupted(now=103) == 1

    events = sorted(await payloads(db), key=lambda event: event["data"]["id"])
    assert [(e["type"], e["data"]) for e in events] == [
        ("job.succeeded", {"id": job_id(1), "status": "succeeded", "error_code": None}),
        ("job.failed", {"id": job_id(2), "status": "failed", "error_code": "upstream"}),
        ("job.cancelled", {"id": job_id(3), "status": "cancelled", "error_code": None}),
        ("job.interrupted", {"id": job_id(4), "status": "interrupted", "error_code": "cancelled"}),
    ]
    for event in events:
        assert set(event) == {"id", "object", "created_at", "type", "data"}
        assert event["object"] == "event" and event["id"].startswith("evt_")
    assert "secret prompt" not in json.dumps(events)
    assert [e["created_at"] for e in events] == [100, 101, 102, 103]


async def test_an_expired_lease_interrupts_with_an_event(db: Database) -> None:
    await add_endpoint(db)
    body = request("leased")
    await db.jobs.create(SCOPE, job_id(1), body, body["prompt"], now=10, **ROOMY)
    assert await db.jobs.claim_next("a", ["mock"], now=11, lease_secs=5) is not None
    assert await db.jobs.expire_leases(now=100) == 1
    assert [e["type"] for e in await payloads(db)] == ["job.interrupted"]


async def test_an_outbox_write_that_fails_leaves_the_job_unfinished(db: Database) -> None:
    """One transaction: when the event cannot be written, neither is the final status."""
    await add_endpoint(db)
    job = await running_job(db.jobs, 1)

    def broken(*_: Any) -> Any:
        raise BridgeError(ErrorCode.INTERNAL, "outbox refused")

    async def broken_async(*_: Any) -> None:
        broken()

    db.jobs.on_finished(broken_async if isinstance(db.jobs, PostgresSharedJobStore) else broken)  # type: ignore[union-attr]
    with pytest.raises(BridgeError):
        await db.jobs.succeed(SCOPE, job, response(job), now=100)
    assert (await db.jobs.get(SCOPE, job)).status is ImageJobStatus.RUNNING
    attach_outbox(db.jobs, db.store, LIMITS)
    await db.jobs.succeed(SCOPE, job, response(job), now=101)
    assert [e["type"] for e in await payloads(db)] == ["job.succeeded"]


async def test_a_refused_transition_writes_nothing(db: Database) -> None:
    await add_endpoint(db)
    job = await running_job(db.jobs, 1)
    await db.jobs.succeed(SCOPE, job, response(job), now=100)
    with pytest.raises(BridgeError):
        await db.jobs.succeed(SCOPE, job, response(job), now=101)
    await db.jobs.request_cancel(SCOPE, job, now=102)  # terminal: left as it is
    assert len(await payloads(db)) == 1


async def test_no_endpoint_no_event_and_filters_by_type_and_key(db: Database) -> None:
    await db.jobs.succeed(SCOPE, await running_job(db.jobs, 1), response(job_id(1)), now=100)
    assert await db.store.statistics() == type(await db.store.statistics())(0, None)
    admin = await add_endpoint(db, endpoint("admin", types=("job.failed",)))
    own = await add_endpoint(db, endpoint("own", key_id="key_0123456789abcdef"))
    other = await add_endpoint(db, endpoint("other", key_id="key_ffffffffffffffff"))
    await db.jobs.succeed(
        KEY_SCOPE, await running_job(db.jobs, 2, KEY_SCOPE), response(job_id(2)), now=101
    )
    failed = await running_job(db.jobs, 3)
    await db.jobs.fail(SCOPE, failed, "failed", {"code": "upstream", "message": "x"}, now=102)
    page = await db.store.list_deliveries()
    routed = sorted((d.endpoint_id, d.event_type, d.key_id) for d in page.data)
    assert routed == sorted(
        [
            (own, "job.succeeded", "key_0123456789abcdef"),
            (admin, "job.failed", None),
        ]
    )
    assert other not in {d.endpoint_id for d in page.data}


async def test_emit_is_idempotent_by_source_and_bounded(db: Database) -> None:
    await add_endpoint(db, endpoint(types=("response.completed",)))
    event = OutboxEvent(
        type="response.completed",
        data={"id": "resp_1"},
        key_id=None,
        source="response:resp_1:response.completed",
        created_at=5,
    )
    first = await db.store.emit([event], limits=LIMITS, now_ms=NOW_MS)
    again = await db.store.emit([event], limits=LIMITS, now_ms=NOW_MS)
    assert len(first) == 1
    assert len((await db.store.list_deliveries()).data) == 1
    assert again in ([], first) or len((await db.store.list_deliveries()).data) == 1
    [body] = await payloads(db)
    assert body == {
        "id": first[0],
        "object": "event",
        "created_at": 5,
        "type": "response.completed",
        "data": {"id": "resp_1"},
    }
    big = OutboxEvent("response.completed", {"id": "x" * 500}, None, None, 5)
    with pytest.raises(BridgeError) as caught:
        await db.store.emit([big], limits=LIMITS, now_ms=NOW_MS, max_payload_bytes=256)
    assert caught.value.field == "data"


async def test_a_full_outbox_keeps_the_overflow_as_failed(db: Database) -> None:
    await add_endpoint(db)
    db.jobs.on_finished(
        db.store.outbox(OutboxLimits(retry_period_ms=1_000, max_pending=2))  # type: ignore[attr-defined]
    )
    for n in range(1, 4):
        await db.jobs.succeed(SCOPE, await running_job(db.jobs, n), response(job_id(n)), now=99)
    page = await db.store.list_deliveries()
    assert sorted(d.status for d in page.data) == ["failed", "pending", "pending"]
    [full] = [d for d in page.data if d.status == "failed"]
    assert full.last_error_code == "webhook_outbox_full"
    assert (await db.store.statistics()).pending == 2


# -- delivery ---------------------------------------------------------------------------------


async def test_two_instances_never_claim_the_same_delivery(db: Database) -> None:
    await add_endpoint(db, endpoint("a"))
    await add_endpoint(db, endpoint("b"))
    for n in range(1, 21):
        await db.jobs.succeed(SCOPE, await running_job(db.jobs, n), response(job_id(n)), now=99)
    second = await db.instance()
    claims = await asyncio.gather(
        *(
            store.claim(owner, limit=7, now_ms=NOW_MS * 2, lease_ms=60_000)
            for _ in range(6)
            for store, owner in ((db.store, "one"), (second, "two"))
        )
    )
    assert all(len(claim) <= 7 for claim in claims), "a claim takes at most its limit"
    ids = [target.id for claim in claims for target in claim]
    assert len(ids) == len(set(ids)) == 40
    page = await db.store.list_deliveries(limit=100)
    assert [d.attempts for d in page.data] == [1] * 40, "each claimed (and counted) once"


async def test_a_lapsed_lease_is_retried_with_the_same_id_and_fenced(db: Database) -> None:
    await add_endpoint(db)
    await db.jobs.succeed(SCOPE, await running_job(db.jobs, 1), response(job_id(1)), now=99)
    [first] = await db.store.claim("dead", limit=5, now_ms=NOW_MS * 2, lease_ms=1_000)
    assert first.attempts == 1 and first.url == "https://ci.example/hook"
    assert first.secrets.secret is not None
    assert await db.store.claim("other", limit=5, now_ms=NOW_MS * 2 + 999, lease_ms=1_000) == []
    [again] = await db.store.claim("other", limit=5, now_ms=NOW_MS * 2 + 1_000, lease_ms=1_000)
    assert (again.id, again.payload, again.attempts) == (first.id, first.payload, 2)
    assert not await db.store.finish(first.id, "dead", status="delivered", now_ms=NOW_MS * 3)
    assert await db.store.finish(
        again.id,
        "other",
        status="pending",
        now_ms=NOW_MS * 3,
        next_attempt_at=NOW_MS * 4,
        http_status=500,
        error_code="webhook_http_status",
        error="HTTP 500",
    )
    assert await db.store.claim("x", limit=5, now_ms=NOW_MS * 4 - 1, lease_ms=1_000) == []
    [third] = await db.store.claim("x", limit=5, now_ms=NOW_MS * 4, lease_ms=1_000)
    assert third.attempts == 3
    assert await db.store.finish(
        third.id, "x", status="delivered", now_ms=NOW_MS * 4, http_status=204
    )
    record = await db.store.get_delivery(first.id)
    assert (record.status, record.attempts, record.last_status) == ("delivered", 3, 204)
    assert record.completed_at == NOW_MS * 4 and record.last_error_code is None


async def test_release_and_redeliver(db: Database) -> None:
    await add_endpoint(db)
    await db.jobs.succeed(SCOPE, await running_job(db.jobs, 1), response(job_id(1)), now=99)
    [claimed] = await db.store.claim("me", limit=5, now_ms=NOW_MS, lease_ms=60_000)
    assert await db.store.delivering("me") == [claimed.id]
    assert await db.store.release([claimed.id], "me", now_ms=NOW_MS + 5) == 1
    [claimed] = await db.store.claim("me", limit=5, now_ms=NOW_MS + 5, lease_ms=60_000)
    assert await db.store.finish(claimed.id, "me", status="failed", now_ms=NOW_MS + 6)
    with pytest.raises(BridgeError):
        await db.store.redeliver("wh_missing", now_ms=NOW_MS, retry_period_ms=1)
    again = await db.store.redeliver(claimed.id, now_ms=NOW_MS + 7, retry_period_ms=1_000)
    assert (again.status, again.deadline_at, again.completed_at) == (
        "pending",
        NOW_MS + 1_007,
        None,
    )
    with pytest.raises(BridgeError) as caught:
        await db.store.redeliver(claimed.id, now_ms=NOW_MS + 8, retry_period_ms=1_000)
    assert caught.value.details["reason"] == "not_failed"


# -- endpoints and listings -----------------------------------------------------------------


async def test_endpoint_lifecycle_and_bound(db: Database) -> None:
    first = await db.store.create_endpoint(endpoint("one"), now=1, max_endpoints=2)
    second = await db.store.create_endpoint(endpoint("two"), now=2, max_endpoints=2)
    assert first is not None and second is not None
    assert await db.store.create_endpoint(endpoint("three"), now=3, max_endpoints=2) is None
    listed, more = await db.store.list_endpoints(limit=1)
    assert [e.id for e in listed] == [second.id] and more
    listed, more = await db.store.list_endpoints(after=second.id, limit=1)
    assert [e.id for e in listed] == [first.id] and not more
    updated = await db.store.update_endpoint(
        first.id, {"url": "https://new.example/x", "event_types": ("job.failed",)}, now=9
    )
    assert updated is not None and updated.url == "https://new.example/x"
    assert updated.event_types == ("job.failed",) and updated.updated_at == 9
    assert (await db.store.endpoint_secrets(first.id)).secret == endpoint().secret
    rotated = await db.store.rotate_secret(
        first.id, secret="whsec_new", hint="whsec_…new", keep_previous_until=NOW_MS, now=10
    )
    assert rotated is not None and rotated.secret_hint == "whsec_…new"
    secrets = await db.store.endpoint_secrets(first.id)
    assert (secrets.secret, secrets.previous, secrets.previous_expires_at) == (
        "whsec_new",
        endpoint().secret,
        NOW_MS,
    )
    await db.jobs.succeed(SCOPE, await running_job(db.jobs, 1), response(job_id(1)), now=99)
    assert await db.store.delete_endpoint(second.id, now_ms=NOW_MS)
    [gone] = (await db.store.list_deliveries(endpoint_id=second.id)).data
    assert (gone.status, gone.last_error_code) == ("failed", "webhook_endpoint_deleted")
    with pytest.raises(BridgeError) as caught:
        await db.store.get_endpoint(second.id)
    assert caught.value.details == {"resource": "webhook_endpoint"}


async def test_configured_endpoints_are_synced_and_read_only(db: Database) -> None:
    configured = EndpointWrite(
        name="ops",
        url="https://ops.example/h",
        event_types=("job.failed",),
        key_id=None,
        secret=None,
        secret_env="OPS_WEBHOOK_SECRET",
        secret_hint=None,
    )
    await db.store.sync_configured({"whcfg_ops": configured}, now=5, now_ms=NOW_MS)
    await db.store.sync_configured({"whcfg_ops": configured}, now=6, now_ms=NOW_MS)
    record = await db.store.get_endpoint("whcfg_ops")
    assert (record.source, record.secret_env, record.updated_at) == (
        "config",
        "OPS_WEBHOOK_SECRET",
        5,
    )
    assert await db.store.update_endpoint("whcfg_ops", {"name": "x"}, now=7) is None
    assert not await db.store.delete_endpoint("whcfg_ops", now_ms=NOW_MS)
    api = await add_endpoint(db)
    await db.store.sync_configured({}, now=8, now_ms=NOW_MS)
    assert [e.id for e in (await db.store.list_endpoints())[0]] == [api]


async def test_listing_pages_filters_and_pruning(db: Database) -> None:
    target = await add_endpoint(db)
    for n in range(1, 6):
        await db.jobs.succeed(SCOPE, await running_job(db.jobs, n), response(job_id(n)), now=99)
    page = await db.store.list_deliveries(limit=2)
    assert len(page.data) == 2 and page.has_more
    rest = await db.store.list_deliveries(after=page.data[-1].id, limit=10)
    assert len(rest.data) == 3 and not rest.has_more
    assert [d.id for d in page.data + rest.data] == sorted(
        (d.id for d in page.data + rest.data), reverse=True
    )
    assert len((await db.store.list_deliveries(endpoint_id=target, status="pending")).data) == 5
    claimed = await db.store.claim("me", limit=5, now_ms=NOW_MS, lease_ms=60_000)
    for index, item in enumerate(claimed):
        await db.store.finish(item.id, "me", status="delivered", now_ms=NOW_MS + index)
    stats = await db.store.statistics()
    assert stats.pending == 0 and stats.oldest_created_at is None
    assert await db.store.prune(before_ms=NOW_MS + 2, max_retained=100) == 2
    assert await db.store.prune(before_ms=0, max_retained=1) == 2
    assert [d.completed_at for d in (await db.store.list_deliveries()).data] == [NOW_MS + 4]
