"""Selecting gallery tiles in Chromium (click, shift-range, the keyboard) and what the
selection bar does: a ZIP of the selected images, compare two, delete images."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import (
    BridgeFactory,
    Dashboard,
    OpenPage,
    artifact_bytes,
    create_job,
    jobs_with_prompt,
    wait_terminal,
)
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    live = bridge()
    for prompt, n in (("zip fox alone", 1), ("zip three herons", 3), ("zip owl alone", 1)):
        wait_terminal(live, create_job(live, prompt, n=n, size="24x16"))
    return live


def images_of(server: LiveServer, prompt: str) -> list[dict[str, Any]]:
    [job] = jobs_with_prompt(server, prompt)
    data: list[dict[str, Any]] = job["result"]["data"]
    return data


def checkbox(tile: Any) -> Any:
    return tile.locator(".tile-check input")


def test_a_shift_range_downloads_as_a_zip_of_exactly_those_images(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    tiles = page.locator(".tile")
    expect(tiles).to_have_count(5)  # owl, three herons, fox: newest first
    checkbox(tiles.nth(0)).click()
    checkbox(tiles.nth(3)).click(modifiers=["Shift"])
    expect(page.locator("#selection-count")).to_have_text("4 items selected")
    expect(page.locator(".tile.selected")).to_have_count(4)
    expect(tiles.nth(4)).not_to_have_class(re.compile(r"\bselected\b"))
    dashboard.screenshot("desktop-selection", full_page=False)

    with page.expect_download() as downloaded:
        page.get_by_role("button", name="Download ZIP").click()
    download = downloaded.value
    assert download.suggested_filename.endswith(".zip")
    expected = [*images_of(server, "zip owl alone"), *images_of(server, "zip three herons")]
    with zipfile.ZipFile(io.BytesIO(Path(download.path()).read_bytes())) as archive:
        assert archive.testzip() is None  # every CRC matches
        names = archive.namelist()
        assert names == [item["name"].rsplit("/", 1)[-1] for item in expected]
        for name, item in zip(names, expected, strict=True):
            assert archive.read(name) == artifact_bytes(server, item["id"])
    expect(page.locator("#toast")).to_contain_text("ZIP of 4 images")
    dashboard.watch.assert_clean()


def test_clicks_select_while_a_selection_exists_and_escape_clears_it(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    tiles = page.locator(".tile")
    expect(tiles).to_have_count(5)
    tiles.nth(1).locator(".tile-open").click(modifiers=["Control"])  # starts a selection
    expect(page.locator("#selection-count")).to_have_text("1 item selected")
    tiles.nth(2).locator(".tile-open").click()  # a plain click now selects, it does not open
    expect(page.locator("#lightbox")).to_be_hidden()
    expect(page.locator("#selection-count")).to_have_text("2 items selected")
    # Two images: compare them.
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("#compare-dialog")).to_be_visible()
    expect(page.locator("#cmp-a")).to_have_attribute("src", re.compile(r"^blob:"))
    expect(page.locator("#cmp-b")).to_have_attribute("src", re.compile(r"^blob:"))
    expect(page.locator("#cmp-a-caption")).to_contain_text("zip three herons")
    page.keyboard.press("Escape")
    # The keyboard: arrows move between tiles, space selects, escape clears.
    tiles.nth(2).locator(".tile-open").focus()
    page.keyboard.press("ArrowRight")
    expect(tiles.nth(3).locator(".tile-open")).to_be_focused()
    page.keyboard.press("Space")
    expect(page.locator("#selection-count")).to_have_text("3 items selected")
    page.keyboard.press("Escape")
    expect(page.locator("#selection-bar")).to_be_hidden()
    expect(page.locator(".tile.selected")).to_have_count(0)
    page.keyboard.press("Enter")
    expect(page.locator("#lightbox")).to_be_visible()
    expect(page.locator("#lb-counter")).to_have_text("4 / 5")
    page.keyboard.press("Escape")
    dashboard.watch.assert_clean()


def test_deleting_images_removes_them_from_the_bridge(
    bridge: BridgeFactory, open_page: OpenPage
) -> None:
    server = bridge()
    wait_terminal(server, create_job(server, "delete two of three", n=3, size="24x16"))
    removed = [item["id"] for item in images_of(server, "delete two of three")[:2]]
    dashboard = open_page(server)
    page = dashboard.page
    tiles = dashboard.tile("delete two of three")
    expect(tiles).to_have_count(3)
    checkbox(tiles.nth(0)).click()
    checkbox(tiles.nth(1)).click()
    page.locator("#sel-delete").click()
    confirm = page.locator("#confirm-dialog")
    expect(confirm).to_contain_text("Delete 2 images from the bridge?")
    confirm.get_by_role("button", name="Keep").click()
    expect(tiles).to_have_count(3)
    page.locator("#sel-delete").click()
    confirm.get_by_role("button", name="Delete").click()
    expect(tiles).to_have_count(1)
    expect(page.locator("#selection-bar")).to_be_hidden()
    expect(page.locator("#gallery-status")).to_have_text("1 image from 1 request.")
    with server.client() as client:
        for artifact_id in removed:
            assert client.get(f"/v1/artifacts/{artifact_id}").status_code == 404
    dashboard.watch.assert_clean()

    # The history still names the deleted images: after a reload their tiles say so.
    again = open_page(server, allow=((404, r"^/v1/artifacts/[^/]+/thumbnail\?"),))
    gone = again.page.locator(".tile[data-removed='1']")
    expect(gone).to_have_count(2)
    expect(gone.locator(".tile-placeholder")).to_have_text(["No longer stored"] * 2)
    again.watch.assert_clean()


def test_the_lightbox_deletes_the_image_on_show_and_moves_on(
    bridge: BridgeFactory, open_page: OpenPage
) -> None:
    server = bridge()
    wait_terminal(server, create_job(server, "a pair to thin out", n=2, size="24x16"))
    first, second = (item["id"] for item in images_of(server, "a pair to thin out"))
    dashboard: Dashboard = open_page(server)
    page = dashboard.page
    dashboard.tile("a pair to thin out").first.locator(".tile-open").click()
    lightbox = page.locator("#lightbox")
    expect(page.locator("#lb-counter")).to_have_text("1 / 2")
    lightbox.get_by_role("button", name="Delete image").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Delete").click()
    expect(page.locator("#lb-counter")).to_have_text("1 / 1")
    expect(lightbox).to_be_visible()
    with server.client() as client:
        assert client.get(f"/v1/artifacts/{first}").status_code == 404
        assert client.get(f"/v1/artifacts/{second}").status_code == 200
    page.keyboard.press("Escape")
    expect(dashboard.tile("a pair to thin out")).to_have_count(1)
    dashboard.watch.assert_clean()
