"""``/v1/diagnostics`` (the original's keys only) and ``/v1/diagnostics/extended`` (plus
imagebridge's additions): operator state without secrets, plus provider extras."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from imagebridge.server import ServerOptions
from tests.compat import original_contract
from tests.server.conftest import ServeFactory
from tests.server.doubles import UnreadyProvider, mock_provider
from tests.support.fakes import FakeProvider
from tests.support.waiting import wait_until

TOKEN = "diag-secret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class QuotaProvider(FakeProvider):
    async def diagnostics(self) -> dict[str, Any]:
        return {"quota": {"state": "available", "used_percent": 12}}


class StuckDiagnostics(FakeProvider):
    async def diagnostics(self) -> dict[str, Any]:
        await asyncio.sleep(30)
        return {}


def test_diagnostics_never_contain_secrets(serve: ServeFactory) -> None:
    secrets = {
        "token": TOKEN,
        "prompt": "diag-secret-prompt",
        "idempotency": "diag-secret-idempotency-key",
        "session": "diag-secret-session",
        "user": "diag-secret-user",
        "path": "diag-secret-artifact-dir",
        "auth_path": "/secret/home/.codex/auth.json",
    }
    server = serve(
        'server.bearer_token_env="DIAG_TOKEN"',
        f'artifacts.root="{{data}}/{secrets["path"]}"',
        providers=lambda config: [mock_provider(config), UnreadyProvider("broken")],
        env={"DIAG_TOKEN": TOKEN},
    )
    with server.client(headers=AUTH) as client:
        generated = client.post(
            "/v1/images",
            json={
                "operation": "generate",
                "prompt": secrets["prompt"],
                "user": secrets["user"],
                "parameters": {"size": "8x8"},
                "session": {"mode": "persistent", "key": secrets["session"]},
                "output": {"response_format": "artifact"},
            },
            headers={"Idempotency-Key": secrets["idempotency"]},
        )
        assert generated.status_code == 200, generated.text
        assert client.get(f"/v1/sessions/{secrets['session']}?provider=mock").status_code == 200
        assert wait_until(lambda: server.state.readiness.probed)
        response = client.get("/v1/diagnostics")
        extended = client.get("/v1/diagnostics/extended")
    assert response.status_code == extended.status_code == 200
    for text in (response.text, extended.text):
        for name, secret in secrets.items():
            assert secret not in text, name
    body = response.json()
    broken = next(item for item in body["providers"] if item["provider"] == "broken")
    assert broken["status"] == "not_ready"
    assert broken["error"]["code"] == "authentication"
    assert broken["error"]["details"] == {"retry_after_ms": 5}
    assert {"provider": "mock", "status": "ready"} in body["providers"]
    routes = [item["route"] for item in body["events"]["items"]]
    assert routes[:2] == ["/v1/sessions/{key}", "/v1/images"]
    provenance = {item["field"]: item for item in body["configuration"]["provenance"]}
    assert provenance["server.bearer_token_env"]["source"] == "override"
    assert set(body["runtime"]) == {"global_queued", "providers_queued"}
    assert extended.json()["runtime"]["circuit_breakers"]["mock"]["state"] == "closed"
    assert body["configuration"]["listener_port"] == server.port
    assert body["configuration"]["jobs_enabled"] is True
    assert body["jobs"]["max_running"] == 4
    assert body["jobs"]["total"] == 1  # the synchronous request's record (issue 39)
    assert "shared" not in body["jobs"]
    assert extended.json()["jobs"]["shared"] is False


def test_the_base_document_holds_exactly_the_original_keys(serve: ServeFactory) -> None:
    """The original's SDK decodes ``/v1/diagnostics`` strictly: every object it knows must
    validate against the original's schema (``additionalProperties: false``)."""
    server = serve('default_provider="quota"', providers=[QuotaProvider("quota")])
    with server.client() as client:
        client.get("/v1/providers")
        assert wait_until(lambda: server.state.readiness.probed)
        body = client.get("/v1/diagnostics").json()
        extended = client.get("/v1/diagnostics/extended").json()
    # `events` is emitted by the original and decoded by its SDK, but missing from its
    # OperatorDiagnostics schema (docs/api-decisions.md, quirk 7): checked against its own
    # component.
    original_contract.validate(body.pop("events"), "OperatorEventHistory")
    original_contract.validate(body, "OperatorDiagnostics")
    assert "providers_detail" not in body
    # The extended document is the same snapshot with the additions put back.
    assert extended["providers_detail"] == {
        "quota": {"quota": {"state": "available", "used_percent": 12}}
    }
    assert set(extended["runtime"]) == {*body["runtime"], "circuit_breakers", "size_match"}
    assert set(extended["jobs"]) == {
        *body["jobs"],
        "shared",
        "instance_id",
        "leases",
        "queued_by_provider",
    }


def test_provider_diagnostics_hooks_are_included_and_bounded(serve: ServeFactory) -> None:
    server = serve(
        'default_provider="quota"',
        providers=[QuotaProvider("quota"), StuckDiagnostics("stuck")],
        options=ServerOptions(diagnostics_timeout=0.2),
    )
    with server.client() as client:
        started = time.monotonic()
        assert "providers_detail" not in client.get("/v1/diagnostics").json()
        assert time.monotonic() - started < 5  # the base document never waits for hooks
        body = client.get("/v1/diagnostics/extended").json()
    assert body["providers_detail"]["quota"] == {
        "quota": {"state": "available", "used_percent": 12}
    }
    assert body["providers_detail"]["stuck"] == {"status": "unavailable", "reason": "timeout"}


def test_events_ring_is_bounded_and_counts_drops(serve: ServeFactory) -> None:
    server = serve(options=ServerOptions(event_capacity=3))
    with server.client() as client:
        for _ in range(5):
            client.get("/v1/providers")
        client.get("/health/live")  # never recorded
        client.get("/v1/openapi.json")  # never recorded
        events = client.get("/v1/diagnostics").json()["events"]
    assert events["capacity"] == 3
    assert events["dropped"] == 2
    assert [item["sequence"] for item in events["items"]] == [5, 4, 3]
    assert {item["route"] for item in events["items"]} == {"/v1/providers"}
