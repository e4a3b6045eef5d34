"""Bearer authentication in Chromium: a 401 asks for the token; the token never leaves headers."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import BridgeFactory, OpenPage
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.browser

TOKEN = "dashboard-browser-token-3f9a"
TOKEN_KEY = "imagegen-bridge.dashboard.bearer"


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    return bridge('server.bearer_token_env="DASHBOARD_TOKEN"', env={"DASHBOARD_TOKEN": TOKEN})


def test_a_401_asks_for_the_token_and_it_never_appears_in_a_url(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server, allow=((401, r"^/v1/"),), wait_for_connection=False)
    page = dashboard.page
    dialog = page.locator("#auth-dialog")
    expect(dialog).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "unauthorized")
    expect(page.locator("#auth-button")).to_be_visible()
    expect(page.locator("#auth-token")).to_be_focused()
    dashboard.screenshot("desktop-authentication", full_page=False)

    page.fill("#auth-token", "not-the-token")
    dialog.get_by_role("button", name="Save token").click()
    expect(dialog).to_be_visible()
    expect(page.locator("#auth-message")).to_contain_text("refused the saved token")

    page.fill("#auth-token", TOKEN)
    dialog.get_by_role("button", name="Save token").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#connection")).to_have_attribute("data-state", "online")
    expect(page.locator("#auth-button")).to_be_visible()  # diagnostics: auth is required
    assert page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')") == TOKEN

    page.fill("#f-prompt", "an authenticated owl")
    page.select_option("#f-size", "custom")
    page.fill("#f-size_custom", "16x16")
    page.locator("#submit-button").click()
    item = dashboard.tile("an authenticated owl")
    expect(item).to_have_attribute("data-status", "succeeded")
    expect(item.locator(".tile-image")).to_have_attribute("src", re.compile(r"^blob:"))
    item.locator(".tile-open").click()
    expect(page.locator("#lb-image")).to_have_attribute("src", re.compile(r"^blob:"))
    page.locator("#lightbox").get_by_role("button", name="Open job").click()
    expect(page.locator("#job-dialog figure.output img")).to_have_attribute(
        "src", re.compile(r"^blob:")
    )
    page.keyboard.press("Escape")
    page.keyboard.press("Escape")
    expect(page.locator("#lightbox")).to_be_hidden()

    requests_before_reload = len(dashboard.watch.requests)
    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-state", "online")
    expect(page.locator("#auth-dialog")).to_be_hidden()
    expect(item.locator(".tile-image")).to_have_attribute("src", re.compile(r"^blob:"))
    assert len(dashboard.watch.requests) > requests_before_reload
    assert not any(TOKEN in url for _, url in dashboard.watch.requests)
    dashboard.watch.assert_clean()


def test_forgetting_the_token_asks_again(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server, allow=((401, r"^/v1/"),), wait_for_connection=False)
    page = dashboard.page
    dialog = page.locator("#auth-dialog")
    page.fill("#auth-token", TOKEN)
    dialog.get_by_role("button", name="Save token").click()
    expect(page.locator("#connection")).to_have_attribute("data-state", "online")
    page.get_by_role("button", name="Authentication").click()
    expect(page.locator("#auth-message")).to_have_text("A token is saved for this tab.")
    dialog.get_by_role("button", name="Forget token").click()
    assert page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')") is None
    dialog.get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Refresh").click()
    expect(dialog).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "unauthorized")
    dashboard.watch.assert_clean()
