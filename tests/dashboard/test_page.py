"""The page as a whole in Chromium: a clean load, narrow screens, and the form module."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import (
    DESKTOP,
    MOBILE,
    BridgeFactory,
    OpenPage,
    create_job,
    wait_terminal,
)
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.browser

LONG_WORD = "unbroken" * 40


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    live = bridge()
    done = create_job(live, f"a lighthouse at dusk {LONG_WORD}", n=2)
    failed = create_job(live, "[mock:fail=rate_limited] a storm that will not render")
    wait_terminal(live, done)
    wait_terminal(live, failed)
    return live


@pytest.mark.parametrize(("label", "viewport"), [("desktop", DESKTOP), ("mobile", MOBILE)])
def test_the_page_loads_cleanly_and_fits_the_screen(
    server: LiveServer, open_page: OpenPage, label: str, viewport: dict[str, int]
) -> None:
    dashboard = open_page(server, viewport=viewport)
    page = dashboard.page
    expect(page).to_have_title("Imagegen Bridge")
    expect(page.locator(".tile")).to_have_count(3)  # two images of one request, one failure
    # Thumbnails come as tiles near the screen; on a phone the gallery is below the composer.
    page.locator("#gallery").scroll_into_view_if_needed()
    images = page.locator(".tile[data-kind='image'] .tile-image")
    expect(images).to_have_count(2)
    for index in range(2):
        expect(images.nth(index)).to_have_attribute("src", re.compile(r"^blob:"))
    expect(page.locator(".tile[data-kind='image'] .tile-count")).to_have_text(["1/2", "2/2"])
    expect(page.locator(".tile[data-status='failed'] .tile-meta")).to_contain_text("rate_limited")
    expect(page.locator("#gallery-status")).to_have_text("2 images from 2 requests.")
    expect(page.locator("#connection")).to_contain_text("1/1 providers ready")
    assert page.locator("#auth-button").is_hidden()  # no bearer configured, no 401 seen
    page.reload()
    page.wait_for_selector("#connection[data-state='online']")
    expect(page.locator(".tile")).to_have_count(3)
    page.locator("#gallery").scroll_into_view_if_needed()
    expect(images.first).to_have_attribute("src", re.compile(r"^blob:"))
    page.wait_for_load_state("networkidle")
    assert dashboard.no_horizontal_overflow()
    dashboard.screenshot(f"{label}-main")
    dashboard.watch.assert_clean()


@pytest.mark.parametrize(("label", "viewport"), [("desktop", DESKTOP), ("mobile", MOBILE)])
def test_dialogs_fit_the_screen(
    server: LiveServer, open_page: OpenPage, label: str, viewport: dict[str, int]
) -> None:
    dashboard = open_page(server, viewport=viewport)
    page = dashboard.page
    page.locator(".tile[data-kind='image'] .tile-open").first.click()
    lightbox = page.locator("#lightbox")
    expect(lightbox).to_be_visible()
    expect(page.locator("#lb-image")).to_have_attribute("src", re.compile(r"^blob:"))
    lightbox.get_by_role("button", name="Open job").click()
    dialog = page.locator("#job-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator("figure.output img[src^='blob:']")).to_have_count(2)
    assert dashboard.no_horizontal_overflow()
    dashboard.screenshot(f"{label}-job-details", full_page=False)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.keyboard.press("Escape")
    expect(lightbox).to_be_hidden()

    page.get_by_role("button", name="System").click()
    system = page.locator("#system-dialog")
    expect(system.locator("#sys-matrix td").first).to_have_text("mock")
    assert dashboard.no_horizontal_overflow()
    dashboard.screenshot(f"{label}-system", full_page=False)
    page.keyboard.press("Escape")

    dashboard.open_more()
    page.locator("#more").scroll_into_view_if_needed()
    assert dashboard.no_horizontal_overflow()
    dashboard.screenshot(f"{label}-composer-open")
    dashboard.watch.assert_clean()


def test_a_stopped_bridge_shows_as_offline(bridge: BridgeFactory, open_page: OpenPage) -> None:
    server = bridge()
    dashboard = open_page(server)
    page = dashboard.page
    expect(page.locator("#gallery-empty")).to_contain_text("Your images will appear here")
    expect(page.locator("#gallery-status")).to_have_text("No images yet.")
    dashboard.screenshot("desktop-empty", full_page=False)
    connection = page.locator("#connection")
    expect(connection).to_have_attribute("data-state", "online")
    server.stop()
    page.get_by_role("button", name="Refresh").click()
    expect(connection).to_have_attribute("data-state", "offline")
    expect(connection).to_have_text("Offline: the bridge cannot be reached")
    expect(page.locator("#gallery-status")).to_contain_text("could not be loaded")
    expect(page.locator("#gallery-empty")).to_be_hidden()
    assert dashboard.watch.failed and all("/v1/" in url for url in dashboard.watch.failed)
    assert dashboard.watch.errors == []


def test_the_page_follows_the_colour_scheme(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    background = "getComputedStyle(document.documentElement).backgroundColor"
    assert page.evaluate(background) == "rgb(245, 246, 248)"
    dashboard.screenshot("desktop-light", full_page=False)
    page.emulate_media(color_scheme="dark")
    assert page.evaluate(background) == "rgb(18, 20, 24)"
    dashboard.screenshot("desktop-dark", full_page=False)
    dashboard.watch.assert_clean()


def test_keyboard_reaches_the_composer_and_dialogs_close_with_escape(
    server: LiveServer, open_page: OpenPage
) -> None:
    page = open_page(server).page
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("#system-button")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#system-dialog")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#system-dialog")).to_be_hidden()
    expect(page.locator("#system-button")).to_be_focused()  # focus returns to the opener
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input, select, textarea')]
            .filter((el) => !el.labels || el.labels.length === 0)
            .map((el) => el.id || el.name)"""
    )
    assert unlabelled == []


