"""The job detail dialog in Chromium: every section a finished job can have, and its actions.

One job is built to carry everything at once: it is routed to a provider that fails
(``broken``) and falls back to the mock (attempts, the ``provider_fallback_used``
warning), asks for an aspect ratio the mock cannot honour (a normalization and a changed
row in the parameter table), has a negative prompt the mock merges (a revised prompt),
and loses one of its two outputs (a per-output failure under ``best_effort``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from imagebridge.contract.errors import BridgeError, ErrorCode
from tests.dashboard.conftest import BridgeFactory, OpenPage, create_job, job, wait_terminal
from tests.server.conftest import LiveServer
from tests.server.doubles import with_mock
from tests.support.fakes import FakeProvider
from tests.support.images import png_b64

pytestmark = pytest.mark.browser

PROMPT = "an owl explained in detail"


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    broken = FakeProvider(
        "broken", fail=BridgeError(ErrorCode.UPSTREAM, "upstream exploded", retryable=True)
    )
    return bridge(providers=with_mock(broken))


def explained_job(server: LiveServer) -> dict[str, Any]:
    body = {
        "operation": "generate",
        "prompt": f"[mock:fail-output=1] {PROMPT}",
        "negative_prompt": "fog",
        "parameters": {"n": 2, "aspect_ratio": "16:9", "failure_policy": "best_effort"},
        "routing": {
            "provider": "broken",
            "fallbacks": [{"provider": "mock"}],
            "fallback_policy": "on_error",
        },
        "policies": {"compatibility": "best_effort"},
    }
    with server.client() as client:
        created = client.post("/v1/jobs", json=body)
    assert created.status_code == 202, created.text
    finished = wait_terminal(server, created.json()["id"])
    assert finished["status"] == "succeeded", finished
    return finished


def open_job(dashboard: Any, prompt: str) -> Any:
    """The job dialog of the request whose prompt holds ``prompt``, opened from its first
    tile (through the lightbox when the tile is an image)."""
    page = dashboard.page
    tile = dashboard.tile(prompt).first
    expect(tile).to_be_visible()
    tile.locator(".tile-open").click()
    if tile.get_attribute("data-kind") == "image":
        page.locator("#lightbox").get_by_role("button", name="Open job").click()
    dialog = page.locator("#job-dialog")
    expect(dialog).to_be_visible()
    return dialog


def section(dialog: Any, heading: str) -> Any:
    return dialog.locator("section").filter(
        has=dialog.page.get_by_role("heading", name=heading, exact=True)
    )


def fact(dialog: Any, term: str) -> Any:
    """The ``<dd>`` that follows the ``<dt>`` named ``term`` in the metadata list."""
    return dialog.locator(f"dl.facts dt:text-is('{term}') + dd")


def test_the_detail_shows_every_section_of_a_finished_job(
    server: LiveServer, open_page: OpenPage
) -> None:
    stored = explained_job(server)
    result = stored["result"]
    dashboard = open_page(server)
    item = dashboard.tile(PROMPT)
    expect(item).to_have_attribute("data-status", "succeeded")
    dialog = open_job(dashboard, PROMPT)
    expect(dialog.locator("figure.output img")).to_have_count(1)
    expect(dialog.locator("figure.output img")).to_have_attribute("src", re.compile(r"^blob:"))

    expect(section(dialog, "Prompt")).to_contain_text(PROMPT)
    expect(section(dialog, "Negative prompt")).to_contain_text("fog")
    expect(section(dialog, "Revised prompt")).to_contain_text(result["revised_prompt"])

    expect(fact(dialog, "Status")).to_have_text("succeeded")
    expect(fact(dialog, "Provider")).to_have_text("mock")
    expect(fact(dialog, "Model")).to_have_text("mock-image-1")
    expect(fact(dialog, "Operation")).to_have_text("generate")
    expect(fact(dialog, "Outputs")).to_have_text("1 of 2")
    expect(fact(dialog, "Total time")).to_have_text(f"{result['timings']['total_ms']} ms")
    expect(fact(dialog, "Provider time")).to_have_text(f"{result['timings']['provider_ms']} ms")
    expect(fact(dialog, "Cancel requested")).to_have_text("no")

    parameters = section(dialog, "Requested and effective parameters")
    changed = parameters.locator("tbody tr.changed")
    expect(changed).to_have_count(1)
    expect(changed).to_contain_text("aspect_ratio")
    expect(changed).to_contain_text("16:9")
    expect(parameters.locator("tbody tr", has_text="quality")).not_to_have_class(
        re.compile(r"\bchanged\b")
    )

    normalizations = section(dialog, "Normalizations").locator("tbody tr")
    expect(normalizations).to_have_count(len(result["normalizations"]))
    aspect = normalizations.filter(has_text="parameters.aspect_ratio")
    expect(aspect).to_contain_text("provider_does_not_support_hint")
    expect(normalizations.filter(has_text="routing.provider")).to_contain_text("broken")

    attempts = section(dialog, "Provider attempts").locator("tbody tr")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(0)).to_contain_text("broken")
    expect(attempts.nth(0)).to_contain_text("failed")
    expect(attempts.nth(0)).to_contain_text("upstream")
    expect(attempts.nth(1)).to_contain_text("mock-image-1")
    expect(attempts.nth(1)).to_contain_text("succeeded")

    warnings = section(dialog, "Warnings").locator("li")
    expect(warnings).to_contain_text(["partial output failure", "provider fallback used"])

    failures = section(dialog, "Failed outputs").locator("tbody tr")
    expect(failures).to_have_count(1)
    expect(failures).to_contain_text("mock provider injected failure")

    dialog.locator(".raw summary").click()
    raw = json.loads(dialog.locator(".raw pre").inner_text())
    assert raw["id"] == stored["id"] and raw["result"]["attempts"] == result["attempts"]
    dashboard.screenshot("desktop-job-detail-sections", full_page=False)
    dashboard.watch.assert_clean()


def test_the_dialog_favourites_hides_and_restores(server: LiveServer, open_page: OpenPage) -> None:
    prompt = "a dialog-managed heron"
    job_id = create_job(server, prompt)
    wait_terminal(server, job_id)
    dashboard = open_page(server)
    page = dashboard.page
    open_job(dashboard, prompt)
    actions = page.locator("#job-dialog-actions")
    favorite = actions.get_by_role("button", name="Favorite")
    expect(favorite).to_have_attribute("aria-pressed", "false")
    favorite.click()
    expect(favorite).to_have_attribute("aria-pressed", "true")
    assert job(server, job_id)["favorite"] is True

    expect(dashboard.tile(prompt).locator(".tile-fav")).to_be_visible()
    actions.get_by_role("button", name="Hide").click()
    expect(actions.get_by_role("button", name="Restore")).to_be_visible()
    assert "deleted" in job(server, job_id)
    expect(dashboard.tile(prompt)).to_have_count(0)
    actions.get_by_role("button", name="Restore").click()
    expect(actions.get_by_role("button", name="Hide")).to_be_visible()
    assert "deleted" not in job(server, job_id)
    page.keyboard.press("Escape")
    expect(page.locator("#job-dialog")).to_be_hidden()
    expect(dashboard.tile(prompt)).to_be_visible()
    dashboard.watch.assert_clean()


def test_the_dialog_cancels_a_running_job_and_follows_it_to_the_end(
    server: LiveServer, open_page: OpenPage
) -> None:
    """Cancel from the dialog: the DELETE answers while the job still runs; by the time the
    library's list arrives the job has ended, so polling slows to 15 s. The dialog must
    follow what the library learned then, not wait for that slow poll."""
    job_id = create_job(server, "[mock:latency=60000] a heron that takes its time")
    dashboard = open_page(server)
    page = dashboard.page
    item = dashboard.tile("a heron that takes its time")
    expect(item).to_have_attribute("data-status", "running")
    dialog = open_job(dashboard, "a heron that takes its time")
    expect(fact(dialog, "Status")).to_have_text("running")

    def list_after_the_job_ended(route: Any) -> None:
        wait_terminal(server, job_id)  # bounded; the page's list answer waits for the end
        route.continue_()

    page.route(re.compile(r"/v1/gallery\?"), list_after_the_job_ended)
    page.locator("#job-dialog-actions").get_by_role("button", name="Cancel").click()
    confirm = page.locator("#confirm-dialog")
    expect(confirm).to_contain_text("best effort")
    confirm.get_by_role("button", name="Cancel job").click()
    expect(item).to_have_attribute("data-status", "cancelled")
    expect(fact(dialog, "Status")).to_have_text("cancelled", timeout=3_000)
    expect(fact(dialog, "Cancel requested")).to_have_text("yes")
    expect(page.locator("#job-dialog-actions").get_by_role("button", name="Hide")).to_be_visible()
    page.unroute(re.compile(r"/v1/gallery\?"))
    assert job(server, job_id)["status"] == "cancelled"
    dashboard.watch.assert_clean()


def test_raw_metadata_leaves_out_the_uploaded_image_bytes(
    server: LiveServer, open_page: OpenPage
) -> None:
    encoded = png_b64(16, 16, (200, 30, 30))
    data_url = f"data:image/png;base64,{encoded}"
    body: dict[str, Any] = {
        "operation": "edit",
        "prompt": "a raw metadata edit",
        "images": [{"type": "data_url", "data_url": data_url}],
        "parameters": {"size": "16x16"},
    }
    with server.client() as client:
        created = client.post("/v1/jobs", json=body)
    assert created.status_code == 202, created.text
    wait_terminal(server, created.json()["id"])
    dashboard = open_page(server)
    page = dashboard.page
    open_job(dashboard, "a raw metadata edit")
    raw = page.locator("#job-dialog .raw")
    raw.locator("summary").click()
    text = raw.locator("pre").inner_text()
    assert encoded not in text
    shown = json.loads(text)["request"]["images"][0]["data_url"]
    assert shown == f"data:image/png;base64,… ({len(data_url)} characters)"
    dashboard.watch.assert_clean()
