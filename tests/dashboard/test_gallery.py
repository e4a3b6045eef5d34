"""The gallery in Chromium: live previews, cancel, selection (favourite, hide, restore),
filters, the next pages as the end comes near, and polling."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import (
    BridgeFactory,
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


def test_a_running_job_shows_live_partial_previews(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server, allow=(PARTIAL_404,))
    page = dashboard.page
    prompt = "[mock:latency=5000] a slowly developing photograph"
    page.fill("#f-prompt", prompt)
    page.fill("#f-n", "2")
    page.select_option("#f-size", "custom")
    page.fill("#f-size_custom", "64x64")
    dashboard.open_more()
    page.fill("#f-partial_images", "3")
    page.locator("#submit-button").click()
    # Under the composer: one place per requested image, a preview where one arrived.
    slots = page.locator("#run-images .run-slot")
    expect(slots).to_have_count(2)
    preview = page.locator("#run-images .run-slot[data-state='preview'] img").first
    expect(preview).to_have_attribute("src", re.compile(r"^blob:"))
    expect(page.locator("#run-status")).to_contain_text("preview")
    # In the gallery: the running request is one tile showing its latest preview.
    item = dashboard.tile("a slowly developing photograph")
    expect(item).to_have_attribute("data-status", "running")
    expect(item.locator(".tile-image")).to_have_attribute("alt", "Partial preview")
    expect(item.locator(".tile-image")).to_have_attribute("src", re.compile(r"^blob:"))
    expect(item).to_have_class(re.compile(r"\bpreviewing\b"))
    expect(item.locator(".tile-meta")).to_contain_text("preview")
    dashboard.screenshot("desktop-partial-preview", full_page=False)
    item.locator(".tile-open").click()
    dialog_preview = page.locator("#job-dialog figure.preview")
    expect(dialog_preview).to_be_visible()
    expect(dialog_preview.locator("img")).to_have_attribute("src", re.compile(r"^blob:"))
    page.keyboard.press("Escape")
    expect(slots.locator("xpath=self::*[@data-state='done']")).to_have_count(2, timeout=20_000)
    expect(item).to_have_count(2)  # the two images, each a tile
    for index in range(2):
        image = item.nth(index).locator(".tile-image")
        expect(image).to_have_attribute("src", re.compile(r"^blob:"))
        expect(image).not_to_have_attribute("alt", "Partial preview")
        expect(item.nth(index)).to_have_attribute("data-status", "succeeded")
    dashboard.watch.assert_clean()


def test_cancelling_a_running_job_asks_first(server: LiveServer, open_page: OpenPage) -> None:
    job_id = create_job(server, "[mock:latency=60000] a job to cancel")
    dashboard = open_page(server)
    page = dashboard.page
    item = dashboard.tile("a job to cancel")
    expect(item).to_have_attribute("data-status", "running")
    item.get_by_role("button", name="Cancel", exact=True).click()
    confirm = page.locator("#confirm-dialog")
    expect(confirm).to_contain_text("best effort")
    confirm.get_by_role("button", name="Keep").click()
    expect(confirm).to_be_hidden()
    assert job(server, job_id)["cancel_requested"] is False
    item.get_by_role("button", name="Cancel", exact=True).click()
    confirm.get_by_role("button", name="Cancel job").click()
    expect(item).to_have_attribute("data-status", "cancelled")
    expect(item.get_by_role("button", name="Cancel", exact=True)).to_be_hidden()
    expect(item.locator(".tile-placeholder")).to_have_text("Cancelled")
    stored = job(server, job_id)
    assert stored["status"] == "cancelled" and stored["cancel_requested"] is True
    dashboard.watch.assert_clean()


def select(item: Any) -> None:
    item.locator(".tile-check input").click()


def test_favourite_hide_and_restore(server: LiveServer, open_page: OpenPage) -> None:
    prompt = "a keeper of a picture"
    job_id = create_job(server, prompt, n=2)
    wait_terminal(server, job_id)
    dashboard = open_page(server)
    page = dashboard.page
    item = dashboard.tile(prompt)
    expect(item).to_have_count(2)
    expect(item.locator(".tile-fav")).to_have_count(2)
    expect(item.locator(".tile-fav").first).to_be_hidden()
    bar = page.locator("#selection-bar")
    expect(bar).to_be_hidden()
    select(item.first)
    expect(bar).to_be_visible()
    expect(page.locator("#selection-count")).to_have_text("1 item selected")
    expect(item.first).to_have_class(re.compile(r"\bselected\b"))
    favorite = bar.get_by_role("button", name="Favorite")
    expect(favorite).to_have_attribute("aria-pressed", "false")
    favorite.click()
    # Favourite belongs to the request: both of its images show the star.
    expect(item.locator(".tile-fav").nth(0)).to_be_visible()
    expect(item.locator(".tile-fav").nth(1)).to_be_visible()
    expect(favorite).to_have_attribute("aria-pressed", "true")
    assert job(server, job_id)["favorite"] is True
    bar.get_by_role("button", name="Clear selection").click()
    expect(bar).to_be_hidden()

    page.check("#favorites-filter")
    expect(page.locator(".tile")).to_have_count(2)
    expect(item.first).to_be_visible()
    page.uncheck("#favorites-filter")

    select(item.nth(1))
    bar.get_by_role("button", name="Hide").click()
    expect(item).to_have_count(0)
    expect(bar).to_be_hidden()
    assert "deleted" in job(server, job_id)
    page.check("#hidden-filter")
    expect(item).to_have_count(2)
    select(item.first)
    expect(bar.get_by_role("button", name="Restore")).to_be_visible()
    bar.get_by_role("button", name="Restore").click()
    expect(item).to_have_count(0)  # no longer hidden, so not in "Hidden only"
    page.uncheck("#hidden-filter")
    expect(item).to_have_count(2)
    assert "deleted" not in job(server, job_id)
    assert job(server, job_id)["favorite"] is True
    dashboard.watch.assert_clean()


def test_search_status_filter_and_the_next_pages(server: LiveServer, open_page: OpenPage) -> None:
    ids = [
        create_job(server, f"batch-of-many number {index}", size="8x8", n=3) for index in range(26)
    ]
    failed = create_job(server, "[mock:fail=upstream] batch-of-many that fails", size="8x8")
    for job_id in [*ids, failed]:
        wait_terminal(server, job_id)
    dashboard = open_page(server)
    page = dashboard.page
    with page.expect_response(lambda response: "search=batch-of-many" in response.url):
        page.fill("#search", "batch-of-many")
    # The newest 32 images match anyway: wait for the searched page itself, not the first one.
    expect(page.locator("#gallery-grid")).to_have_attribute("aria-busy", "false")
    tiles = page.locator(".tile")
    expect(tiles.filter(has_not_text="batch-of-many")).to_have_count(0)
    expect(tiles).to_have_count(32)  # the first page: 46 images and a failure wait beyond it
    expect(page.locator("#gallery-status")).to_contain_text("scroll for older ones")
    page.locator("#gallery-sentinel").scroll_into_view_if_needed()
    expect(tiles).to_have_count(79)  # the next page came as the end came near
    expect(page.get_by_role("button", name="Load more")).to_be_hidden()
    expect(page.locator("#gallery-status")).to_have_text("78 images from 27 requests.")

    page.select_option("#status-filter", "failed")
    expect(tiles).to_have_count(1)
    failed_tile = page.locator(".tile")
    expect(failed_tile).to_have_attribute("data-status", "failed")
    expect(failed_tile.locator(".tile-meta")).to_contain_text("upstream")
    failed_tile.locator(".tile-open").click()
    error = page.locator("#job-dialog .error-panel")
    expect(error).to_contain_text("upstream")
    expect(error.locator(".suggestions li").first).not_to_be_empty()
    page.keyboard.press("Escape")

    page.select_option("#status-filter", "")
    page.fill("#search", "number 7")
    expect(page.locator(".tile .tile-prompt")).to_have_text(["batch-of-many number 7"] * 3)
    page.fill("#search", "no prompt looks like this")
    expect(tiles).to_have_count(0)
    expect(page.locator("#gallery-status")).to_have_text("Nothing matches these filters yet.")
    searches = [url for method, url in dashboard.watch.requests if "search=" in url]
    firsts = [url for url in searches if "cursor=" not in url]
    assert firsts and all("limit=32" in url for url in firsts)  # the first page is 32
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
            1
            for method, url in dashboard.watch.requests
            if method == "GET" and "/v1/gallery?" in url
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
    expect(dashboard.tile("keeps the library busy")).to_have_attribute("data-status", "running")
    assert seconds_until_next_list(8.0) < 5.0  # active: every 2.5 s, not 15 s
    set_hidden(True)
    assert 4.0 <= seconds_until_next_list(9.0) < 7.0  # hidden while active: every 5 s
    set_hidden(False)
    with server.client() as client:
        assert client.delete(f"/v1/jobs/{job_id}").status_code == 200
    assert wait_terminal(server, job_id)["status"] == "cancelled"
    dashboard.watch.assert_clean()


RELEASE_WHILE_LOADING = """async () => {
  const { grid } = await import('/dashboard/grid.js');
  const tile = [...grid.tiles.values()].find((item) => item.state === 'loaded');
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 512;
  const bytes = await new Promise((resolve) => canvas.toBlob(resolve, 'image/png'));
  const revoked = [];
  const revoke = URL.revokeObjectURL;
  URL.revokeObjectURL = (url) => { revoked.push(url); revoke.call(URL, url); };
  try {
    const url = URL.createObjectURL(bytes);
    grid.setImage(tile, url, 'arriving');
    grid.releaseThumb(tile);  // scrolled far away before the image read its bytes
    const early = revoked.includes(url);
    const deadline = performance.now() + 10000;
    while (!revoked.includes(url) && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return {
      early, later: revoked.includes(url), src: tile.image.getAttribute('src'),
      hidden: tile.image.hidden, state: tile.state,
    };
  } finally {
    URL.revokeObjectURL = revoke;
  }
}"""


def test_a_thumbnail_given_back_while_arriving_finishes_reading_first(
    server: LiveServer, open_page: OpenPage
) -> None:
    wait_terminal(server, create_job(server, "a tide pool at dusk"))
    dashboard = open_page(server)
    first = dashboard.tile("a tide pool at dusk").locator(".tile-image")
    expect(first).to_have_attribute("src", re.compile(r"^blob:"))
    outcome = dashboard.page.evaluate(RELEASE_WHILE_LOADING)
    # The URL goes only once the image has read it: no failed request, nothing kept.
    assert outcome == {
        "early": False,
        "later": True,
        "src": None,
        "hidden": True,
        "state": "idle",
    }
    dashboard.watch.assert_clean()
