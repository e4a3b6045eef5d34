"""Iterating from an image in Chromium: *Edit this*, painting a mask with the mouse and a pen
(checked on the request the page sends and on the mock's composited result), compare, *Vary*
and *Reuse settings*."""

from __future__ import annotations

import base64
import io
import json
import re
from typing import Any

import pytest
from PIL import Image, ImageChops
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
from tests.dashboard.painting import (
    Stroke,
    decode_data_url,
    mask_mismatches,
    mouse_stroke,
    pen_stroke,
)
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.browser

SOURCE = (96, 64)
SOURCE_PROMPT = "a harbour to repaint"


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    """The mock alone: it takes masks natively and composites with a hard edge."""
    live = bridge()
    wait_terminal(live, create_job(live, SOURCE_PROMPT, size=f"{SOURCE[0]}x{SOURCE[1]}"))
    wait_terminal(live, create_job(live, "a vase of tulips", size="40x40", n=2, quality="high"))
    return live


def open_lightbox(dashboard: Dashboard, prompt: str, index: int = 0) -> Any:
    dashboard.tile(prompt).nth(index).locator(".tile-open").click()
    lightbox = dashboard.page.locator("#lightbox")
    expect(lightbox).to_be_visible()
    expect(dashboard.page.locator("#lb-image")).to_have_attribute("src", re.compile(r"^blob:"))
    return lightbox


