"""The dashboard's routes over real HTTP: headers, public access, absence without jobs."""

from __future__ import annotations

import asyncio
import html
import json
import re
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

import httpx
import pytest

from imagebridge.cli.remote import RemoteBridge
from imagebridge.server.dashboard import ASSET_MEDIA_TYPES
from tests.dashboard.conftest import BridgeFactory
from tests.server.conftest import LiveServer

TOKEN = "dashboard-router-token"
CSP = (
    "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
PERMISSIONS = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"
SCRIPTS = ("boot.js",)
"""Classic scripts: index.html loads them before the modules."""
MODULES = (
    "actions.js",
    "api.js",
    "app.js",
    "auth.js",
    "bridge.js",
    "bulk.js",
    "bytes.js",
    "capabilities.js",
    "checks.js",
    "compare.js",
    "composer.js",
    "form.js",
    "gallery.js",
    "grid.js",
    "job_actions.js",
    "job_dialog.js",
    "job_facts.js",
    "lightbox.js",
    "limits.js",
    "mask.js",
    "mask_bitmap.js",
    "presets.js",
    "run.js",
    "selection.js",
    "sources.js",
    "store.js",
    "system.js",
    "team.js",
    "ui.js",
    "views.js",
    "zip.js",
    "zoom.js",
)
STYLESHEETS = ("app.css", "composer.css", "dialogs.css", "gallery.css", "viewer.css")
MAX_MODULE_LINES = 600
"""No module of the page is a grab-bag (issue 38): each has one job and stays under this."""
EXPECTED_TYPES = {
    **dict.fromkeys(STYLESHEETS, "text/css; charset=utf-8"),
    **dict.fromkeys((*SCRIPTS, *MODULES), "text/javascript; charset=utf-8"),
    "icon.png": "image/png",
}


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    return bridge()


@pytest.fixture(scope="module")
def secured(bridge: BridgeFactory) -> LiveServer:
    return bridge('server.bearer_token_env="DASHBOARD_TOKEN"', env={"DASHBOARD_TOKEN": TOKEN})


def _assert_common(response: httpx.Response) -> None:
    assert response.headers["cache-control"] == "no-store, max-age=0"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["cross-origin-resource-policy"] == "same-origin"
    assert "access-control-allow-origin" not in response.headers


@pytest.mark.parametrize("path", ["/dashboard", "/dashboard/"])
def test_the_page_is_html_with_the_strict_headers(server: LiveServer, path: str) -> None:
    with server.client() as client:
        response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    _assert_common(response)
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["permissions-policy"] == PERMISSIONS
    assert "<title>Imagegen Bridge</title>" in response.text
    assert response.headers["x-request-id"]


def test_the_page_carries_this_bridge_s_configured_limits(bridge: BridgeFactory) -> None:
    limited = bridge(
        "runtime.request.max_prompt_bytes=100",
        "runtime.request.max_outputs=3",
        "server.max_body_bytes=9000",
    )
    with limited.client() as client:
        text = client.get("/dashboard").text
    found = re.findall(r'<meta name="imagebridge-limits" content="([^"]*)">', text)
    assert len(found) == 1
    assert json.loads(html.unescape(found[0])) == {
        "prompt_bytes": 100,
        "negative_prompt_bytes": 65_536,
        "identifier_bytes": 256,
        "inputs": 16,
        "outputs": 3,
        "timeout_ms": 1_800_000,
        "body_bytes": 9000,
        "api_keys": 0,
    }


def test_every_asset_is_served_with_its_type_and_the_common_headers(server: LiveServer) -> None:
    assert dict(ASSET_MEDIA_TYPES) == EXPECTED_TYPES
    with server.client() as client:
        for name, media_type in EXPECTED_TYPES.items():
            response = client.get(f"/dashboard/{name}")
            assert response.status_code == 200, name
            assert response.headers["content-type"] == media_type
            _assert_common(response)
            assert response.content, name
    with server.client() as client:
        icon = client.get("/dashboard/icon.png").content
    assert icon.startswith(b"\x89PNG\r\n\x1a\n")


def test_head_answers_the_headers_without_a_body(server: LiveServer) -> None:
    with server.client() as client:
        response = client.head("/dashboard")
    assert response.status_code == 200
    assert response.headers["content-security-policy"] == CSP
    assert response.content == b""


@pytest.mark.parametrize(
    "path",
    ["/dashboard/index.html", "/dashboard/_router.py", "/dashboard/static/app.js", "/dashboardx"],
)
def test_other_names_are_unknown_paths(server: LiveServer, path: str) -> None:
    with server.client() as client:
        response = client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "route was not found"


def test_a_wrong_method_is_refused(server: LiveServer) -> None:
    with server.client() as client:
        response = client.post("/dashboard/app.js", content=b"x")
    assert response.status_code == 405
    assert "GET" in response.headers["allow"]


def test_the_assets_are_public_while_the_api_needs_the_bearer(secured: LiveServer) -> None:
    with secured.client() as client:
        for path in ["/dashboard", *(f"/dashboard/{name}" for name in EXPECTED_TYPES)]:
            assert client.get(path).status_code == 200, path
        assert client.get("/v1/diagnostics").status_code == 401
        authorized = client.get("/v1/diagnostics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert authorized.status_code == 200
    assert authorized.json()["configuration"]["authentication_required"] is True


def test_without_durable_jobs_there_is_no_dashboard(bridge: BridgeFactory) -> None:
    server = bridge("server.jobs.enabled=false")
    with server.client() as client:
        for path in ["/dashboard", "/dashboard/", "/dashboard/app.js", "/dashboard/icon.png"]:
            response = client.get(path)
            assert response.status_code == 404, path
            assert response.json()["error"]["message"] == "route was not found"
        assert client.get("/health/live").status_code == 200


def test_dashboard_requests_are_not_operator_events(server: LiveServer) -> None:
    with server.client() as client:
        before = client.get("/v1/diagnostics").json()["events"]["items"]
        client.get("/dashboard")
        client.get("/dashboard/app.js")
        after = client.get("/v1/diagnostics").json()["events"]["items"]
    assert not any(item["route"].startswith("/dashboard") for item in after)
    assert len(after) == len(before) + 1  # only the first diagnostics call was recorded


def test_the_cli_launcher_recognizes_the_page(server: LiveServer) -> None:
    async def probe() -> bool:
        async with RemoteBridge(server.url) as remote:
            return await remote.dashboard_is_running(5.0)

    # In a thread of its own: a browser test module may hold this thread's event loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(asyncio.run, probe()).result(timeout=30) is True


def _static(name: str) -> str:
    folder = resources.files("imagebridge.server.dashboard").joinpath("static")
    return folder.joinpath(name).read_text(encoding="utf-8")


def test_the_page_loads_only_shipped_assets_and_nothing_inline() -> None:
    html = _static("index.html")
    references = re.findall(r'(?:src|href)="([^"]+)"', html)
    assets = {ref for ref in references if not ref.startswith("#")}
    preloaded = set(re.findall(r'<link rel="modulepreload" href="/dashboard/([^"]+)">', html))
    assert preloaded and preloaded <= set(MODULES)
    loaded = ("icon.png", "app.js", *SCRIPTS, *STYLESHEETS, *preloaded)
    assert assets == {f"/dashboard/{name}" for name in loaded}
    assert re.findall(r"<script\b[^>]*>\s*[^<\s]", html) == []  # no inline script bodies
    assert "<style" not in html and " style=" not in html and "javascript:" not in html
    assert not re.search(r"\son[a-z]+=", html)  # no inline event handlers
    for name in (*SCRIPTS, *MODULES):
        source = _static(name)
        imports = re.findall(r'^import[^;]*from\s+"([^"]+)"', source, flags=re.MULTILINE)
        imports += re.findall(r'\bimport\("([^"]+)"\)', source)
        assert set(imports) <= {f"./{module}" for module in MODULES}, name
        assert "http://" not in source and "https://" not in source, name
        assert "innerHTML" not in source and "eval(" not in source, name
    for name in STYLESHEETS:
        assert "http://" not in _static(name) and "https://" not in _static(name), name
        assert "@import" not in _static(name) and "url(" not in _static(name), name


def test_no_module_of_the_page_is_a_grab_bag() -> None:
    for name in (*SCRIPTS, *MODULES, *STYLESHEETS, "index.html"):
        lines = _static(name).count("\n")
        limit = MAX_MODULE_LINES if name != "index.html" else 2 * MAX_MODULE_LINES
        assert lines <= limit, f"{name} has {lines} lines"


def test_the_modules_import_no_circle() -> None:
    graph = {
        name: set(re.findall(r'^import[^;]*from\s+"\./([^"]+)"', _static(name), flags=re.MULTILINE))
        for name in MODULES
    }
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for child in sorted(graph[name]):
            assert state.get(child) != "open", " -> ".join([*path, name, child])
            if child not in state:
                visit(child, [*path, name])
        state[name] = "done"

    for module in MODULES:
        if module not in state:
            visit(module, [])