FULL_VALUES: dict[str, Any] = {
    "prompt": "a glass owl",
    "operation": "edit",
    "provider": "mock",
    "n": "1",
    "negative_prompt": "blur",
    "model": "mock-image-1",
    "size": "custom",
    "size_custom": "96x64",
    "aspect_ratio": "",
    "resolution": "",
    "quality": "high",
    "output_format": "webp",
    "output_compression": "80",
    "background": "transparent",
    "transparency_mode": "chroma_key",
    "key_color": "#00FF00",
    "transparent_threshold": "20",
    "opaque_threshold": "200",
    "despill": False,
    "moderation": "low",
    "partial_images": "2",
    "input_fidelity": "high",
    "action": "edit",
    "failure_policy": "best_effort",
    "batch_execution": "sequential",
    "compatibility": "strict",
    "negative_prompt_policy": "merge",
    "revised_prompt": "omit",
    "fallbacks": "ready, other-provider:model-x",
    "fallback_policy": "on_error",
    "directory": "dashboard/owls",
    "filename_prefix": "",
    "filename": "owl.webp",
    "collision": "suffix",
    "metadata": "sidecar_and_embedded",
    "session_mode": "isolated",
    "session_key": "",
    "thread_id": "",
    "timeout_ms": "120000",
    "idempotency_key": "owl-1",
    "user": "tester",
}

FULL_REQUEST = {
    "operation": "edit",
    "prompt": "a glass owl",
    "negative_prompt": "blur",
    "images": [{"type": "data_url", "data_url": "data:image/png;base64,AAAA", "filename": "a.png"}],
    "mask": {"type": "data_url", "data_url": "data:image/png;base64,BBBB", "filename": "m.png"},
    "reference_images": [{"type": "data_url", "data_url": "data:image/jpeg;base64,CCCC"}],
    "parameters": {
        "size": "96x64",
        "quality": "high",
        "output_format": "webp",
        "background": "transparent",
        "moderation": "low",
        "failure_policy": "best_effort",
        "action": "edit",
        "output_compression": 80,
        "partial_images": 2,
        "input_fidelity": "high",
    },
    "routing": {
        "provider": "mock",
        "model": "mock-image-1",
        "fallbacks": [{"provider": "ready"}, {"provider": "other-provider", "model": "model-x"}],
        "fallback_policy": "on_error",
    },
    "output": {
        "metadata": "sidecar_and_embedded",
        "directory": "dashboard/owls",
        "filename": "owl.webp",
        "collision": "suffix",
        "transparency": {
            "mode": "chroma_key",
            "key_color": "#00FF00",
            "transparent_threshold": 20,
            "opaque_threshold": 200,
            "despill": False,
        },
    },
    "policies": {
        "compatibility": "strict",
        "negative_prompt": "merge",
        "revised_prompt": "omit",
        "batch_execution": "sequential",
    },
    "timeout_ms": 120000,
    "idempotency_key": "owl-1",
    "user": "tester",
}

FORM_SCRIPT = """async ([values]) => {
  const form = await import('/dashboard/form.js');
  const checks = await import('/dashboard/checks.js');
  const { serverLimits } = await import('/dashboard/limits.js');
  const inputs = {
    images: [{dataUrl: 'data:image/png;base64,AAAA', name: 'a.png', size: 3}],
    mask: {dataUrl: 'data:image/png;base64,BBBB', name: 'm.png', size: 3},
    references: [{dataUrl: 'data:image/jpeg;base64,CCCC', name: '', size: 3}],
  };
  const defaults = form.defaultValues();
  const template = form.templateFromValues(values);
  return {
    request: form.buildRequest(values, inputs),
    minimal: form.buildRequest({...defaults, prompt: 'hello'}),
    template,
    roundTrip: form.valuesFromTemplate(template),
    issues: checks.checkValues(values, inputs, null, serverLimits()),
  };
}"""


def test_the_form_module_serializes_every_advanced_control(
    server: LiveServer, open_page: OpenPage
) -> None:
    page = open_page(server).page
    result = page.evaluate(FORM_SCRIPT, [FULL_VALUES])
    assert result["request"] == FULL_REQUEST
    # Defaults are not sent, except the dashboard's own: best_effort and sidecar metadata.
    assert result["minimal"] == {
        "operation": "generate",
        "prompt": "hello",
        "output": {"metadata": "sidecar"},
        "policies": {"compatibility": "best_effort"},
    }
    template = result["template"]
    assert "images" not in template and "mask" not in template
    assert "reference_images" not in template and "idempotency_key" not in template
    expected_round_trip = {**FULL_VALUES, "idempotency_key": ""}
    assert result["roundTrip"] == expected_round_trip
    assert result["issues"] == []