def test_edit_this_and_a_painted_mask_reach_the_bridge_and_the_composite(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    [source_job] = jobs_with_prompt(server, SOURCE_PROMPT)
    source_id = source_job["result"]["data"][0]["id"]
    source = Image.open(io.BytesIO(artifact_bytes(server, source_id))).convert("RGB")

    lightbox = open_lightbox(dashboard, SOURCE_PROMPT)
    lightbox.get_by_role("button", name="Edit this").click()
    expect(lightbox).to_be_hidden()
    expect(page.locator("#f-operation")).to_have_value("edit")
    expect(page.locator("#source-view")).to_be_visible()
    expect(page.locator("#source-caption")).to_contain_text("96×64")
    expect(page.locator("#f-prompt")).to_be_focused()
    page.select_option("#f-provider", "mock")
    expect(page.locator("#provider-note")).to_contain_text("mock-image-1")

    page.get_by_role("button", name="Paint mask").click()
    painter = page.locator("#mask-dialog")
    expect(painter).to_be_visible()
    expect(page.locator("#mask-status")).to_contain_text("Nothing painted yet")
    expect(page.locator("#mask-apply")).to_be_disabled()
    page.locator("#mask-size").fill("16")
    expect(page.locator("#mask-size-value")).to_have_text("16 px")
    mouse_stroke(page, (14, 18), (58, 22), SOURCE)
    pen_stroke(page, (66, 44), (82, 50), SOURCE)
    expect(page.locator("#mask-status")).to_contain_text("% of the image may change")
    painted = page.locator("#mask-status").inner_text()
    page.locator("#mask-undo").click()  # the pen stroke goes…
    expect(page.locator("#mask-status")).not_to_have_text(painted)
    page.locator("#mask-redo").click()  # …and comes back
    expect(page.locator("#mask-status")).to_have_text(painted)
    page.locator("label[for='mask-eraser']").click()
    expect(page.locator("#mask-eraser")).to_be_checked()
    page.locator("#mask-size").fill("8")
    mouse_stroke(page, (36, 20), (36, 20), SOURCE)
    dashboard.screenshot("desktop-mask-painted", full_page=False)
    page.locator("#mask-apply").click()
    expect(painter).to_be_hidden()
    expect(page.locator("#hint-mask")).to_contain_text("Painted mask:")
    expect(page.locator("#source-mask")).to_be_visible()
    expect(page.get_by_role("button", name="Edit mask")).to_be_visible()

    page.fill("#f-prompt", "turn the water to gold")
    with page.expect_request(
        lambda sent: sent.method == "POST" and sent.url.endswith("/v1/jobs")
    ) as captured:
        page.get_by_role("button", name="Edit", exact=True).click()
    body = json.loads(captured.value.post_data)
    assert body["operation"] == "edit"
    assert body["routing"]["provider"] == "mock"
    sent_source = body["images"][0]["data_url"]
    assert base64.b64decode(sent_source.split(",", 1)[1]) == artifact_bytes(server, source_id)
    mask = decode_data_url(body["mask"]["data_url"])
    assert mask.size == SOURCE
    strokes = [
        Stroke(((14, 18), (58, 22)), 8),
        Stroke(((66, 44), (82, 50)), 8),
        Stroke(((36, 20),), 4, erase=True),
    ]
    wrong, editable = mask_mismatches(mask, strokes)
    assert wrong == [], f"mask pixels unlike the painted region: {wrong}"
    assert 700 < editable < 1400, editable

    job_id = json.loads(captured.value.response().text())["id"]
    finished = wait_terminal(server, job_id)
    assert finished["status"] == "succeeded", finished
    result = finished["result"]
    # The mock took the mask itself: the bridge composited nothing.
    assert "mask_emulated" not in result.get("warnings", [])
    assert not [item for item in result.get("normalizations", []) if "mask" in item["field"]]
    edited = Image.open(io.BytesIO(artifact_bytes(server, result["data"][0]["id"]))).convert("RGB")
    assert edited.size == SOURCE
    alpha = mask.getchannel("A")
    kept = alpha.point(lambda value: 255 if value == 255 else 0)
    changed = ImageChops.difference(edited, source).convert("L").point(lambda v: 255 if v else 0)
    # Outside the painted region the result is the source, exactly; inside it changed.
    assert ImageChops.multiply(changed, kept).getbbox() is None
    inside = sum(ImageChops.multiply(changed, ImageChops.invert(kept)).histogram()[1:])
    assert inside > 0.9 * editable, (inside, editable)

    # The result shows beside its source, and compare holds both.
    expect(page.locator("#run-images .run-source img")).to_have_attribute("src", sent_source)
    expect(page.locator("#run-images .run-slot[data-state='done']")).to_have_count(1)
    page.locator("#run-compare").click()
    compare = page.locator("#compare-dialog")
    expect(compare).to_be_visible()
    expect(page.locator("#cmp-a")).to_have_attribute("src", sent_source)
    expect(page.locator("#cmp-b")).to_have_attribute("src", re.compile(r"^blob:"))
    expect(page.locator("#cmp-a-caption")).to_have_text("Source")
    page.locator("#cmp-zoom-in").click()
    transforms = page.evaluate(
        "[...document.querySelectorAll('#compare-side .zoom-layer')].map((l) => l.style.transform)"
    )
    assert transforms[0] and transforms[0] == transforms[1]  # zoom and pan kept in step
    dashboard.screenshot("desktop-compare", full_page=False)
    page.locator("label[for='compare-slider-mode']").click()
    expect(page.locator("#compare-slider")).to_be_visible()
    expect(page.locator("#cmp-s-b")).to_have_attribute("src", re.compile(r"^blob:"))
    page.locator("#cmp-position").fill("30")
    assert "30%" in page.evaluate("document.getElementById('cmp-s-top').style.clipPath")
    dashboard.screenshot("desktop-compare-slider", full_page=False)
    page.keyboard.press("Escape")
    expect(compare).to_be_hidden()
    dashboard.watch.assert_clean()


def test_vary_makes_new_images_with_the_same_parameters(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    [original] = jobs_with_prompt(server, "a vase of tulips")
    lightbox = open_lightbox(dashboard, "a vase of tulips")
    lightbox.get_by_role("button", name="Vary").click()
    expect(lightbox).to_be_hidden()
    expect(page.locator("#run-images .run-slot")).to_have_count(2)
    expect(page.locator("#run-images .run-slot[data-state='done']")).to_have_count(2)
    expect(dashboard.tile("a vase of tulips")).to_have_count(4)
    jobs = jobs_with_prompt(server, "a vase of tulips")
    assert len(jobs) == 2
    varied = next(job for job in jobs if job["id"] != original["id"])
    assert varied["request"]["parameters"] == original["request"]["parameters"]
    assert varied["request"]["prompt"] == original["request"]["prompt"]
    old = {item["id"] for item in original["result"]["data"]}
    new = {item["id"] for item in varied["result"]["data"]}
    assert len(new) == 2 and not old & new
    dashboard.watch.assert_clean()


def test_reuse_settings_fills_the_composer(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    lightbox = open_lightbox(dashboard, "a vase of tulips")
    lightbox.get_by_role("button", name="Reuse settings").click()
    expect(lightbox).to_be_hidden()
    expect(page.locator("#f-prompt")).to_have_value("a vase of tulips")
    expect(page.locator("#f-n")).to_have_value("2")
    expect(page.locator("#f-size")).to_have_value("custom")
    expect(page.locator("#f-size_custom")).to_have_value("40x40")
    expect(page.locator("#f-quality")).to_have_value("high")
    expect(page.locator("#f-operation")).to_have_value("generate")
    dashboard.watch.assert_clean()
