"""The System dialog in Chromium: operator summary, capability matrix, session inspector."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import BridgeFactory, OpenPage, wait_terminal
from tests.server.conftest import LiveServer
from tests.server.doubles import with_mock
from tests.support.fakes import FakeProvider

pytestmark = pytest.mark.browser

SESSION_KEY = "dashboard-session"


class QuotaProvider(FakeProvider):
    """A provider that reports usage windows through the optional diagnostics hook."""

    async def diagnostics(self) -> dict[str, Any]:
        return {
            "provider": self.name,
            "quota": {
                "status": "available",
                "plan_type": "plus",
                "windows": [
                    {"name": "primary", "used_percent": 42.5, "window_minutes": 300},
                    {"name": "secondary", "used_percent": 7.0, "window_minutes": 10080},
                ],
            },
            "accounts": {
                "pool": True,
                "policy": "quota",
                "ready": 1,
                "accounts": [
                    {"name": "work", "login": "own", "login_id": "sha256:0123456789ab",
                     "ready": True, "in_flight": 1, "calls_24h": 7, "failures_24h": 1,
                     "breaker": {"state": "closed"},
                     "quota": {"image_remaining_percent": 64.0, "image_windows": [
                         {"name": "image_gen.primary", "label": "1d",
                          "resets_at": 1_900_000_000}]}},
                    {"name": "personal", "login": "codex_home", "ready": False,
                     "reason": "quota_exhausted", "ready_at": 1_900_000_000,
                     "breaker": {"state": "closed"}, "quota": None},
                ],
            },
        }  # fmt: skip


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    live = bridge(providers=with_mock(QuotaProvider("ready")))
    body = {
        "operation": "generate",
        "prompt": "a persistent conversation",
        "parameters": {"size": "8x8"},
        "routing": {"provider": "mock"},
        "session": {"mode": "persistent", "key": SESSION_KEY},
    }
    with live.client() as client:
        created = client.post("/v1/jobs", json=body)
    assert created.status_code == 202, created.text
    assert wait_terminal(live, created.json()["id"])["status"] == "succeeded"
    return live


def test_the_operator_view_summarizes_the_bridge(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    page.get_by_role("button", name="System").click()
    dialog = page.locator("#system-dialog")
    summary = dialog.locator("#sys-summary")
    expect(summary).to_contain_text("Providers ready")
    expect(summary).to_contain_text("2/2")
    expect(summary).to_contain_text(f"port {server.port}")
    expect(summary.locator("dd").first).not_to_be_empty()
    expect(summary.locator("dt:text-is('Retained jobs') + dd")).to_have_text("1")
    expect(summary.locator("dt:text-is('Active workers') + dd")).to_have_text("0 of 4")
    counts = summary.locator("table", has_text="Interrupted")
    expect(counts.locator("thead th")).to_have_text(
        ["Queued", "Running", "Succeeded", "Failed", "Cancelled", "Interrupted", "Hidden"]
    )
    expect(counts.locator("tbody td")).to_have_text(["0", "0", "1", "0", "0", "0", "0"])
    expect(summary).to_contain_text("Queues and circuit breakers")
    expect(summary.locator("td", has_text="closed").first).to_be_visible()

    matrix = dialog.locator("#sys-matrix tbody tr")
    expect(matrix).to_have_count(2)
    mock_row = matrix.filter(has_text="mock-image-1")
    expect(mock_row).to_contain_text("fan-out")
    expect(mock_row).to_contain_text("png, jpeg, webp")
    expect(mock_row).to_contain_text("persistent, threads")
    ready_row = matrix.filter(has_text="test-image")
    expect(ready_row).to_contain_text("native")
    expect(ready_row).to_contain_text("1–2")

    quota = summary.locator("table", has_text="Window")
    expect(quota.locator("tbody tr")).to_have_count(2)
    expect(quota.locator("tbody tr").first).to_contain_text("42.5%")
    expect(quota.locator("tbody tr").first).to_contain_text("300 min")

    accounts = summary.locator("table", has_text="Image quota left").locator("tbody tr")
    expect(accounts).to_have_count(2)
    expect(accounts.first).to_contain_text("sha256:0123456789ab")
    expect(accounts.first).to_contain_text("64%")
    expect(accounts.nth(1)).to_contain_text("quota_exhausted until")

    events = dialog.locator("#sys-events")
    expect(events).to_contain_text("/v1/jobs")
    assert "a persistent conversation" not in events.inner_text()

    config = dialog.locator("#sys-config")
    expect(config.locator("tbody tr", has_text="default_provider")).to_contain_text("override")
    rows_without_defaults = config.locator("tbody tr").count()
    page.check("#sys-config-defaults")
    expect(config.locator("tbody tr", has_text="server.bind")).to_contain_text("default")
    assert config.locator("tbody tr").count() > rows_without_defaults
    dashboard.watch.assert_clean()


def test_the_session_inspector_looks_up_and_deletes_a_binding(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server, allow=((404, r"^/v1/sessions/"), (400, r"^/v1/sessions/")))
    page = dashboard.page
    page.get_by_role("button", name="System").click()
    result = page.locator("#session-result")
    page.fill("#session-key", SESSION_KEY)
    page.select_option("#session-provider", "mock")
    page.get_by_role("button", name="Look up").click()
    expect(result).to_contain_text("mock-thread-")
    expect(result).to_contain_text("Reused")

    page.select_option("#session-provider", "ready")
    page.get_by_role("button", name="Look up").click()
    expect(result).to_contain_text("does not expose persistent sessions")
    page.select_option("#session-provider", "mock")
    page.get_by_role("button", name="Look up").click()
    result.get_by_role("button", name="Delete binding").click()
    confirm = page.locator("#confirm-dialog")
    expect(confirm).to_contain_text("The upstream thread itself is kept.")
    confirm.get_by_role("button", name="Delete binding").click()
    expect(result).to_contain_text(f"The binding for {SESSION_KEY} was deleted.")
    with server.client() as client:
        gone = client.get(f"/v1/sessions/{SESSION_KEY}", params={"provider": "mock"})
    assert gone.status_code == 404
    page.get_by_role("button", name="Look up").click()
    expect(result).to_contain_text(f"No persistent session is bound to {SESSION_KEY}.")
    dashboard.watch.assert_clean()