CHECK_SCRIPT = """async ([cases]) => {
  const form = await import('/dashboard/form.js');
  const checks = await import('/dashboard/checks.js');
  const { serverLimits } = await import('/dashboard/limits.js');
  return cases.map((overrides) => {
    const values = {...form.defaultValues(), prompt: 'x', ...overrides};
    return checks.checkValues(values, {}, null, serverLimits()).map((issue) => issue.field);
  });
}"""


def test_the_form_checks_mirror_the_bridge(server: LiveServer, open_page: OpenPage) -> None:
    page = open_page(server).page
    cases = [
        {"prompt": "   "},
        {"prompt": "é" * 65537},  # 131074 UTF-8 bytes
        {"operation": "edit"},
        {"filename": "one.png", "n": "2"},
        {"filename": "one.jpg"},
        {"fallbacks": "ready", "session_mode": "persistent", "session_key": "k"},
        {"fallbacks": "Not A Provider"},
        {"fallbacks": "a, b, c, d, e"},
        {"transparent_threshold": "96", "opaque_threshold": "12"},
        {"size": "custom", "size_custom": "64X64"},
        {"size": "custom", "size_custom": "64x64", "aspect_ratio": "16:9"},
        {"output_format": "png", "output_compression": "50"},
        {"collision": "suffix"},
        {"session_mode": "thread"},
        {"timeout_ms": "0"},
        {"negative_prompt": "fog", "negative_prompt_policy": "reject"},
        {"directory": "../up"},
        {"batch_execution": "parallel", "session_mode": "persistent", "session_key": "k"},
        {"prompt": "a" * 131072},
    ]
    fields = page.evaluate(CHECK_SCRIPT, [cases])
    assert fields == [
        ["prompt"],
        ["prompt"],
        ["images"],
        ["filename"],
        ["filename"],
        ["fallbacks"],
        ["fallbacks"],
        ["fallbacks"],
        ["transparent_threshold"],
        ["size_custom"],
        ["size"],
        ["output_compression"],
        ["collision"],
        ["thread_id"],
        ["timeout_ms"],
        ["negative_prompt"],
        ["directory"],
        ["batch_execution"],
        [],
    ]


CONSTRAINTS_SCRIPT = """async ([caps]) => {
  const capabilities = await import('/dashboard/capabilities.js');
  return capabilities.constraintsFor(caps);
}"""


def test_capability_constraints_of_an_app_server_like_provider(
    server: LiveServer, open_page: OpenPage
) -> None:
    page = open_page(server).page
    inputs = {"support": "native", "max_count": 5, "max_bytes_each": 1, "max_bytes_total": 2}
    caps = {
        "provider": "codex-app-server",
        "implementation_version": "1",
        "model": "gpt-image-2",
        "experimental": False,
        "generation": True,
        "edits": True,
        "count": {"min": 1, "max": 255},
        "batching": {
            "mode": "fan_out",
            "native_count": {"min": 1, "max": 1},
            "max_parallel_outputs": 4,
        },
        "sizes": {"auto": True, "arbitrary": False},
        "aspect_ratio": "unsupported",
        "resolution": "unsupported",
        "qualities": ["auto"],
        "output_formats": ["png"],
        "backgrounds": ["auto"],
        "transparent_background": "emulated",
        "moderation": ["auto"],
        "negative_prompt": "emulated",
        "revised_prompt": "unsupported",
        "user_attribution": "unsupported",
        "input_fidelities": ["high"],
        "actions": ["auto"],
        "reference_images": inputs,
        "edit_images": inputs,
        "masks": {
            "support": "unsupported",
            "max_count": 0,
            "max_bytes_each": 0,
            "max_bytes_total": 0,
        },
        "partial_images": {"min": 0, "max": 0},
        "persistent_sessions": True,
        "explicit_threads": True,
    }
    constraints = page.evaluate(CONSTRAINTS_SCRIPT, [caps])
    assert set(constraints["controls"]) == {
        "aspect_ratio",
        "resolution",
        "user",
        "mask",
        "partial_images",
    }
    assert set(constraints["locked"]) == {
        "quality",
        "output_format",
        "background",
        "moderation",
        "action",
        "size",
    }
    assert constraints["locked"]["output_format"]["value"] == "png"
    assert set(constraints["options"]["input_fidelity"]) == {"low"}
    assert set(constraints["options"]["transparency_mode"]) == {"native"}
    assert set(constraints["options"]["revised_prompt"]) == {"require"}
    assert set(constraints["options"]["negative_prompt_policy"]) == {"native"}
    assert "session_mode" not in constraints["options"]
    assert constraints["limits"]["n"] == {"min": 1, "max": 255}
    assert all(reason for reason in (rule["reason"] for rule in constraints["controls"].values()))
