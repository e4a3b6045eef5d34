"""Fixtures for the dashboard: real bridges on 127.0.0.1 and Debian's Chromium.

``bridge(*sets, providers=..., env=...)`` starts a module-scoped bridge (the mock-only
configuration plus ``sets``). ``browser`` is one headless Chromium per test module, driven by
Playwright; tests that need it are marked ``browser`` and are skipped, with the reason,
only when ``/usr/bin/chromium`` is absent. ``open_page`` opens the dashboard in a fresh
context and returns a :class:`PageWatch` that records every console error or warning,
uncaught exception, failed request and unexpected HTTP error, so a test can end with
``watch.assert_clean()``. ``axe`` runs @axe-core/playwright (``.cache/axe``, installed by
``scripts/install-test-deps``) on a page as it is, in the same Chromium (axe_check.cjs
attaches over the DevTools protocol). Each module runs in a network namespace of its own
(``own_network``, tests/support/network_namespace.py), so the machine's interface changes do
not reach its Chromium.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.server.conftest import LiveServer, ProviderSpec, start_server
from tests.support.jobs_api import finished_job
from tests.support.network_namespace import NetworkNamespace, own_network_namespace
from tests.support.waiting import STARTUP_S, STATE_S

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 800}
MOBILE = {"width": 390, "height": 844}
REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO_ROOT / "test-output" / "dashboard"
UI_TIMEOUT_MS = 15_000
AXE_PREFIX = REPO_ROOT / ".cache" / "axe"
AXE_VERSION = "4.13.0"
AXE_SCRIPT = Path(__file__).with_name("axe_check.cjs")
AXE_TIMEOUT_S = 120.0

BridgeFactory = Callable[..., LiveServer]


@pytest.fixture(scope="module", autouse=True)
def own_network() -> Iterator[NetworkNamespace]:
    """Each module's bridges and Chromium in a loopback-only network namespace of their own.

    Set up before the module's other fixtures (autouse, module scope), so everything they
    start lives in it: the container tier's docker and podman, changing the machine's
    interfaces in another worker, no longer make Chromium drop the page's requests.
    """
    with own_network_namespace() as namespace:
        yield namespace


@pytest.fixture(autouse=True)
def _ui_timeout() -> None:
    """UI assertions wait for the page's own polling (2.5 s while jobs run)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=UI_TIMEOUT_MS)


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BridgeFactory]:
    root = tmp_path_factory.mktemp("dashboard-bridges")
    started: list[LiveServer] = []

    def factory(
        *sets: str, providers: ProviderSpec | None = None, env: Mapping[str, str] | None = None
    ) -> LiveServer:
        live = start_server(root / f"bridge-{len(started)}", sets, providers=providers, env=env)
        started.append(live)
        return live

    yield factory
    for live in started:
        live.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Chromium:
    browser: Any
    cdp_endpoint: str
    """Where the DevTools protocol answers on 127.0.0.1 (for the accessibility runner)."""


@pytest.fixture(scope="module")
def chromium() -> Iterator[Chromium]:
    """Chromium for one test module, with its DevTools endpoint on loopback.

    Module scope, not session: Playwright's sync API keeps an event loop running in this
    thread while it is open, which would break asyncio tests collected after it.
    """
    if not CHROMIUM.exists():
        pytest.skip(
            "Debian's Chromium (/usr/bin/chromium) is not installed; run scripts/install-test-deps"
        )
    from playwright.sync_api import sync_playwright

    port = _free_port()
    debugging = ["--remote-debugging-address=127.0.0.1", f"--remote-debugging-port={port}"]
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=[*CHROMIUM_ARGS, *debugging]
        )
        try:
            yield Chromium(launched, f"http://127.0.0.1:{port}")
        finally:
            launched.close()


@pytest.fixture(scope="module")
def browser(chromium: Chromium) -> Any:
    return chromium.browser


