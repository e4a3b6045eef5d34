"""The Team view in Chromium (docs/keys.md): the admin creates a key (its secret shown once),
a job made with it shows up in the per-day usage chart and, chosen by name, in the admin's
gallery, and the admin revokes it; a
non-admin key signs in, sees no Team view and gets 403 on ``/v1/keys`` and on the
operator's extended diagnostics, and the page reads the key's view of ``/v1/diagnostics``
instead (providers ready)."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import BridgeFactory, OpenPage
from tests.server.conftest import LiveServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.browser

ADMIN = "dashboard-team-admin-5c1e"
BODY = {
    "operation": "generate",
    "prompt": "a team fox",
    "parameters": {"size": "16x16"},
    "routing": {"provider": "mock"},
}


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    return bridge(
        "server.keys.enabled=true",
        'server.bearer_token_env="TEAM_ADMIN"',
        env={"TEAM_ADMIN": ADMIN},
    )


def _sign_in(page: object, token: str) -> None:
    dialog = page.locator("#auth-dialog")  # type: ignore[attr-defined]
    expect(dialog).to_be_visible()
    page.fill("#auth-token", token)  # type: ignore[attr-defined]
    dialog.get_by_role("button", name="Save token").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#connection")).to_have_attribute("data-state", "online")  # type: ignore[attr-defined]


def test_the_admin_creates_a_key_and_sees_its_usage_then_revokes_it(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server, allow=((401, r"^/v1/"),), wait_for_connection=False)
    page = dashboard.page
    _sign_in(page, ADMIN)
    team = page.locator("#team-button")
    expect(team).to_be_visible()
    team.click()
    dialog = page.locator("#team-dialog")
    expect(dialog).to_be_visible()
    page.fill("#team-name", "newcomer")
    page.fill("#team-day", "3")
    page.locator("#team-create").click()
    secret_box = page.locator("#team-secret-value")
    expect(secret_box).to_contain_text("ibk_")
    secret = secret_box.inner_text().strip()
    row = dialog.locator("tr", has_text="newcomer")
    expect(row).to_contain_text("3/3 this day")
    dashboard.screenshot("desktop-team", full_page=False)

    with httpx.Client(base_url=server.url, timeout=60) as client:
        auth = {"authorization": f"Bearer {secret}"}
        made = client.post("/v1/jobs", json=BODY, headers=auth)
        assert made.status_code == 202, made.text
        job_url = f"/v1/jobs/{made.json()['id']}"
        assert wait_until(
            lambda: client.get(job_url, headers=auth).json()["status"] == "succeeded", timeout=60
        )

    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(secret_box).to_have_text("")  # the secret is forgotten when the view closes
    team.click()
    bar = dialog.locator(".usage-bar")
    expect(bar).to_have_count(1)
    expect(bar).to_have_attribute("data-delivered", "1")
    expect(row).to_contain_text("2/3 this day")

    page.keyboard.press("Escape")
    # The admin's gallery: its own work, or one key's, chosen by name.
    tile = dashboard.tile("a team fox")
    expect(tile).to_have_count(0)
    page.select_option("#key-filter", label="newcomer")
    expect(tile).to_have_attribute("data-status", "succeeded")
    expect(tile.locator(".tile-image")).to_have_attribute("src", re.compile(r"^blob:"))
    page.select_option("#key-filter", label="mine")
    expect(tile).to_have_count(0)
    team.click()

    row.get_by_role("button", name="Revoke").click()
    page.locator("#confirm-ok").click()
    expect(row).to_contain_text("revoked")
    with httpx.Client(base_url=server.url, timeout=60) as client:
        refused = client.get("/v1/providers", headers={"authorization": f"Bearer {secret}"})
    assert refused.status_code == 401
    dashboard.watch.assert_clean()


def test_a_key_signs_in_without_a_team_view_and_is_refused_the_keys_api(
    server: LiveServer, open_page: OpenPage
) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        created = client.post(
            "/v1/keys", json={"name": "member"}, headers={"authorization": f"Bearer {ADMIN}"}
        )
        secret = created.json()["secret"]
        assert (
            client.get("/v1/keys", headers={"authorization": f"Bearer {secret}"}).status_code == 403
        )
    operator_only = (403, r"^/v1/(keys|diagnostics/extended)$")
    dashboard = open_page(server, allow=((401, r"^/v1/"), operator_only), wait_for_connection=False)
    page = dashboard.page
    _sign_in(page, secret)
    page.wait_for_selector("#f-provider option", state="attached")
    expect(page.locator("#team-button")).to_be_hidden()
    expect(page.locator("#connection")).to_contain_text("providers ready")
    dashboard.watch.assert_clean()
