"""Every view of the page, on a desktop (1280 × 800) and a phone (390 × 844): each is
screenshotted into test-output/dashboard, fits the screen without sideways scrolling, and
@axe-core/playwright finds no serious or critical accessibility violation in it. On the
phone, the mask painter is used with a finger.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import (
    DESKTOP,
    MOBILE,
    Axe,
    BridgeFactory,
    Dashboard,
    OpenPage,
    create_job,
    wait_terminal,
)
from tests.dashboard.painting import (
    Stroke,
    decode_data_url,
    mask_mismatches,
    tap_until,
    touch_stroke,
)
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.browser

VIEWPORTS = [("desktop", DESKTOP), ("mobile", MOBILE)]
ADMIN = "dashboard-views-admin-7d2a"
PROMPTS = [
    ("a lighthouse on a cliff at dusk, oil painting", 1, "384x256"),
    ("paper cranes over a still pond, morning mist", 4, "256x256"),
    ("[mock:fail=rate_limited] a storm that will not render", 1, "64x64"),
    ("a red fox asleep in fresh snow", 2, "256x384"),
    ("neon street at night in the rain, reflections", 3, "384x256"),
]


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    live = bridge()
    for prompt, n, size in PROMPTS:
        wait_terminal(live, create_job(live, prompt, n=n, size=size))
    return live


@pytest.fixture(scope="module")
def team_server(bridge: BridgeFactory) -> LiveServer:
    return bridge(
        "server.keys.enabled=true",
        'server.bearer_token_env="VIEWS_ADMIN"',
        env={"VIEWS_ADMIN": ADMIN},
    )


def check(dashboard: Dashboard, axe: Axe, name: str, *, full_page: bool = False) -> None:
    """Screenshot the view, then: no sideways scrolling, no serious axe finding."""
    dashboard.page.wait_for_timeout(150)  # transitions settle (the screenshot disables them)
    dashboard.screenshot(name, full_page=full_page)
    assert dashboard.no_horizontal_overflow(), f"{name} scrolls sideways"
    found = axe.serious(dashboard.page)
    assert found == [], f"{name}: " + "\n".join(found)


def open_lightbox(page: Any, prompt: str) -> None:
    page.locator(".tile", has=page.locator(".tile-prompt", has_text=prompt)).first.locator(
        ".tile-open"
    ).click()
    expect(page.locator("#lb-image")).to_have_attribute("src", re.compile(r"^blob:"))


Step = Callable[[Dashboard], None]


def main(dashboard: Dashboard) -> None:
    expect(dashboard.page.locator(".tile-image[src^='blob:']").first).to_be_visible()


def gallery(dashboard: Dashboard) -> None:
    dashboard.page.locator("#gallery").scroll_into_view_if_needed()
    dashboard.page.wait_for_function(
        "() => [...document.querySelectorAll('.tile-image')].filter((img) => img.src).length >= 6"
    )


def composer_more(dashboard: Dashboard) -> None:
    dashboard.open_more()
    dashboard.page.locator("#more").scroll_into_view_if_needed()


def selection(dashboard: Dashboard) -> None:
    tiles = dashboard.page.locator(".tile[data-kind='image']")
    tiles.nth(1).locator(".tile-check input").click()
    tiles.nth(2).locator(".tile-check input").click()
    expect(dashboard.page.locator("#selection-bar")).to_be_visible()


def lightbox(dashboard: Dashboard) -> None:
    open_lightbox(dashboard.page, "paper cranes")


def compare(dashboard: Dashboard) -> None:
    open_lightbox(dashboard.page, "paper cranes")
    dashboard.page.locator("#lightbox").get_by_role("button", name="Compare").click()
    expect(dashboard.page.locator("#cmp-b")).to_have_attribute("src", re.compile(r"^blob:"))


def compare_slider(dashboard: Dashboard) -> None:
    compare(dashboard)
    dashboard.page.locator("label[for='compare-slider-mode']").click()
    expect(dashboard.page.locator("#compare-slider")).to_be_visible()


def mask_painter(dashboard: Dashboard) -> None:
    page = dashboard.page
    open_lightbox(page, "a lighthouse")
    page.locator("#lightbox").get_by_role("button", name="Edit this").click()
    expect(page.locator("#source-view")).to_be_visible()
    page.get_by_role("button", name="Paint mask").click()
    expect(page.locator("#mask-dialog")).to_be_visible()


def edit_source(dashboard: Dashboard) -> None:
    page = dashboard.page
    open_lightbox(page, "a lighthouse")
    page.locator("#lightbox").get_by_role("button", name="Edit this").click()
    expect(page.locator("#source-view")).to_be_visible()
    page.locator("#edit-source").scroll_into_view_if_needed()


def job_details(dashboard: Dashboard) -> None:
    open_lightbox(dashboard.page, "neon street")
    dashboard.page.locator("#lightbox").get_by_role("button", name="Open job").click()
    expect(dashboard.page.locator("#job-dialog figure.output img[src^='blob:']")).to_have_count(3)


def system(dashboard: Dashboard) -> None:
    dashboard.page.get_by_role("button", name="System").click()
    expect(dashboard.page.locator("#sys-matrix td").first).to_have_text("mock")


def preset(dashboard: Dashboard) -> None:
    dashboard.page.get_by_role("button", name="Save as…").click()
    expect(dashboard.page.locator("#preset-dialog")).to_be_visible()


def confirm(dashboard: Dashboard) -> None:
    selection(dashboard)
    dashboard.page.locator("#sel-delete").click()
    expect(dashboard.page.locator("#confirm-dialog")).to_be_visible()


VIEWS: list[tuple[str, Step]] = [
    ("main", main),
    ("gallery", gallery),
    ("composer-more", composer_more),
    ("selection", selection),
    ("lightbox", lightbox),
    ("compare", compare),
    ("compare-slider", compare_slider),
    ("mask-painter", mask_painter),
    ("edit-source", edit_source),
    ("job-details", job_details),
    ("system", system),
    ("preset", preset),
    ("confirm", confirm),
]


@pytest.mark.parametrize(("label", "viewport"), VIEWPORTS)
@pytest.mark.parametrize(("view", "step"), VIEWS, ids=[name for name, _ in VIEWS])
def test_every_view_fits_and_passes_axe(
    server: LiveServer,
    open_page: OpenPage,
    axe: Axe,
    label: str,
    viewport: dict[str, int],
    view: str,
    step: Step,
) -> None:
    dashboard = open_page(server, viewport=viewport, allow=((404, r"^/v1/jobs/[^/]+/partial$"),))
    step(dashboard)
    check(dashboard, axe, f"{label}-{view}", full_page=view == "main" and label == "mobile")
    dashboard.watch.assert_clean()


@pytest.mark.parametrize(("label", "viewport"), VIEWPORTS)
def test_the_sign_in_and_team_views(
    team_server: LiveServer, open_page: OpenPage, axe: Axe, label: str, viewport: dict[str, int]
) -> None:
    dashboard = open_page(
        team_server, viewport=viewport, allow=((401, r"^/v1/"),), wait_for_connection=False
    )
    page = dashboard.page
    expect(page.locator("#auth-dialog")).to_be_visible()
    check(dashboard, axe, f"{label}-authentication")
    page.fill("#auth-token", ADMIN)
    page.locator("#auth-dialog").get_by_role("button", name="Save token").click()
    expect(page.locator("#connection")).to_have_attribute("data-state", "online")
    page.locator("#team-button").click()
    expect(page.locator("#team-dialog")).to_be_visible()
    check(dashboard, axe, f"{label}-team")
    dashboard.watch.assert_clean()


@pytest.mark.parametrize("scheme", ["dark"])
def test_the_dark_scheme_passes_axe(
    server: LiveServer, open_page: OpenPage, axe: Axe, scheme: str
) -> None:
    dashboard = open_page(server, color_scheme=scheme)
    main(dashboard)
    check(dashboard, axe, f"desktop-{scheme}")
    selection(dashboard)
    check(dashboard, axe, f"desktop-{scheme}-selection")
    dashboard.watch.assert_clean()


def test_a_finger_paints_the_mask_on_a_phone(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server, touch=True)
    page = dashboard.page
    size = (384, 256)
    open_lightbox(page, "a lighthouse")
    page.locator("#lightbox").get_by_role("button", name="Edit this").click()
    page.get_by_role("button", name="Paint mask").click()
    expect(page.locator("#mask-dialog")).to_be_visible()
    assert dashboard.no_horizontal_overflow()
    page.locator("#mask-size").fill("48")
    touch_stroke(page, (60, 60), (300, 180), size)
    expect(page.locator("#mask-status")).to_contain_text("% of the image may change")
    dashboard.screenshot("mobile-mask-painted", full_page=False)
    # A finger lifted from a drag takes a moment to reach a button (tap_until says why).
    tap_until(page, "#mask-apply", "#hint-mask:has-text('Painted mask:')")
    page.fill("#f-prompt", "a lighthouse with its lamp lit")
    with page.expect_request(
        lambda sent: sent.method == "POST" and sent.url.endswith("/v1/jobs")
    ) as captured:
        page.locator("#submit-button").tap()
    mask = decode_data_url(json.loads(captured.value.post_data)["mask"]["data_url"])
    assert mask.size == size
    wrong, editable = mask_mismatches(mask, [Stroke(((60, 60), (300, 180)), 24)])
    assert wrong == [], f"mask pixels unlike the painted region: {wrong}"
    assert editable > 10_000
    expect(page.locator("#run-images .run-slot[data-state='done']")).to_have_count(1)
    assert dashboard.no_horizontal_overflow()
    dashboard.watch.assert_clean()
