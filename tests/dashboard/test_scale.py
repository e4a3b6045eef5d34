"""The gallery over a history of 2,000 images in Chromium: the first screen in under a
second, and a scroll to the end that fetches pages as it goes and thumbnails only for the
tiles that were near the screen.

The bridge is a process of its own (``python -m imagebridge.server``), as a person runs it,
not a thread of this test process competing with Playwright's client for the interpreter.
Its history is made through the API: the mock provider, 8 requests of 250 images of 8 × 8
pixels, no sidecars, about 5 s on the reference machine (125 requests of 16 took longer, and
writing rows and artifacts behind the bridge's back would test less of it).

The machine is shared (2 cores, several test runs at once, load averages of 10 and more were
common while this was written, when one load took 0.75 to 1.05 s), so the first screen is
timed on up to five fresh loads, stopping at the first under a second; every time is printed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import OpenPage
from tests.support.bridge_server import start_server
from tests.support.jobs_api import finished_job
from tests.support.waiting import STATE_S

pytestmark = pytest.mark.browser

IMAGES = 2000
PER_REQUEST = 250
FIRST_SCREEN_MS = 1000
LOADS = 5
FIRST_PAGE = 32
PAGE_SIZE = 60


@dataclass
class ProcessBridge:
    """What the dashboard fixtures need of a bridge: its URL and a client."""

    url: str

    def client(self, **kwargs: Any) -> httpx.Client:
        kwargs.setdefault("timeout", 120.0)
        return httpx.Client(base_url=self.url, **kwargs)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessBridge]:
    process = start_server(Path(tmp_path_factory.mktemp("scale")), "server.jobs.max_running=8")
    live = ProcessBridge(process.url)
    body: dict[str, Any] = {
        "operation": "generate",
        "parameters": {"size": "8x8", "n": PER_REQUEST},
        "output": {"metadata": "none"},
    }
    try:
        with live.client() as client:
            ids = [
                client.post(
                    "/v1/jobs", json={**body, "prompt": f"a crowd of tiles, part {n}"}
                ).json()["id"]
                for n in range(IMAGES // PER_REQUEST)
            ]
            statuses = {finished_job(client, job_id, 120)["status"] for job_id in ids}
            assert statuses == {"succeeded"}, statuses
        yield live
    finally:
        process.stop()


def thumbnail_requests(dashboard: Any) -> int:
    return sum(
        1 for method, url in dashboard.watch.requests if method == "GET" and "/thumbnail?" in url
    )


FIRST_SCREEN = """() => {
  const tiles = [...document.querySelectorAll('#gallery-grid .tile')];
  const shown = tiles.filter((tile) => {
    const box = tile.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight
      && box.right > 0 && box.left < window.innerWidth;
  });
  const done = shown.length > 0 && shown.every((tile) => {
    const img = tile.querySelector('.tile-image');
    return !img.hidden && img.complete && img.naturalWidth > 0;
  });
  return done ? {at: performance.now(), shown: shown.length} : null;
}"""


@pytest.mark.serial  # its bound is a time on this machine: no other test may share it
def test_the_first_screen_of_2000_images_in_under_a_second(
    server: ProcessBridge, open_page: OpenPage
) -> None:
    timings: list[int] = []
    while len(timings) < LOADS and not any(ms < FIRST_SCREEN_MS for ms in timings):
        dashboard = open_page(server, wait_for_connection=False)  # type: ignore[arg-type]
        page = dashboard.page
        first = page.wait_for_function(FIRST_SCREEN, polling="raf").json_value()
        timings.append(round(first["at"]))
        assert first["shown"] >= 12
        expect(page.locator(".tile")).to_have_count(FIRST_PAGE)
        # About a screen of thumbnails (and the margin below it), not the whole first page.
        assert thumbnail_requests(dashboard) < FIRST_PAGE
        dashboard.watch.assert_clean()
        page.close()
    print(f"first screen of {IMAGES} images, {len(timings)} loads: {timings} ms")
    assert min(timings) < FIRST_SCREEN_MS, f"first screen after {timings} ms"


def test_a_scroll_to_the_end_loads_pages_not_every_image(
    server: ProcessBridge, open_page: OpenPage
) -> None:
    dashboard = open_page(server)  # type: ignore[arg-type]
    page = dashboard.page
    tiles = page.locator(".tile")
    expect(tiles).to_have_count(FIRST_PAGE)
    # The lightbox crosses the end of what is loaded: the next page comes with it.
    tiles.nth(FIRST_PAGE - 1).locator(".tile-open").click()
    shown = page.locator("#lb-counter")
    expect(shown).to_have_text(re.compile(rf"^{FIRST_PAGE} / \d+\+$"))
    loaded = int(shown.inner_text().split("/")[1].strip(" +"))
    for _ in range(loaded - FIRST_PAGE + 1):
        page.keyboard.press("ArrowRight")
    expect(shown).to_have_text(re.compile(rf"^{loaded + 1} / \d+\+?$"))
    assert int(shown.inner_text().split("/")[1].strip(" +")) > loaded
    page.keyboard.press("Escape")
    count = 0
    deadline = time.monotonic() + STATE_S  # each scroll asks for the next page: a busy
    while time.monotonic() < deadline:  # machine answers it later, not never
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        page.wait_for_timeout(60)
        count = tiles.count()
        if count == IMAGES and page.locator("#load-more").is_hidden():
            break
    assert count == IMAGES
    expect(page.locator("#gallery-status")).to_have_text(f"{IMAGES} images from 8 requests.")
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    last = tiles.nth(IMAGES - 1).locator(".tile-image")
    # Thumbnails asked for while passing by are answered first: on a busy machine that takes
    # a while, so wait for the state, not for a time.
    shown_at = time.monotonic()
    while last.get_attribute("src") is None and time.monotonic() - shown_at < 90:
        page.wait_for_timeout(250)
    print(f"the last thumbnail arrived {time.monotonic() - shown_at:.1f} s after the scroll")
    expect(last).to_have_attribute("src", re.compile(r"^blob:"))
    dashboard.screenshot("desktop-gallery-2000-end", full_page=False)
    gallery_pages = sum(1 for _, url in dashboard.watch.requests if "/v1/gallery?" in url)
    assert gallery_pages >= IMAGES // PAGE_SIZE
    fetched = thumbnail_requests(dashboard)
    print(f"{fetched} thumbnails fetched while scrolling past {IMAGES} images")
    assert fetched < IMAGES // 2, f"{fetched} thumbnails fetched while scrolling past {IMAGES}"
    released = page.evaluate(
        "[...document.querySelectorAll('.tile-image')].filter((img) => img.src).length"
    )
    assert released < 400  # thumbnails far from the screen were given back
    dashboard.watch.assert_clean()
