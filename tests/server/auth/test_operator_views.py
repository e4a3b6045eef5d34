"""Operator views are the operator's (docs/keys.md, "Operator views").

Every route the app mounts (with keys, metrics and jobs on, so every router is there) has
a decision in :data:`DECISIONS`; a new route without one fails here. The decision must be
the router the route was made with (public, protected, admin), and each route is called
with no credentials, a named key and the admin: an admin route is 401 / 403 / allowed, a
protected one 401 / allowed / allowed, a public one allowed for everyone. A key reading
``/v1/diagnostics`` gets the original's shape with only what concerns it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from imagebridge.server.routes import require_access, require_admin
from tests.compat import original_contract
from tests.server.conftest import LiveServer, ServeFactory
from tests.support.waiting import wait_until

Access = Literal["public", "own", "admin"]
"""``public``: no bearer; ``own``: any key, which sees its own work only; ``admin``: the
admin only (a key gets 403)."""

DECISIONS: dict[str, Access] = {
    "/health/live": "public",
    "/health/ready": "public",
    "/v1/openapi.json": "public",
    "/v1/artifact-links/{id}/{filename}": "public",  # a signed link is its own credential
    "/dashboard": "public",  # the page and its assets; every call it makes is checked
    "/dashboard/": "public",
    "/dashboard/{asset}": "public",
    "/v1/providers": "own",
    "/v1/providers/{provider}/capabilities": "own",
    "/v1/models": "own",
    "/v1/models/{model}": "own",
    "/v1/images": "own",
    "/v1/images/stream": "own",
    "/v1/images/generations": "own",
    "/v1/images/edits": "own",
    "/v1/responses": "own",
    "/v1/responses/{response_id}": "own",  # its own kept responses; another key's id: 404
    "/v1/responses/{response_id}/cancel": "own",
    "/v1/gallery": "own",
    "/v1/sessions/{key}": "own",  # the key's own namespace
    "/v1/jobs": "own",  # its own jobs; ?key= (another key's) is 403 for a key
    "/v1/jobs/{id}": "own",
    "/v1/jobs/{id}/partial": "own",
    "/v1/presets": "own",
    "/v1/presets/{name}": "own",
    "/v1/artifacts/{id}": "own",
    "/v1/artifacts/{id}/thumbnail": "own",
    "/v1/diagnostics": "own",  # the key's view of the original's document (below)
    "/v1/diagnostics/extended": "admin",  # instances, pool accounts, everyone's work
    "/metrics": "admin",  # every key name and pool account
    "/v1/keys": "admin",
    "/v1/keys/{id}": "admin",
    "/v1/keys/{id}/rotate": "admin",
    "/v1/usage": "admin",
}

ADMIN = "operator-admin-token-9d2"
ENV = {"OPERATOR_ADMIN": ADMIN}
ALL_ON = (
    "server.keys.enabled=true",
    'server.bearer_token_env="OPERATOR_ADMIN"',
    "server.metrics.enabled=true",
    "server.jobs.enabled=true",
    "server.keys.auth_failure_limit=100000",  # every route is called without credentials
)
_PARAMETER = re.compile(r"\{[^}]+\}")


def _app(server: LiveServer) -> FastAPI:
    app = server.server.config.app
    assert isinstance(app, FastAPI)
    return app


def _template(path: str) -> str:
    """Dashboard assets are one route each; the table names them once."""
    if path.startswith("/dashboard/") and path != "/dashboard/":
        return "/dashboard/{asset}"
    return path


def _endpoints(routes: Iterable[Any]) -> Iterator[Any]:
    """Every endpoint route, through included routers (FastAPI ≥ 0.165 keeps an included
    router as one entry whose effective routes carry the router's dependencies)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif callable(getattr(route, "effective_route_contexts", None)):
            yield from route.effective_route_contexts()


def _routes(app: FastAPI) -> Iterator[tuple[str, str, Access]]:
    """``(template, method, access)`` of every mounted route, access read from its
    dependencies (the router it was made with)."""
    for route in _endpoints(app.routes):
        calls = {dependency.call for dependency in route.dependant.dependencies}
        access: Access = (
            "admin" if require_admin in calls else "own" if require_access in calls else "public"
        )
        for method in sorted(route.methods):
            yield route.path, method, access


def _new_key(server: LiveServer) -> str:
    with server.client(headers={"authorization": f"Bearer {ADMIN}"}) as client:
        created = client.post("/v1/keys", json={"name": "member", "images_per_day": 10})
    assert created.status_code == 201, created.text
    return str(created.json()["secret"])


@pytest.fixture(scope="module")
def server(serve_module: ServeFactory) -> LiveServer:
    return serve_module(*ALL_ON, env=ENV)


@pytest.fixture(scope="module")
def secret(server: LiveServer) -> str:
    return _new_key(server)


def test_every_route_has_a_decision_and_is_made_by_the_router_that_says_it(
    server: LiveServer,
) -> None:
    mounted = list(_routes(_app(server)))
    templates = {_template(path) for path, _, _ in mounted}
    assert templates - set(DECISIONS) == set(), "a route without an access decision"
    assert set(DECISIONS) - templates == set(), "a decision for a route that is not mounted"
    for path, method, access in mounted:
        assert access == DECISIONS[_template(path)], (method, path)


def _call(client: httpx.Client, method: str, path: str, token: str | None) -> int:
    url = _PARAMETER.sub("x", path)
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    return client.request(method, url, headers=headers).status_code


def test_each_route_answers_no_credentials_a_key_and_the_admin_as_decided(
    server: LiveServer, secret: str
) -> None:
    refused = {401, 403}
    with server.client() as client:
        for path, method, access in _routes(_app(server)):
            nobody = _call(client, method, path, None)
            key = _call(client, method, path, secret)
            admin = _call(client, method, path, ADMIN)
            answers = (method, path, nobody, key, admin)
            if access == "public":  # a bearer changes nothing (a signed link is its own check)
                assert nobody == key == admin, answers
            elif access == "own":
                assert nobody == 401 and key not in refused and admin not in refused, answers
            else:
                assert (nobody, key) == (401, 403) and admin not in refused, answers


def _document(client: httpx.Client, token: str) -> dict[str, Any]:
    response = client.get("/v1/diagnostics", headers={"authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_key_reads_its_own_view_of_the_diagnostics_in_the_original_shape(
    serve: ServeFactory,
) -> None:
    server = serve(*ALL_ON, env=ENV)
    secret = _new_key(server)
    other = {"authorization": f"Bearer {ADMIN}"}
    with server.client() as client:
        # Someone else's work, then the key's own request, on the same instance.
        assert client.get("/v1/presets/someone-elses", headers=other).status_code == 404
        assert client.get("/v1/jobs", headers=other).status_code == 200
        mine = client.get("/v1/providers", headers={"authorization": f"Bearer {secret}"})
        assert mine.status_code == 200
        assert wait_until(lambda: server.state.readiness.probed)
        keys_view = _document(client, secret)
        admins = _document(client, ADMIN)
    for body in (keys_view, admins):  # strict clients decode both
        events = body.pop("events")
        original_contract.validate(events, "OperatorEventHistory")
        original_contract.validate(body, "OperatorDiagnostics")
        body["events"] = events
    # What concerns the key: providers' readiness, queues, the bridge's limits.
    assert keys_view["providers"] == admins["providers"]
    assert keys_view["runtime"] == admins["runtime"]
    assert keys_view["configuration"]["max_body_bytes"] == admins["configuration"]["max_body_bytes"]
    # Not the operator's: where settings came from, the job manager's counts of everyone's
    # jobs, other callers' requests.
    assert admins["configuration"]["provenance"] and admins["jobs"]["max_running"] == 4
    assert keys_view["configuration"]["provenance"] == []
    assert "jobs" not in keys_view
    routes = [item["route"] for item in keys_view["events"]["items"]]
    assert routes == ["/v1/providers"]
    assert keys_view["events"]["dropped"] == 0
    assert "/v1/presets/{name}" in [item["route"] for item in admins["events"]["items"]]
    # The key's answer still carries its quota, as every answer to a key does.
    with server.client(headers={"authorization": f"Bearer {secret}"}) as client:
        answer = client.get("/v1/diagnostics")
    assert answer.headers["x-imagebridge-images-limit-day"] == "10"
