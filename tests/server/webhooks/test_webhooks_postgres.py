"""Two bridge servers on one PostgreSQL database deliver each webhook from one of them.

Both run in shared mode with webhooks on; jobs are submitted to either, their events land
in the one outbox, and the receiver (127.0.0.1, verifying with the ``openai`` SDK) gets each
delivery exactly once — a healthy receiver and a generous timeout leave no reason for a
retry, so a second request could only come from a second instance claiming it too. Both
instances take part (each one's metrics count its deliveries).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.server.conftest import ServeFactory
from tests.support.postgres import PostgresServer
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Receiver

pytestmark = pytest.mark.postgres
PASSWORD_ENV = "TEST_WEBHOOKS_PG_PASSWORD"

_DELIVERED = re.compile(r'imagegen_bridge_webhook_deliveries_total\{outcome="delivered"\} (\d+)')


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver(answer=lambda _: (204, 0.1))
    made.start()
    yield made
    made.stop()


def delivered_here(client: httpx.Client) -> int:
    match = _DELIVERED.search(client.get("/metrics").text)
    assert match is not None
    return int(match.group(1))


def test_two_servers_deliver_each_event_from_one_of_them(
    serve: ServeFactory,
    postgres_server: PostgresServer,
    postgres_schema: str,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    sets = (
        f'server.jobs.database="{postgres_server.bare_url()}"',
        f'server.jobs.postgres_schema="{postgres_schema}"',
        f'server.jobs.postgres_password_env="{PASSWORD_ENV}"',
        "server.jobs.poll_interval_ms=50",
        f'artifacts.root="{tmp_path / "shared-artifacts"}"',
        "server.metrics.enabled=true",
        "server.webhooks.enabled=true",
        "server.webhooks.allow_private_networks=true",
        f"server.webhooks.allowed_ports=[{receiver.port}]",
        "server.webhooks.timeout_ms=10000",
        "server.webhooks.lease_secs=30",
        "server.webhooks.poll_interval_ms=20",
        "server.webhooks.max_concurrent=2",
    )
    env = {PASSWORD_ENV: postgres_server.password}
    one = serve(*sets, 'server.jobs.instance_id="one"', env=env)
    two = serve(*sets, 'server.jobs.instance_id="two"', env=env)
    created = openai.OpenAI(base_url=f"{one.url}/v1", api_key="x").webhooks.create(
        name="shared", url=receiver.url, event_types=["job.succeeded"]
    )
    receiver.secret = created.signing_secret
    jobs: set[str] = set()
    with one.client() as first, two.client() as second:
        assert [e["id"] for e in second.get("/v1/webhook_endpoints").json()["data"]] == [created.id]
        for n in range(16):
            client = first if n % 2 else second
            answer = client.post(
                "/v1/jobs",
                json={
                    "operation": "generate",
                    "prompt": f"fox {n}",
                    "parameters": {"size": "16x16"},
                },
            )
            assert answer.status_code == 202, answer.text
            jobs.add(answer.json()["id"])

        def all_delivered() -> bool:
            page = first.get("/v1/webhook_deliveries", params={"limit": "100"}).json()["data"]
            return len(page) == 16 and all(d["status"] == "delivered" for d in page)

        assert wait_until(all_delivered, timeout=60, interval=0.1)
        listed = first.get("/v1/webhook_deliveries", params={"limit": "100"}).json()["data"]
        counts = (delivered_here(first), delivered_here(second))

    received = receiver.snapshot()
    sent = Counter(item.webhook_id for item in received)
    assert sent == {d["id"]: 1 for d in listed}, "each delivery sent once, by one instance"
    assert {d["attempts"] for d in listed} == {1}
    assert {e["data"]["id"] for e in receiver.accepted().values()} == jobs
    assert all(item.verified for item in received)
    assert sum(counts) == 16 and min(counts) > 0, counts