@dataclass
class PageWatch:
    """Everything that went wrong on a page, minus the answers a test said to expect."""

    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    responses: list[tuple[int, str]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    allowed: list[tuple[int, re.Pattern[str]]] = field(default_factory=list)

    def allow(self, status: int, path_pattern: str) -> None:
        """Expect ``status`` answers for URLs whose path matches ``path_pattern``."""
        self.allowed.append((status, re.compile(path_pattern)))

    def _allowed(self, status: int, url: str) -> bool:
        path = re.sub(r"^https?://[^/]+", "", url)
        return any(code == status and pattern.search(path) for code, pattern in self.allowed)

    def on_response(self, status: int, url: str) -> None:
        if status >= 400 and not self._allowed(status, url):
            self.responses.append((status, url))

    def on_console(self, kind: str, text: str) -> None:
        if kind not in ("error", "warning"):
            return
        # Chromium reports every HTTP error answer as a console error as well.
        match = re.search(r"status of (\d{3})", text)
        if match and "Failed to load resource" in text:
            return  # judged by on_response, which knows the URL
        self.console.append(f"{kind}: {text}")

    def posted_jobs(self) -> int:
        return sum(
            1 for method, url in self.requests if method == "POST" and url.endswith("/v1/jobs")
        )

    def assert_clean(self) -> None:
        assert self.errors == [], f"uncaught page errors: {self.errors}"
        assert self.console == [], f"console errors or warnings: {self.console}"
        assert self.failed == [], f"failed requests: {self.failed}"
        assert self.responses == [], f"unexpected HTTP errors: {self.responses}"


@dataclass
class Dashboard:
    page: Any
    watch: PageWatch
    server: LiveServer

    def screenshot(self, name: str, *, full_page: bool = True) -> Path:
        """Write ``test-output/dashboard/<name>.png`` (the viewport only for modal views)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page, animations="disabled")
        return path

    def no_horizontal_overflow(self) -> bool:
        return bool(self.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))

    def tile(self, prompt: str) -> Any:
        """The gallery tiles of requests whose prompt contains ``prompt``."""
        return self.page.locator(".tile", has=self.page.locator(".tile-prompt", has_text=prompt))

    def open_more(self) -> None:
        """Open the composer's "More settings" panel (every advanced control is inside)."""
        more = self.page.locator("#more")
        if more.get_attribute("open") is None:
            more.locator("summary").click()


# -- accessibility: @axe-core/playwright in the same Chromium -----------------------------


def _axe_version() -> str | None:
    package = AXE_PREFIX / "node_modules" / "@axe-core" / "playwright" / "package.json"
    try:
        return str(json.loads(package.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


class Axe:
    """One ``node axe_check.cjs`` attached to the module's Chromium, answering per page."""

    def __init__(self, endpoint: str) -> None:
        self._process = subprocess.Popen(
            ["node", str(AXE_SCRIPT), str(AXE_PREFIX), endpoint],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self._answer()
        assert ready.get("ready"), ready

    def _answer(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        assert line, "the accessibility runner stopped"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def violations(self, page: Any) -> list[dict[str, Any]]:
        """Every violation axe finds on ``page`` as it is now."""
        marker = f"axe-{uuid.uuid4().hex}"
        page.evaluate("(name) => { window.name = name; }", marker)
        assert self._process.stdin is not None
        self._process.stdin.write(marker + "\n")
        self._process.stdin.flush()
        answer = self._answer()
        assert "error" not in answer, answer.get("error", "")
        found: list[dict[str, Any]] = answer["violations"]
        return found

    def serious(self, page: Any) -> list[str]:
        """The serious and critical violations, one readable line each."""
        return [
            f"{item['impact']}: {item['id']} ({item['help']}) at "
            + "; ".join(f"{node['target']} {node['summary']}" for node in item["nodes"][:4])
            for item in self.violations(page)
            if item["impact"] in ("serious", "critical")
        ]

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@pytest.fixture(scope="module")
def axe(chromium: Chromium) -> Iterator[Axe]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (the accessibility check runs @axe-core/playwright)")
    if _axe_version() != AXE_VERSION:
        pytest.fail(
            f"@axe-core/playwright {AXE_VERSION} is not in .cache/axe "
            "(run scripts/install-test-deps)"
        )
    runner = Axe(chromium.cdp_endpoint)
    yield runner
    runner.close()


OpenPage = Callable[..., Dashboard]


@pytest.fixture(scope="module")
def browser_context(browser: Any) -> Iterator[Any]:
    """One context per module; every test gets its own tab (and so its own
    sessionStorage, the only browser storage the page uses)."""
    context = browser.new_context(viewport=dict(DESKTOP))
    context.set_default_timeout(UI_TIMEOUT_MS)
    yield context
    context.close()


@pytest.fixture(scope="module")
def touch_context(browser: Any) -> Iterator[Any]:
    """A phone-like context: touch input, the 390 × 844 screen."""
    context = browser.new_context(viewport=dict(MOBILE), has_touch=True, is_mobile=True)
    context.set_default_timeout(UI_TIMEOUT_MS)
    yield context
    context.close()


@pytest.fixture
def open_page(browser_context: Any, request: pytest.FixtureRequest) -> Iterator[OpenPage]:
    pages: list[Any] = []

    def opener(
        server: LiveServer,
        *,
        viewport: Mapping[str, int] = DESKTOP,
        allow: tuple[tuple[int, str], ...] = (),
        wait_for_connection: bool = True,
        color_scheme: str = "light",
        touch: bool = False,
    ) -> Dashboard:
        context = request.getfixturevalue("touch_context") if touch else browser_context
        page = context.new_page()
        pages.append(page)
        page.set_viewport_size(dict(MOBILE if touch else viewport))
        page.emulate_media(color_scheme=color_scheme)
        watch = PageWatch()
        for status, pattern in allow:
            watch.allow(status, pattern)
        page.on("console", lambda message: watch.on_console(message.type, message.text))
        page.on("pageerror", lambda error: watch.errors.append(str(error)))
        page.on("requestfailed", lambda request: watch.failed.append(request.url))
        page.on("request", lambda request: watch.requests.append((request.method, request.url)))
        page.on("response", lambda response: watch.on_response(response.status, response.url))
        page.goto(f"{server.url}/dashboard")
        if wait_for_connection:
            # the page has started: a hang guard, long enough for a machine building images
            started = STARTUP_S * 1000
            page.wait_for_selector("#connection[data-state='online']", timeout=started)
            try:
                page.wait_for_selector("#f-provider option", state="attached", timeout=started)
            except PlaywrightTimeoutError:
                raise AssertionError(
                    f"no providers: failed {watch.failed}, console {watch.console}, "
                    f"answers {watch.requests[-20:]}"
                ) from None
            page.wait_for_selector("#provider-note:not(:empty)", timeout=started)
        return Dashboard(page, watch, server)

    yield opener
    for page in pages:
        if not page.is_closed():
            page.close()


# -- helpers shared by the browser tests ---------------------------------------------------


def create_job(server: LiveServer, prompt: str, **parameters: Any) -> str:
    """Submit a small job through the API (as another client would) and return its id."""
    body: dict[str, Any] = {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"size": "16x16", **parameters},
    }
    with server.client() as client:
        response = client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def artifact_bytes(server: LiveServer, artifact_id: str) -> bytes:
    """An artifact's bytes as the API serves them (to compare with what the page saved)."""
    with server.client() as client:
        response = client.get(f"/v1/artifacts/{artifact_id}")
    assert response.status_code == 200, response.text
    return bytes(response.content)


def job(server: LiveServer, job_id: str) -> dict[str, Any]:
    with server.client() as client:
        response = client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def wait_terminal(server: LiveServer, job_id: str, timeout: float = STATE_S) -> dict[str, Any]:
    """Poll the API (bounded) until the job has finished; its last state."""
    with server.client() as client:
        return finished_job(client, job_id, timeout)


def jobs_with_prompt(server: LiveServer, prompt: str) -> list[dict[str, Any]]:
    with server.client() as client:
        response = client.get("/v1/jobs", params={"search": prompt, "visibility": "all"})
    assert response.status_code == 200, response.text
    return [job(server, item["id"]) for item in response.json()["items"]]
