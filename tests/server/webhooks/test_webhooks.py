"""Signed webhooks over HTTP (docs/webhooks.md): the admin API through the ``openai`` SDK,
job events verified by a receiver with ``client.webhooks.unwrap``, refused targets, keys.

The receiver (tests/support/webhook_receiver.py) listens on 127.0.0.1, so these servers
allow private networks and its port; the refusal tests run with the default rules under
the network guard.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from imagebridge.config import load_config
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.webhooks import BridgeWebhookEvent
from imagebridge.server import ServerOptions, create_app
from tests.server.conftest import LiveServer, ServeFactory
from tests.support.network_guard import no_external_network
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Receiver

__all__ = ["no_external_network"]  # the guard fixture, for the refusal tests

ADMIN = "admin-token-SECRET-1"
KEYS_ON = ("server.keys.enabled=true", 'server.bearer_token_env="BRIDGE_ADMIN"')
JOB_EVENTS = ["job.succeeded", "job.failed", "job.cancelled", "job.interrupted"]


def webhook_sets(receiver: Receiver, *extra: str) -> tuple[str, ...]:
    return (
        "server.webhooks.enabled=true",
        "server.webhooks.allow_private_networks=true",
        f"server.webhooks.allowed_ports=[{receiver.port}]",
        "server.webhooks.timeout_ms=1000",
        "server.webhooks.lease_secs=10",
        "server.webhooks.retry_initial_ms=50",
        "server.webhooks.retry_max_interval_ms=250",
        "server.webhooks.poll_interval_ms=20",
        *extra,
    )


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.stop()


def sdk(server: LiveServer, token: str = "unused") -> openai.OpenAI:  # noqa: S107
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=token, max_retries=0)


def submit(client: httpx.Client, prompt: str) -> str:
    response = client.post(
        "/v1/jobs",
        json={"operation": "generate", "prompt": prompt, "parameters": {"size": "16x16"}},
    )
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def deliveries(client: httpx.Client, **query: str) -> list[dict[str, Any]]:
    response = client.get("/v1/webhook_deliveries", params={"limit": "100", **query})
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


# -- the admin API --------------------------------------------------------------------------


def test_the_openai_sdk_manages_endpoints(serve: ServeFactory, receiver: Receiver) -> None:
    receiver.start()
    server = serve(*webhook_sets(receiver))
    client = sdk(server)
    created = client.webhooks.create(
        name="ci", url=receiver.url, event_types=["job.succeeded", "response.completed"]
    )
    assert created.signing_secret.startswith("whsec_") and created.object == "webhook_endpoint"
    assert created.signing_secret_hint == "whsec_…" + created.signing_secret[-4:]
    fetched = client.webhooks.retrieve(created.id)
    assert fetched.url == receiver.url and not hasattr(fetched, "signing_secret")
    assert [e.id for e in client.webhooks.list()] == [created.id]
    updated = client.webhooks.update(created.id, name="renamed", event_types=["job.failed"])
    assert (updated.name, updated.event_types) == ("renamed", ["job.failed"])
    assert client.webhooks.event_types.list().data[:2] == ["job.succeeded", "job.failed"]

    receiver.secret = created.signing_secret
    result = client.webhooks.test(created.id, event_type="response.completed")
    assert (result.status_code, result.success, result.webhook_endpoint_id) == (
        204,
        True,
        created.id,
    )
    [sample] = receiver.snapshot()
    assert sample.verified and sample.event is not None
    assert sample.event["type"] == "response.completed"

    rotated = client.webhooks.rotate_secret(created.id, keep_old_secret_active_for_24_hours=True)
    assert rotated.signing_secret != created.signing_secret
    client.webhooks.test(created.id, event_type="job.failed")
    both = receiver.snapshot()[-1]
    assert both.verified  # still the old secret ...
    receiver.secret = rotated.signing_secret
    assert receiver._check(both.headers, both.body, 204).verified  # ... and the new one

    assert client.webhooks.delete(created.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.webhooks.retrieve(created.id)
    with httpx.Client(base_url=server.url) as plain:
        missing = plain.get("/v1/webhook_deliveries/wh_nothing")
        assert missing.status_code == 404
        bad = plain.get("/v1/webhook_deliveries", params={"status": "lost"})
        assert bad.status_code == 422


def test_webhook_routes_exist_only_when_enabled(serve: ServeFactory) -> None:
    server = serve()
    with server.client() as client:
        assert client.get("/v1/webhook_endpoints").status_code == 404


# -- events to a receiver ---------------------------------------------------------------------


def test_a_receiver_gets_every_job_event_once_per_id_while_down_failing_and_slow(
    serve: ServeFactory, receiver: Receiver
) -> None:
    server = serve(*webhook_sets(receiver))
    created = sdk(server).webhooks.create(name="jobs", url=receiver.url, event_types=JOB_EVENTS)
    receiver.secret = created.signing_secret
    with server.client() as client:
        jobs = {submit(client, f"fox {n}") for n in range(4)}
        jobs.add(submit(client, "[mock:fail=upstream] broken fox"))
        assert wait_until(lambda: len(deliveries(client)) == 5)
        # the receiver is down: each delivery is refused, then tried again
        assert wait_until(lambda: all(d["attempts"] >= 2 for d in deliveries(client)))

        def answer(number: int) -> tuple[int, float]:
            if number < 4:
                return 500, 0.0
            if number < 7:
                return 200, 1.5  # slower than timeout_ms: the bridge gives up and retries
            return 204, 0.0

        receiver.answer = answer
        receiver.start()
        assert wait_until(lambda: all(d["status"] == "delivered" for d in deliveries(client)))
        listed = deliveries(client)

    received = receiver.snapshot()
    assert all(item.verified for item in received), "client.webhooks.unwrap accepts every one"
    accepted = receiver.accepted()
    assert set(accepted) == {d["id"] for d in listed}  # every delivery, by its webhook-id
    events = {event["data"]["id"]: event for event in accepted.values()}
    assert set(events) == jobs  # every job's event: none lost, none invented
    assert {e["type"] for e in events.values()} == {"job.succeeded", "job.failed"}
    failed = next(e for e in events.values() if e["type"] == "job.failed")
    assert failed["data"] == {
        "id": failed["data"]["id"],
        "status": "failed",
        "error_code": "upstream",
    }
    for event in events.values():
        BridgeWebhookEvent.model_validate(event, strict=True)
    for item in received:  # a retry repeats id and body exactly
        assert item.body == next(x.body for x in received if x.webhook_id == item.webhook_id)
    assert len(received) > len(accepted)
    assert all(d["attempts"] >= 3 and d["last_response_status"] in (200, 204) for d in listed)


def test_metrics_count_deliveries_and_the_backlog(serve: ServeFactory, receiver: Receiver) -> None:
    receiver.start()
    server = serve(*webhook_sets(receiver), "server.metrics.enabled=true")
    sdk(server).webhooks.create(name="m", url=receiver.url, event_types=JOB_EVENTS)
    with server.client() as client:
        submit(client, "a counted fox")
        assert wait_until(lambda: [d["status"] for d in deliveries(client)] == ["delivered"])
        delivered = 'imagegen_bridge_webhook_deliveries_total{outcome="delivered"} 1.0'
        assert wait_until(lambda: delivered in client.get("/metrics").text)
        assert wait_until(
            lambda: "imagegen_bridge_webhook_backlog 0.0" in client.get("/metrics").text
        )
        text = client.get("/metrics").text
    assert 'imagegen_bridge_webhook_deliveries_total{outcome="failed"} 0.0' in text
    assert "imagegen_bridge_webhook_oldest_pending_age_seconds 0.0" in text


# -- keys -------------------------------------------------------------------------------------


def test_admin_only_with_keys_and_a_keys_endpoint_gets_only_its_jobs(
    serve: ServeFactory, receiver: Receiver
) -> None:
    receiver.start()
    other = Receiver().start()
    try:
        sets = webhook_sets(receiver, *KEYS_ON)
        sets = (
            *sets[:2],
            f"server.webhooks.allowed_ports=[{receiver.port}, {other.port}]",
            *sets[3:],
        )
        server = serve(*sets, env={"BRIDGE_ADMIN": ADMIN})
        admin = sdk(server, ADMIN)
        with server.client(headers={"authorization": f"Bearer {ADMIN}"}) as boss:
            secrets = {}
            for name in ("ann", "bob"):
                issued = boss.post("/v1/keys", json={"name": name}).json()
                secrets[name] = issued["secret"]
        with pytest.raises(openai.PermissionDeniedError):
            sdk(server, secrets["ann"]).webhooks.list()
        own = admin.webhooks.create(
            name="ann's", url=receiver.url, event_types=JOB_EVENTS, extra_body={"key_id": "ann"}
        )
        assert own.key_id is not None and own.key_id.startswith("key_")
        everything = admin.webhooks.create(name="all", url=other.url, event_types=JOB_EVENTS)
        assert everything.key_id is None
        jobs = {}
        for name, secret in secrets.items():
            with server.client(headers={"authorization": f"Bearer {secret}"}) as client:
                jobs[name] = submit(client, f"{name}'s fox")
        assert wait_until(lambda: len(other.accepted()) == 2)
        assert wait_until(lambda: len(receiver.accepted()) == 1)
        time.sleep(0.3)  # nothing more arrives for ann's endpoint
        [event] = receiver.accepted().values()
        assert event["data"]["id"] == jobs["ann"]
        assert {e["data"]["id"] for e in other.accepted().values()} == set(jobs.values())
        with pytest.raises(openai.UnprocessableEntityError):
            admin.webhooks.create(
                name="x", url=receiver.url, event_types=JOB_EVENTS, extra_body={"key_id": "zed"}
            )
    finally:
        other.stop()


# -- refused targets --------------------------------------------------------------------------


@pytest.mark.usefixtures("no_external_network")
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/hook", "webhook_target_private"),
        ("http://169.254.169.254/latest/meta-data/", "webhook_target_private"),
        ("http://[::ffff:10.0.0.1]/hook", "webhook_target_private"),
        ("https://[fd00::1]/hook", "webhook_target_private"),
        ("https://93.184.216.34:8443/hook", "webhook_target_port"),
        ("gopher://93.184.216.34/hook", "webhook_target_invalid"),
    ],
)
def test_refused_targets_answer_a_stable_code(serve: ServeFactory, url: str, reason: str) -> None:
    server = serve("server.webhooks.enabled=true")
    with server.client() as client:
        response = client.post(
            "/v1/webhook_endpoints", json={"name": "x", "url": url, "event_types": JOB_EVENTS}
        )
        listed = client.get("/v1/webhook_endpoints").json()["data"]
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["imagegen_bridge"]["details"] == {
        "field": "url",
        "reason": reason,
        **({"port": 8443} if reason == "webhook_target_port" else {}),
    }
    assert url not in response.text and listed == []


@pytest.mark.usefixtures("no_external_network")
async def test_a_configured_private_target_stops_the_start_naming_its_field(
    tmp_path: Path,
) -> None:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path), "OPS_SECRET": "whsec_" + "QUJD" * 8}
    loaded = load_config(
        env=env,
        sets=[
            'default_provider="mock"',
            "providers.codex_responses.enabled=false",
            "providers.codex_app_server.enabled=false",
            "server.webhooks.enabled=true",
            'server.webhooks.endpoints.ops.url="http://10.1.2.3/hook"',
            'server.webhooks.endpoints.ops.secret_env="OPS_SECRET"',
        ],
        cwd=tmp_path,
    )
    app = create_app(loaded.config, options=ServerOptions(env=env))
    with pytest.raises(BridgeError) as caught:
        async with app.router.lifespan_context(app):
            pass
    error = caught.value
    assert error.code is ErrorCode.CONFIGURATION
    assert error.details == {
        "field": "server.webhooks.endpoints.ops.url",
        "reason": "webhook_target_private",
    }


def test_configured_endpoints_are_listed_read_only_and_deliver(
    serve: ServeFactory, receiver: Receiver
) -> None:
    receiver.start()
    secret = "whsec_" + "QUJD" * 8
    receiver.secret = secret
    server = serve(
        *webhook_sets(receiver),
        f'server.webhooks.endpoints.ops.url="{receiver.url}"',
        'server.webhooks.endpoints.ops.secret_env="OPS_SECRET"',
        'server.webhooks.endpoints.ops.events=["job.cancelled"]',
        env={"OPS_SECRET": secret},
    )
    client = sdk(server)
    [endpoint] = client.webhooks.list()
    assert (endpoint.id, endpoint.source, endpoint.signing_secret_hint) == (
        "whcfg_ops",
        "config",
        None,
    )
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client.webhooks.update("whcfg_ops", name="mine")
    assert (
        json.loads(refused.value.response.text)["error"]["imagegen_bridge"]["details"]["reason"]
        == "configured_endpoint"
    )
    with server.client() as http:
        job = submit(http, "[mock:latency=20000] a slow fox")
        assert http.delete(f"/v1/jobs/{job}").status_code == 200
    assert wait_until(lambda: len(receiver.accepted()) == 1)
    [event] = receiver.accepted().values()
    assert (event["type"], event["data"]["id"]) == ("job.cancelled", job)
    assert all(item.verified for item in receiver.snapshot())


def test_the_openapi_document_declares_the_webhook_routes(serve: ServeFactory) -> None:
    from jsonschema import Draft202012Validator

    server = serve("server.webhooks.enabled=true")
    with server.client() as client:
        document: dict[str, Any] = client.get("/v1/openapi.json").json()
    paths = document["paths"]
    assert set(paths["/v1/webhook_endpoints"]) == {"get", "post"}
    assert set(paths["/v1/webhook_endpoints/{id}"]) == {"get", "post", "delete"}
    for path in ("/v1/webhook_deliveries", "/v1/webhook_endpoints/{id}/test"):
        assert path in paths
    create = paths["/v1/webhook_endpoints"]["post"]["requestBody"]["content"]
    Draft202012Validator.check_schema(create["application/json"]["schema"])
    listed = {p["name"] for p in paths["/v1/webhook_deliveries"]["get"]["parameters"]}
    assert listed == {"after", "limit", "endpoint_id", "status", "event_type", "event_id"}
