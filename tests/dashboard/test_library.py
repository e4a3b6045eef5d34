"""The library in Chromium: live previews, cancel, favourite/hide/restore, filters, paging."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import (
    BridgeFactory,
    Dashboard,
    OpenPage,
    create_job,
    job,
    wait_terminal,
)
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.browser

PARTIAL_404 = (404, r"^/v1/jobs/[^/]+/partial$")  # a preview can vanish as its job ends


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    return bridge()


def card(dashboard: Dashboard, prompt: str) -> Any:
    return dashboard.page.locator(".card", has_text=prompt)


def test_a_running_job_shows_live_partial_previews(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server, allow=(PARTIAL_404,))
    page = dashboard.page
    prompt = "[mock:latency=5000] a slowly developing photograph"
    page.fill("#f-prompt", prompt)
    page.locator("#group-image > summary").click()
    page.select_option("#f-size", "custom")
    page.fill("#f-size_custom", "64x64")
    page.locator("#group-transparency > summary").click()
    page.fill("#f-partial_images", "3")
    page.locator("#submit-button").click()
    item = card(dashboard, "a slowly developing photograph")
    expect(item).to_have_attribute("data-status", "running")
    expect(item.locator(".thumb img")).to_have_attribute("alt", "Partial preview")
    expect(item.locator(".thumb img")).to_have_attribute("src", re.compile(r"^blob:"))
    expect(item).to_have_class(re.compile(r"\bpreviewing\b"))
    expect(item.locator(".stage")).to_contain_text("preview")
    item.get_by_role("button", name="Details").click()
    preview = page.locator("#job-dialog figure.preview")
    expect(preview).to_be_visible()
    expect(preview.locator("img")).to_have_attribute("src", re.compile(r"^blob:"))
    dashboard.screenshot("desktop-partial-preview", full_page=False)
    page.keyboard.press("Escape")
    expect(item).to_have_attribute("data-status", "succeeded", timeout=20_000)
    expect(item.locator(".thumb img")).not_to_have_attribute("alt", "Partial preview")
    dashboard.watch.assert_clean()


def test_cancelling_a_running_job_asks_first(server: LiveServer, open_page: OpenPage) -> None:
    job_id = create_job(server, "[mock:latency=60000] a job to cancel")
    dashboard = open_page(server)
    page = dashboard.page
    item = card(dashboard, "a job to cancel")
    expect(item).to_have_attribute("data-status", "running")
    item.get_by_role("button", name="Cancel").click()
    confirm = page.locator("#confirm-dialog")
    expect(confirm).to_contain_text("best effort")
    confirm.get_by_role("button", name="Keep").click()
    expect(confirm).to_be_hidden()
    assert job(server, job_id)["cancel_requested"] is False
    item.get_by_role("button", name="Cancel").click()
    confirm.get_by_role("button", name="Cancel job").click()
    expect(item).to_have_attribute("data-status", "cancelled")
    expect(item.get_by_role("button", name="Cancel")).to_be_hidden()
    expect(item.get_by_role("button", name="Hide")).to_be_visible()
    stored = job(server, job_id)
    assert stored["status"] == "cancelled" and stored["cancel_requested"] is True
    dashboard.watch.assert_clean()


def test_favourite_hide_and_restore(server: LiveServer, open_page: OpenPage) -> None:
    prompt = "a keeper of a picture"
    job_id = create_job(server, prompt)
    wait_terminal(server, job_id)
    dashboard = open_page(server)
    page = dashboard.page
    item = card(dashboard, prompt)
    expect(item).to_have_attribute("data-status", "succeeded")
    expect(item.locator(".fav-mark")).to_be_hidden()
    favorite = item.get_by_role("button", name="Favorite", exact=True)
    expect(favorite).to_have_attribute("aria-pressed", "false")
    favorite.click()
    expect(item.locator(".fav-mark")).to_be_visible()
    expect(favorite).to_have_attribute("aria-pressed", "true")
    expect(favorite).to_have_attribute("title", "Remove from favorites")
    assert job(server, job_id)["favorite"] is True

    page.check("#favorites-filter")
    expect(page.locator(".card")).to_have_count(1)
    expect(item).to_be_visible()
    page.uncheck("#favorites-filter")

    item.get_by_role("button", name="Hide").click()
    expect(item).to_have_count(0)
    assert "deleted" in job(server, job_id)
    page.check("#hidden-filter")
    expect(item).to_be_visible()
    expect(item.get_by_role("button", name="Restore")).to_be_visible()
    item.get_by_role("button", name="Restore").click()
    expect(item).to_have_count(0)  # no longer hidden, so not in "Hidden only"
    page.uncheck("#hidden-filter")
    expect(item).to_be_visible()
    assert "deleted" not in job(server, job_id)
    assert job(server, job_id)["favorite"] is True
    dashboard.watch.assert_clean()


def test_search_status_filter_and_load_older(server: LiveServer, open_page: OpenPage) -> None:
    ids = [create_job(server, f"batch-of-many number {index}", size="8x8") for index in range(26)]
    failed = create_job(server, "[mock:fail=upstream] batch-of-many that fails", size="8x8")
    for job_id in [*ids, failed]:
        wait_terminal(server, job_id)
    dashboard = open_page(server)
    page = dashboard.page
    with page.expect_response(lambda response: "search=batch-of-many" in response.url):
        page.fill("#search", "batch-of-many")
    # The newest 24 jobs match anyway: wait for the searched list itself, not the first one.
    expect(page.locator("#job-list")).to_have_attribute("aria-busy", "false")
    expect(page.locator(".card").filter(has_not_text="batch-of-many")).to_have_count(0)
    expect(page.locator(".card")).to_have_count(24)
    expect(page.locator("#library-status")).to_contain_text("older jobs are available")
    page.get_by_role("button", name="Load older").click()
    expect(page.locator(".card")).to_have_count(27)
    expect(page.get_by_role("button", name="Load older")).to_be_hidden()

    page.select_option("#status-filter", "failed")
    expect(page.locator(".card")).to_have_count(1)
    failed_card = page.locator(".card")
    expect(failed_card).to_have_attribute("data-status", "failed")
    expect(failed_card.locator(".stage")).to_contain_text("upstream")
    failed_card.get_by_role("button", name="Details").click()
    error = page.locator("#job-dialog .error-panel")
    expect(error).to_contain_text("upstream")
    expect(error.locator(".suggestions li").first).not_to_be_empty()
    page.keyboard.press("Escape")

    page.select_option("#status-filter", "")
    page.fill("#search", "number 7")
    expect(page.locator(".card .prompt")).to_have_text(["batch-of-many number 7"])
    page.fill("#search", "no prompt looks like this")
    expect(page.locator(".card")).to_have_count(0)
    expect(page.locator("#library-status")).to_have_text("No jobs match these filters yet.")
    searches = [url for method, url in dashboard.watch.requests if "search=" in url]
    assert all("limit=24" in url for url in searches)
    # Typing is debounced: far fewer list calls than keystrokes.
    assert len(searches) < len("batch-of-many") + len("number 7")
    dashboard.watch.assert_clean()


def test_polling_slows_when_idle_and_hurries_back_when_visible(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    page.wait_for_timeout(500)

    def lists() -> int:
        return sum(
            1 for method, url in dashboard.watch.requests if method == "GET" and "/v1/jobs?" in url
        )

    def seconds_until_next_list(limit: float) -> float:
        """How long until the page asks for the list again (bounded by ``limit``)."""
        before = lists()
        started = time.monotonic()
        while lists() == before and time.monotonic() - started < limit:
            page.wait_for_timeout(50)
        return time.monotonic() - started

    def set_hidden(hidden: bool) -> None:
        page.evaluate(
            """(hidden) => {
              Object.defineProperty(document, 'hidden', {configurable: true, get: () => hidden});
              document.dispatchEvent(new Event('visibilitychange'));
            }""",
            hidden,
        )

    idle_start = lists()
    page.wait_for_timeout(2800)
    assert lists() == idle_start  # idle: 15 s between polls, not 2.5 s
    set_hidden(False)
    assert seconds_until_next_list(5.0) < 2.0  # becoming visible polls after 250 ms

    job_id = create_job(server, "[mock:latency=20000] keeps the library busy")
    page.get_by_role("button", name="Refresh").click()
    expect(card(dashboard, "keeps the library busy")).to_have_attribute("data-status", "running")
    assert seconds_until_next_list(8.0) < 5.0  # active: every 2.5 s, not 15 s
    set_hidden(True)
    assert 4.0 <= seconds_until_next_list(9.0) < 7.0  # hidden while active: every 5 s
    set_hidden(False)
    with server.client() as client:
        assert client.delete(f"/v1/jobs/{job_id}").status_code == 200
    assert wait_terminal(server, job_id)["status"] == "cancelled"
    dashboard.watch.assert_clean()
