"""Delivery from the outbox to a real receiver on 127.0.0.1, verified with the ``openai`` SDK.

The service runs on a SQLite outbox (and, for two instances, on PostgreSQL too) with short
timings; the receiver is down, fails, is slow, and every event still arrives, once per
``webhook-id``.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from imagebridge.storage import PostgresWebhookStore, SqliteWebhookStore, WebhookStore
from imagebridge.webhooks import TargetPolicy, WebhookService, WebhookSettings, backoff_ms
from tests.support.waiting import eventually
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.usefixtures("no_external_network")

Open = Callable[..., Awaitable[WebhookService]]


def fast_settings(port: int, **changes: Any) -> WebhookSettings:
    settings = WebhookSettings(
        targets=TargetPolicy(allow_private_networks=True, allowed_ports=frozenset({port})),
        timeout_ms=1_000,
        retry_period_secs=60,
        retry_initial_ms=40,
        retry_max_interval_ms=200,
        lease_secs=5,
        max_concurrent=4,
        poll_interval_ms=20,
    )
    return dataclasses.replace(settings, **changes)


@pytest.fixture
def receiver() -> Receiver:
    made = Receiver()
    yield made  # type: ignore[misc]
    made.stop()


@pytest.fixture
async def open_service(tmp_path: Path) -> AsyncIterator[Open]:
    """Each call opens one more service ("instance") on the same SQLite outbox."""
    opened: list[WebhookService] = []

    async def open_one(
        settings: WebhookSettings,
        *,
        owner: str = "one",
        store: WebhookStore | None = None,
        **kw: Any,
    ) -> WebhookService:
        service = WebhookService(
            store or await SqliteWebhookStore.open(tmp_path / "jobs.sqlite3"),
            settings,
            owner=owner,
            env=kw.pop("env", {}),
            **kw,
        )
        opened.append(service)
        return service

    yield open_one
    for service in opened:
        await service.aclose()


async def emit(service: WebhookService, count: int, prefix: str = "resp") -> list[str]:
    ids: list[str] = []
    for n in range(count):
        ids += await service.emit_response("response.completed", f"{prefix}_{n}")
    return ids


async def test_every_event_arrives_once_per_id_through_down_failing_and_slow(
    open_service: Open, receiver: Receiver
) -> None:
    outcomes: Counter[str] = Counter()
    service = await open_service(
        fast_settings(receiver.port), observer=lambda outcome: outcomes.update([outcome])
    )
    created = await service.create_endpoint("receiver", receiver.url, ["response.completed"])
    receiver.secret = created.secret
    events = await emit(service, 12)
    service.start()

    async def refused_twice() -> bool:
        page = await service.list_deliveries(limit=100)
        return all(d.attempts >= 2 and d.last_error_code for d in page.data)

    await eventually(refused_twice)  # the receiver is down: connections refused, retried
    codes = {d.last_error_code for d in (await service.list_deliveries(limit=100)).data}
    assert codes == {"webhook_connect_failed"}

    def answer(number: int) -> tuple[int, float]:
        if number < 6:
            return 500, 0.0
        if number < 10:
            return 200, 0.6  # past the 300 ms timeout: the bridge gives up and retries
        return 204, 0.0

    receiver.answer = answer
    receiver.start()

    async def all_delivered() -> bool:
        page = await service.list_deliveries(limit=100)
        return len(page.data) == 12 and all(d.status == "delivered" for d in page.data)

    await eventually(all_delivered)
    received = receiver.snapshot()
    assert all(item.verified for item in received), "every request verifies with the SDK"
    bodies: dict[str, set[bytes]] = {}
    for item in received:
        bodies.setdefault(item.webhook_id, set()).add(item.body)
    assert all(len(body) == 1 for body in bodies.values()), "a retry keeps id and body"
    deliveries = {d.id: d for d in (await service.list_deliveries(limit=100)).data}
    assert set(receiver.accepted()) == set(deliveries)  # every event, each id at least once
    assert sorted(e["id"] for e in receiver.accepted().values()) == sorted(events)
    assert len(received) > 12  # the 500s and the slow answers were retried
    assert outcomes["delivered"] == 12 and outcomes["retried"] >= 12 + 6 + 4
    assert all(d.attempts >= 3 and d.last_error_code is None for d in deliveries.values())


async def test_a_delivery_past_its_retry_period_is_failed_and_kept(
    open_service: Open, receiver: Receiver
) -> None:
    receiver.answer = lambda _: (503, 0.0)
    receiver.start()
    outcomes: Counter[str] = Counter()
    service = await open_service(
        fast_settings(receiver.port, retry_period_secs=1),
        observer=lambda outcome: outcomes.update([outcome]),
    )
    await service.create_endpoint("receiver", receiver.url, ["response.failed"])
    await service.emit_response("response.failed", "resp_1")
    service.start()

    async def given_up() -> bool:
        [delivery] = (await service.list_deliveries()).data
        return delivery.status == "failed"

    await eventually(given_up)
    [delivery] = (await service.list_deliveries(status="failed")).data
    assert (delivery.last_status, delivery.last_error_code) == (503, "webhook_http_status")
    assert delivery.attempts >= 3 and outcomes["failed"] == 1
    assert (await service.redeliver(delivery.id)).status == "pending"


async def test_a_name_rebound_to_a_private_address_is_refused_at_delivery(
    open_service: Open,
) -> None:
    """DNS rebinding: public when the endpoint was made, private when it is used."""
    answers = {"hooks.example": ["93.184.216.34"]}

    async def resolver(host: str, port: int) -> Sequence[str]:
        return answers[host]

    service = await open_service(fast_settings(443, targets=TargetPolicy()), resolver=resolver)
    await service.create_endpoint("rebinding", "https://hooks.example/in", ["response.completed"])
    answers["hooks.example"] = ["127.0.0.1"]
    await service.emit_response("response.completed", "resp_1")
    service.start()

    async def refused() -> bool:
        [delivery] = (await service.list_deliveries()).data
        return delivery.last_error_code is not None

    await eventually(refused)
    [delivery] = (await service.list_deliveries()).data
    assert delivery.last_error_code == "webhook_target_private"
    assert delivery.status in ("pending", "delivering")  # retried (maybe right now)
    assert delivery.last_status is None and delivery.completed_at is None


async def test_deleted_endpoints_and_missing_secret_variables(
    open_service: Open, receiver: Receiver
) -> None:
    receiver.start()
    service = await open_service(fast_settings(receiver.port), env={})
    from imagebridge.webhooks.settings import ConfiguredEndpoint

    configured = ConfiguredEndpoint("ops", receiver.url, "OPS_SECRET", ("response.completed",))
    with pytest.raises(Exception, match="not set"):
        await service.sync_configured([configured])
    secret = "whsec_" + "QUJD" * 8
    present = await open_service(fast_settings(receiver.port), env={"OPS_SECRET": secret})
    await present.sync_configured([configured])
    await service.emit_response("response.completed", "resp_1")
    service.start()  # this instance lacks the variable: it cannot sign

    async def attempted() -> bool:
        [delivery] = (await service.list_deliveries()).data
        return delivery.last_error_code is not None

    await eventually(attempted)
    [delivery] = (await service.list_deliveries()).data
    assert delivery.last_error_code == "webhook_secret_missing"
    assert delivery.status in ("pending", "delivering")  # retried (maybe right now)
    assert receiver.snapshot() == []


async def test_stopping_hands_claimed_deliveries_back(
    open_service: Open, receiver: Receiver
) -> None:
    receiver.answer = lambda _: (204, 5.0)  # holds every request
    receiver.start()
    service = await open_service(fast_settings(receiver.port, timeout_ms=4_000))
    await service.create_endpoint("slow", receiver.url, ["response.completed"])
    await service.emit_response("response.completed", "resp_1")
    service.start()

    async def sent() -> bool:
        return len(receiver.arrived) == 1

    await eventually(sent)
    await service.dispatcher.stop(grace_s=0.1)
    [delivery] = (await service.list_deliveries()).data
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert await service.store.delivering("one") == []


def test_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    settings = WebhookSettings(retry_initial_ms=1_000, retry_max_interval_ms=10_000)
    rng = random.Random(7)
    for attempts, ceiling in ((1, 1_000), (2, 2_000), (3, 4_000), (4, 8_000), (9, 10_000)):
        pauses = [backoff_ms(attempts, settings, rng) for _ in range(200)]
        assert ceiling // 2 <= min(pauses) and max(pauses) <= ceiling
        assert len(set(pauses)) > 50  # jitter spreads retries of many deliveries


# -- two instances ----------------------------------------------------------------------------


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
async def open_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Callable[[], Awaitable[WebhookStore]]:
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        schema = request.getfixturevalue("postgres_schema")

        async def postgres() -> WebhookStore:
            return await PostgresWebhookStore.open(url, schema=schema)

        return postgres

    async def sqlite() -> WebhookStore:
        return await SqliteWebhookStore.open(tmp_path / "shared.sqlite3")

    return sqlite


async def test_two_instances_deliver_each_event_from_one_only(
    open_service: Open, open_store: Callable[[], Awaitable[WebhookStore]], receiver: Receiver
) -> None:
    receiver.answer = lambda _: (204, 0.05)
    receiver.start()
    counts: dict[str, Counter[str]] = {"one": Counter(), "two": Counter()}
    # A timeout no attempt reaches: every delivery goes out once, from one instance.
    settings = fast_settings(receiver.port, max_concurrent=3, timeout_ms=10_000, lease_secs=20)
    one = await open_service(
        settings,
        owner="one",
        store=await open_store(),
        observer=lambda outcome: counts["one"].update([outcome]),
    )
    two = await open_service(
        settings,
        owner="two",
        store=await open_store(),
        observer=lambda outcome: counts["two"].update([outcome]),
    )
    created = await one.create_endpoint("shared", receiver.url, ["response.completed"])
    receiver.secret = created.secret
    events = await emit(one, 30)
    one.start()
    two.start()

    async def delivered() -> bool:
        page = await one.list_deliveries(status="delivered", limit=100)
        return len(page.data) == 30

    await eventually(delivered)
    received = receiver.snapshot()
    sent = Counter(item.webhook_id for item in received)
    attempts = {d.id: d.attempts for d in (await one.list_deliveries(limit=100)).data}
    assert set(attempts.values()) == {1}, "each delivery was claimed once"
    assert sent == attempts, "and sent once, by the instance that claimed it"
    assert sorted(e["id"] for e in receiver.accepted().values()) == sorted(events)
    assert all(item.verified for item in received)
    assert counts["one"]["delivered"] + counts["two"]["delivered"] == 30
    assert counts["one"]["delivered"] > 0 and counts["two"]["delivered"] > 0


async def test_configured_endpoints_are_checked_at_start(open_service: Open) -> None:
    """A private target stops the start, naming its field; a name DNS cannot answer now
    is kept (every attempt checks it again)."""
    from imagebridge.contract.errors import BridgeError, ErrorCode
    from imagebridge.webhooks.settings import ConfiguredEndpoint

    async def resolver(host: str, port: int) -> Sequence[str]:
        if host == "inside.example":
            return ["10.0.0.7"]
        raise OSError("no answer")

    env = {"OPS_SECRET": "whsec_" + "QUJD" * 8}
    service = await open_service(
        fast_settings(443, targets=TargetPolicy()), env=env, resolver=resolver
    )
    private = ConfiguredEndpoint("ops", "https://inside.example/h", "OPS_SECRET", ("job.failed",))
    with pytest.raises(BridgeError) as caught:
        await service.sync_configured([private])
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details == {
        "field": "server.webhooks.endpoints.ops.url",
        "reason": "webhook_target_private",
    }
    later = ConfiguredEndpoint("ops", "https://later.example/h", "OPS_SECRET", ("job.failed",))
    await service.sync_configured([later])
    assert (await service.get_endpoint("whcfg_ops")).url == "https://later.example/h"
