"""The lightbox in Chromium: the keyboard steps through every image of the gallery, zoom and
pan, what was asked against what was delivered, copy, download, open the job."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import (
    BridgeFactory,
    OpenPage,
    create_job,
    jobs_with_prompt,
    wait_terminal,
)
from tests.dashboard.painting import swipe, tap_until
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    live = bridge()
    wait_terminal(live, create_job(live, "a first lighthouse", size="48x32"))
    wait_terminal(live, create_job(live, "three herons at dawn", size="40x40", n=3))
    wait_terminal(live, create_job(live, "[mock:fail=upstream] nothing to show"))
    wait_terminal(live, create_job(live, "an owl, newest", size="32x48", quality="high"))
    return live


def counter(page: Any) -> Any:
    return page.locator("#lb-counter")


def test_the_keyboard_steps_through_every_image(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    expect(page.locator(".tile")).to_have_count(6)  # five images and the failure
    dashboard.tile("an owl, newest").locator(".tile-open").click()
    lightbox = page.locator("#lightbox")
    expect(lightbox).to_be_visible()
    expect(counter(page)).to_have_text("1 / 5")  # images only: the failure is not one
    expect(page.locator("#lb-stage")).to_be_focused()
    image = page.locator("#lb-image")
    page.wait_for_function(
        "() => { const img = document.getElementById('lb-image');"
        " return img.complete && img.naturalWidth === 32 && img.naturalHeight === 48; }"
    )
    expect(page.locator("#lb-info")).to_contain_text("an owl, newest")
    seen = []
    for expected in ("2 / 5", "3 / 5", "4 / 5", "5 / 5"):
        page.keyboard.press("ArrowRight")
        expect(counter(page)).to_have_text(expected)
        seen.append(page.locator("#lightbox-title").inner_text())
    assert seen == ["Image 1 of 3", "Image 2 of 3", "Image 3 of 3", "Image"]
    expect(page.locator("#lb-info")).to_contain_text("a first lighthouse")
    expect(page.locator("#lb-next")).to_be_disabled()
    page.keyboard.press("ArrowRight")  # nothing after the last image
    expect(counter(page)).to_have_text("5 / 5")
    page.keyboard.press("ArrowLeft")
    expect(counter(page)).to_have_text("4 / 5")
    expect(image).to_have_attribute("src", re.compile(r"^blob:"))
    page.wait_for_function("document.getElementById('lb-image').naturalWidth === 40")
    page.keyboard.press("Escape")
    expect(lightbox).to_be_hidden()
    dashboard.watch.assert_clean()


def test_zoom_and_pan(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    dashboard.tile("a first lighthouse").locator(".tile-open").click()
    level = page.locator("#lb-zoom")
    expect(level).to_have_text("Fit")
    layer = "document.querySelector('#lb-stage .zoom-layer').style.transform"
    page.keyboard.press("+")
    expect(level).to_have_text("125%")
    page.locator("#lb-zoom-in").click()
    expect(level).to_have_text("156%")
    before = page.evaluate(layer)
    box = page.locator("#lb-stage").bounding_box()
    centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.move(*centre)
    page.mouse.down()
    page.mouse.move(centre[0] - 60, centre[1] - 40, steps=5)
    page.mouse.up()
    after = page.evaluate(layer)
    assert before != after and "scale(1.5625)" in after  # panned, at the same zoom
    page.mouse.wheel(0, -200)
    expect(level).not_to_have_text("156%")
    page.keyboard.press("0")
    expect(level).to_have_text("Fit")
    assert page.evaluate(layer) == ""
    dashboard.watch.assert_clean()


def test_the_details_copy_download_and_open_the_job(
    server: LiveServer, open_page: OpenPage
) -> None:
    [owl] = jobs_with_prompt(server, "an owl, newest")
    dashboard = open_page(server)
    page = dashboard.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    dashboard.tile("an owl, newest").locator(".tile-open").click()
    info = page.locator("#lb-info")
    table = info.locator("table", has_text="Asked and delivered")
    expect(table.locator("tr", has_text="Size")).to_contain_text("32x48")
    expect(table.locator("tr", has_text="Quality")).to_contain_text("high")
    expect(table.locator("tr", has_text="Model")).to_contain_text("mock-image-1")
    expect(table.locator("tr", has_text="Format")).to_contain_text("png")
    expect(info).to_contain_text("Revised prompt")

    info.get_by_role("button", name="Copy prompt").click()
    expect(page.locator("#toast")).to_have_text("Copied the prompt")
    assert page.evaluate("navigator.clipboard.readText()") == "an owl, newest"
    info.get_by_role("button", name="Copy parameters").click()
    expect(page.locator("#toast")).to_have_text("Copied the parameters")
    copied = json.loads(page.evaluate("navigator.clipboard.readText()"))
    assert copied["prompt"] == "an owl, newest"
    assert copied["parameters"] == owl["request"]["parameters"]
    assert "images" not in copied

    with page.expect_download() as downloaded:
        info.get_by_role("button", name="Download").click()
    item = owl["result"]["data"][0]
    assert downloaded.value.suggested_filename == item["name"].rsplit("/", 1)[-1]
    with server.client() as client:
        original = client.get(f"/v1/artifacts/{item['id']}").content
    assert Path(downloaded.value.path()).read_bytes() == original

    info.get_by_role("button", name="Favorite").click()
    expect(info.get_by_role("button", name="Favorite")).to_have_attribute("aria-pressed", "true")
    expect(dashboard.tile("an owl, newest").locator(".tile-fav")).to_be_visible()
    info.get_by_role("button", name="Open job").click()
    dialog = page.locator("#job-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("figure.output img")).to_have_attribute("src", re.compile(r"^blob:"))
    dashboard.screenshot("desktop-lightbox-job", full_page=False)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(page.locator("#lightbox")).to_be_visible()
    dashboard.watch.assert_clean()


def test_on_a_phone_the_details_follow_the_image_and_a_swipe_steps(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server, touch=True)
    page = dashboard.page
    dashboard.tile("three herons at dawn").nth(1).locator(".tile-open").tap()
    expect(counter(page)).to_have_text("3 / 5")
    stage = page.locator("#lb-stage").bounding_box()
    info = page.locator("#lb-info").bounding_box()
    assert stage["y"] + stage["height"] <= info["y"] + 1  # the details follow the image
    assert page.evaluate("document.getElementById('lightbox').scrollWidth <= window.innerWidth")
    swipe(page, "#lb-stage", -160)  # leftwards: the next image
    expect(counter(page)).to_have_text("4 / 5")
    swipe(page, "#lb-stage", 160)
    expect(counter(page)).to_have_text("3 / 5")
    # a finger lifted from a swipe takes a moment to tap again (tap_until says why)
    tap_until(
        page,
        "#lb-next",
        "#lb-counter:text-is('4 / 5')",
        tapper=lambda page, selector: page.locator(selector).tap(),
    )
    dashboard.watch.assert_clean()
