"""The composer in Chromium: generations, edits with uploads, checks, capabilities, presets."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from playwright.sync_api import expect

from tests.dashboard.conftest import (
    BridgeFactory,
    Dashboard,
    OpenPage,
    jobs_with_prompt,
)
from tests.server.conftest import LiveServer
from tests.server.doubles import with_mock
from tests.support.fakes import FakeProvider
from tests.support.images import noise_png, png_bytes

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    """The mock, a restricted provider ("ready": 1–2 images, auto size, png only) and one
    that takes only tiny input files ("tiny")."""
    tiny_inputs = {
        "support": "native",
        "max_count": 2,
        "max_bytes_each": 1000,
        "max_bytes_total": 1500,
    }
    tiny = FakeProvider("tiny", caps={"edit_images": tiny_inputs, "reference_images": tiny_inputs})
    return bridge(providers=with_mock(FakeProvider("ready"), tiny))


def small_size(dashboard: Dashboard, size: str = "32x32") -> None:
    dashboard.page.select_option("#f-size", "custom")
    dashboard.page.fill("#f-size_custom", size)


def run_slots(dashboard: Dashboard, state: str) -> Any:
    return dashboard.page.locator(f"#run-images .run-slot[data-state='{state}']")


def test_a_generation_of_two_images_shows_both(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    prompt = "two paper cranes over a pond"
    page.fill("#f-prompt", prompt)
    page.fill("#f-n", "2")
    small_size(dashboard)
    page.get_by_role("button", name="Generate").click()
    expect(page.locator("#toast")).to_contain_text("Job queued")
    expect(run_slots(dashboard, "done")).to_have_count(2)
    expect(page.locator("#run-status")).to_contain_text("Done: 2 images from mock · mock-image-1")
    tiles = dashboard.tile(prompt)
    expect(tiles).to_have_count(2)
    expect(tiles.locator(".tile-meta")).to_have_text(["mock · 32×32 · PNG"] * 2)
    expect(tiles.locator(".tile-count")).to_have_text(["1/2", "2/2"])
    for index in range(2):
        expect(tiles.nth(index).locator(".tile-image")).to_have_attribute(
            "src", re.compile(r"^blob:")
        )

    page.locator("#run-details").click()
    dialog = page.locator("#job-dialog")
    images = dialog.locator("figure.output img")
    expect(images).to_have_count(2)
    for index in range(2):
        expect(images.nth(index)).to_have_attribute("src", re.compile(r"^blob:"))
    page.wait_for_function(
        "[...document.querySelectorAll('#job-dialog figure.output img')]"
        ".every((img) => img.complete && img.naturalWidth === 32)"
    )
    expect(dialog).to_contain_text("Requested and effective parameters")
    expect(dialog.locator(".raw summary")).to_have_text("Raw metadata")

    stored = jobs_with_prompt(server, prompt)
    assert len(stored) == 1
    request = stored[0]["request"]
    assert request["parameters"]["n"] == 2 and request["parameters"]["size"] == "32x32"
    assert request["policies"]["compatibility"] == "best_effort"  # the dashboard's default
    assert request["output"]["metadata"] == "sidecar"  # the dashboard's default
    assert request["output"]["response_format"] == "artifact"
    outputs = stored[0]["result"]["data"]
    names = [output["name"] for output in outputs]
    assert all(output.get("metadata_name") for output in outputs)

    # The dialog shows 1024-px previews; a full image is fetched only when asked for.
    def artifact_gets(suffix: str) -> int:
        return sum(
            1
            for method, url in dashboard.watch.requests
            if method == "GET" and "/v1/artifacts/" in url and url.endswith(suffix)
        )

    for output in outputs:
        assert artifact_gets(f"/v1/artifacts/{output['id']}/thumbnail?edge=1024") == 1
        assert artifact_gets(f"/v1/artifacts/{output['id']}") == 0
    with page.expect_download() as downloaded:
        dialog.get_by_role("button", name="Download").first.click()
    assert downloaded.value.suggested_filename == names[0].rsplit("/", 1)[-1]
    with server.client() as client:
        original = client.get(f"/v1/artifacts/{outputs[0]['id']}").content
    assert Path(downloaded.value.path()).read_bytes() == original
    with page.context.expect_page() as opened:
        dialog.locator("figure.output .image-button").first.click()
    opened.value.wait_for_url(re.compile(r"^blob:"))
    opened.value.close()
    assert artifact_gets(f"/v1/artifacts/{outputs[0]['id']}") == 1  # fetched once, reused
    dialog.get_by_role("button", name="Copy path").first.click()
    expect(page.locator("#toast")).to_contain_text(names[0])
    dashboard.watch.assert_clean()


def test_an_edit_sends_the_uploaded_image_mask_and_reference(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    prompt = "make the square warmer"
    page.fill("#f-prompt", prompt)
    page.select_option("#f-operation", "edit")
    expect(page.get_by_role("button", name="Edit", exact=True)).to_be_visible()
    source = png_bytes(24, 24, (10, 120, 240))
    page.set_input_files(
        "#f-images", files=[{"name": "source.png", "mimeType": "image/png", "buffer": source}]
    )
    expect(page.locator("#hint-images")).to_contain_text("1 image selected")
    mask = png_bytes(24, 24, (0, 0, 0, 0), mode="RGBA")
    page.set_input_files(
        "#f-mask", files=[{"name": "mask.png", "mimeType": "image/png", "buffer": mask}]
    )
    expect(page.locator("#hint-mask")).to_contain_text("1 image selected")
    reference_buffer = io.BytesIO()
    Image.new("RGB", (20, 20), (250, 200, 20)).save(reference_buffer, format="JPEG")
    reference = reference_buffer.getvalue()
    page.set_input_files(
        "#f-references",
        files=[{"name": "look.jpg", "mimeType": "image/jpeg", "buffer": reference}],
    )
    expect(page.locator("#hint-references")).to_contain_text("1 image selected")
    small_size(dashboard, "24x24")
    expect(page.locator("#source-caption")).to_have_text(f"source.png · 24×24 · {len(source)} B")
    page.get_by_role("button", name="Edit", exact=True).click()
    expect(run_slots(dashboard, "done")).to_have_count(1)
    expect(page.locator("#run-images .run-source img")).to_have_attribute(
        "src", re.compile(r"^data:image/png;base64,")
    )
    expect(dashboard.tile(prompt)).to_have_attribute("data-status", "succeeded")

    stored = jobs_with_prompt(server, prompt)[0]
    assert stored["request"]["operation"] == "edit"
    image = stored["request"]["images"][0]
    assert image["type"] == "data_url" and image["filename"] == "source.png"
    assert image["data_url"] == "data:image/png;base64," + base64.b64encode(source).decode()
    sent_mask = stored["request"]["mask"]
    assert sent_mask["data_url"] == "data:image/png;base64," + base64.b64encode(mask).decode()
    [sent_reference] = stored["request"]["reference_images"]
    assert sent_reference["data_url"] == (
        "data:image/jpeg;base64," + base64.b64encode(reference).decode()
    )
    assert stored["result"]["data"][0]["width"] == 24
    page.locator("#run-details").click()
    expect(page.locator("#job-dialog")).to_contain_text("edit")
    expect(page.locator("#job-dialog figure.output img")).to_have_attribute(
        "src", re.compile(r"^blob:")
    )
    dashboard.watch.assert_clean()


def test_a_file_that_is_not_an_image_is_refused_on_selection(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    page.select_option("#f-operation", "edit")
    page.set_input_files(
        "#f-images", files=[{"name": "notes.png", "mimeType": "image/png", "buffer": b"not a png"}]
    )
    expect(page.locator("#hint-images")).to_contain_text("is not a PNG, JPEG or WebP image")
    page.fill("#f-prompt", "anything")
    page.get_by_role("button", name="Edit", exact=True).click()
    expect(page.locator("#form-errors")).to_contain_text("An edit needs at least one image.")
    assert dashboard.watch.posted_jobs() == 0


def test_files_beyond_the_provider_s_limit_are_not_read(
    server: LiveServer, open_page: OpenPage
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    page.select_option("#f-provider", "tiny")
    expect(page.locator("#provider-note")).to_contain_text("1–2 images")
    page.select_option("#f-operation", "edit")
    big = noise_png(32, 32)
    assert len(big) > 1000
    page.set_input_files(
        "#f-images", files=[{"name": "big.png", "mimeType": "image/png", "buffer": big}]
    )
    expect(page.locator("#hint-images")).to_have_text("big.png is larger than 1000 B.")
    expect(page.locator("#hint-images")).to_have_class(re.compile(r"\binvalid\b"))
    page.fill("#f-prompt", "too big to send")
    page.get_by_role("button", name="Edit", exact=True).click()
    expect(page.locator("#form-errors")).to_contain_text("An edit needs at least one image.")
    assert dashboard.watch.posted_jobs() == 0
    dashboard.watch.assert_clean()


def test_a_request_beyond_the_bridge_s_body_limit_is_not_sent(
    bridge: BridgeFactory, open_page: OpenPage
) -> None:
    small = bridge("server.max_body_bytes=8192")
    dashboard = open_page(small)
    page = dashboard.page
    page.select_option("#f-operation", "edit")
    page.set_input_files(
        "#f-images",
        files=[{"name": "noise.png", "mimeType": "image/png", "buffer": noise_png(48, 48)}],
    )
    expect(page.locator("#hint-images")).to_contain_text("1 image selected")
    page.fill("#f-prompt", "an edit too large for this bridge")
    page.get_by_role("button", name="Edit", exact=True).click()
    expect(page.locator("#form-errors")).to_contain_text("this bridge accepts at most 8.0 KiB")
    assert dashboard.watch.posted_jobs() == 0
    dashboard.watch.assert_clean()


def test_the_composer_counts_against_the_bridge_s_own_prompt_limit(
    bridge: BridgeFactory, open_page: OpenPage
) -> None:
    small = bridge("runtime.request.max_prompt_bytes=64", "runtime.request.max_inputs=1")
    dashboard = open_page(small)
    page = dashboard.page
    page.fill("#f-prompt", "é" * 32)  # 64 UTF-8 bytes: exactly the limit
    counter = page.locator("#prompt-count")
    expect(counter).to_have_text("64 / 64 bytes")
    expect(counter).not_to_have_class(re.compile(r"\binvalid\b"))
    page.fill("#f-prompt", "é" * 32 + "a")
    expect(counter).to_have_text("65 / 64 bytes")
    expect(counter).to_have_class(re.compile(r"\binvalid\b"))
    page.locator("#submit-button").click()
    expect(page.locator("#form-errors")).to_contain_text("The prompt is 65 bytes; the limit is 64.")
    expect(page.locator("#f-prompt")).to_be_focused()
    assert dashboard.watch.posted_jobs() == 0
    # The bridge's other bounds reach the page the same way.
    limits = page.evaluate("async () => (await import('/dashboard/limits.js')).serverLimits()")
    assert limits["prompt_bytes"] == 64 and limits["inputs"] == 1
    dashboard.watch.assert_clean()


@pytest.mark.parametrize(
    ("steps", "message", "focused"),
    [
        ([("select", "#f-operation", "edit")], "An edit needs at least one image.", None),
        (
            [("fill", "#f-n", "2"), ("more",), ("fill", "#f-filename", "hero.png")],
            "An exact filename needs exactly one image",
            "#f-filename",
        ),
        (
            [
                ("more",),
                ("fill", "#f-fallbacks", "ready"),
                ("select", "#f-session_mode", "persistent"),
                ("fill", "#f-session_key", "k1"),
            ],
            "Fallback routes need an isolated session.",
            "#f-fallbacks",
        ),
        (
            [
                ("more",),
                ("fill", "#f-transparent_threshold", "96"),
                ("fill", "#f-opaque_threshold", "12"),
            ],
            "The transparent threshold must be below the opaque threshold.",
            "#f-transparent_threshold",
        ),
        ([("fill", "#f-prompt", "x" * 131073)], "the limit is 131072", "#f-prompt"),
    ],
)
def test_client_side_checks_stop_a_bad_submission(
    server: LiveServer,
    open_page: OpenPage,
    steps: list[tuple[str, ...]],
    message: str,
    focused: str | None,
) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    page.fill("#f-prompt", "a checked prompt")
    for step in steps:
        if step[0] == "more":
            dashboard.open_more()
        elif step[0] == "select":
            page.select_option(step[1], step[2])
        else:
            page.fill(step[1], step[2])
    page.locator("#submit-button").click()
    errors = page.locator("#form-errors")
    expect(errors).to_be_visible()
    expect(errors).to_contain_text(message)
    if focused:
        expect(page.locator(focused)).to_be_focused()
        expect(page.locator(focused)).to_have_attribute("aria-invalid", "true")
    assert dashboard.watch.posted_jobs() == 0
    dashboard.watch.assert_clean()


def test_the_bridge_s_own_refusal_is_explained(server: LiveServer, open_page: OpenPage) -> None:
    """A rule the form does not mirror (embedded metadata needs a short prompt): the 422's
    issues are listed and the control behind each is marked."""
    dashboard = open_page(server, allow=((422, r"^/v1/jobs$"),))
    page = dashboard.page
    page.fill("#f-prompt", "long " * 2600)  # 13,000 bytes: fine for a prompt, not for XMP
    dashboard.open_more()
    page.select_option("#f-metadata", "embedded")
    page.locator("#submit-button").click()
    errors = page.locator("#form-errors")
    expect(errors).to_contain_text("The bridge refused the request: request validation failed")
    expect(errors).to_contain_text("output.metadata")
    expect(page.locator("#f-metadata")).to_have_attribute("aria-invalid", "true")
    expect(errors.locator(".suggestions li").first).not_to_be_empty()
    assert dashboard.watch.posted_jobs() == 1
    dashboard.watch.assert_clean()


def test_an_unknown_model_is_explained(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server, allow=((400, r"^/v1/providers/mock/capabilities"),))
    page = dashboard.page
    page.fill("#f-model", "no-such-model")
    page.locator("#f-model").dispatch_event("change")
    expect(page.locator("#hint-model")).to_have_text("mock does not serve this model.")
    expect(page.locator("#provider-note")).to_contain_text("mock-image-1")
    dashboard.watch.assert_clean()


def test_capabilities_drive_the_form(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server)
    page = dashboard.page
    dashboard.open_more()
    aspect = page.locator("#f-aspect_ratio")
    expect(aspect).to_be_disabled()  # the mock has no aspect ratio either
    expect(page.locator("#hint-aspect_ratio")).to_have_text(
        "This provider does not support aspect ratios."
    )
    expect(page.locator("#f-quality")).to_be_enabled()
    expect(page.locator("#f-n")).to_have_attribute("max", "255")

    page.select_option("#f-provider", "ready")
    expect(page.locator("#provider-note")).to_contain_text("1–2 images")
    quality = page.locator("#f-quality")
    expect(quality).to_be_disabled()
    expect(quality).to_have_attribute("title", "This provider always uses quality auto.")
    expect(page.locator("#f-output_format")).to_have_value("png")
    expect(page.locator("#f-output_format")).to_be_disabled()
    expect(page.locator("#f-partial_images")).to_be_disabled()
    expect(page.locator("#hint-partial_images")).to_contain_text("does not stream partial")
    expect(page.locator("#f-user")).to_be_disabled()
    expect(page.locator("#hint-user")).to_contain_text("does not accept user attribution")
    expect(page.locator("#f-session_mode option[value='persistent']")).to_be_disabled()
    expect(page.locator("#f-session_mode option[value='thread']")).to_have_attribute(
        "title", "This provider has no explicit threads."
    )
    expect(page.locator("#hint-session_mode")).to_contain_text("Not available with this provider")
    expect(page.locator("#f-n")).to_have_attribute("max", "2")
    page.select_option("#f-operation", "edit")
    expect(page.locator("#f-mask")).to_be_disabled()
    expect(page.locator("#hint-mask")).to_have_text("This provider does not accept masks.")

    page.select_option("#f-operation", "generate")
    page.fill("#f-prompt", "three is too many")
    page.fill("#f-n", "3")
    page.locator("#submit-button").click()
    expect(page.locator("#form-errors")).to_contain_text(
        "Images must be a whole number from 1 to 2"
    )

    assert dashboard.watch.posted_jobs() == 0

    prompt = "routed to the restricted provider"
    page.fill("#f-prompt", prompt)
    page.fill("#f-n", "1")
    page.locator("#submit-button").click()
    expect(page.locator("#run-status")).to_contain_text("Done: 1 image from ready · test-image")
    expect(dashboard.tile(prompt)).to_have_attribute("data-status", "succeeded")
    request = jobs_with_prompt(server, prompt)[0]["request"]
    assert request["routing"]["provider"] == "ready"
    assert request["parameters"]["quality"] == "auto"  # locked to the provider's only value

    page.select_option("#f-provider", "mock")
    expect(page.locator("#f-quality")).to_be_enabled()
    expect(page.locator("#f-user")).to_be_enabled()
    expect(page.locator("#f-session_mode option[value='persistent']")).to_be_enabled()
    dashboard.watch.assert_clean()


def test_presets_save_apply_edit_and_delete(server: LiveServer, open_page: OpenPage) -> None:
    dashboard = open_page(server, allow=((404, r"^/v1/presets/"),))
    page = dashboard.page
    page.fill("#f-prompt", "a preset prompt")
    dashboard.open_more()
    page.select_option("#f-quality", "high")
    page.select_option("#f-output_format", "webp")
    page.fill("#f-output_compression", "80")
    small_size(dashboard, "96x64")
    page.select_option("#f-metadata", "none")

    page.get_by_role("button", name="Save as…").click()
    preset_dialog = page.locator("#preset-dialog")
    page.fill("#preset-name", "-bad name")
    preset_dialog.get_by_role("button", name="Save").click()
    expect(page.locator("#preset-message")).to_contain_text("A preset name is 1–64")
    page.fill("#preset-name", "web-hero")
    page.fill("#preset-description", "d" * 513)
    preset_dialog.get_by_role("button", name="Save").click()
    expect(page.locator("#preset-message")).to_contain_text("A description has at most 512")
    assert not any(
        method == "POST" for method, url in dashboard.watch.requests if "/v1/presets" in url
    )
    page.fill("#preset-description", "WebP heroes")
    preset_dialog.get_by_role("button", name="Save").click()
    expect(preset_dialog).to_be_hidden()
    expect(page.locator("#preset-select")).to_have_value("web-hero")

    with server.client() as client:
        stored = client.get("/v1/presets/web-hero").json()
    assert stored["description"] == "WebP heroes"
    assert stored["template"]["prompt"] == "a preset prompt"
    assert stored["template"]["parameters"]["output_compression"] == 80
    assert stored["template"]["output"]["metadata"] == "none"

    page.get_by_role("button", name="Reset form").click()
    expect(page.locator("#f-prompt")).to_have_value("")
    expect(page.locator("#f-quality")).to_have_value("auto")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#f-prompt")).to_have_value("a preset prompt")
    expect(page.locator("#f-quality")).to_have_value("high")
    expect(page.locator("#f-output_format")).to_have_value("webp")
    expect(page.locator("#f-output_compression")).to_have_value("80")
    expect(page.locator("#f-size")).to_have_value("custom")
    expect(page.locator("#f-size_custom")).to_have_value("96x64")
    expect(page.locator("#f-metadata")).to_have_value("none")

    page.select_option("#f-quality", "low")
    page.get_by_role("button", name="Edit…").click()
    expect(page.locator("#preset-name")).to_have_value("web-hero")
    page.fill("#preset-description", "Low-quality WebP heroes")
    preset_dialog.get_by_role("button", name="Save").click()
    expect(preset_dialog).to_be_hidden()
    with server.client() as client:
        edited = client.get("/v1/presets/web-hero").json()
    assert edited["description"] == "Low-quality WebP heroes"
    assert edited["template"]["parameters"]["quality"] == "low"

    page.get_by_role("button", name="Delete").click()
    confirm = page.locator("#confirm-dialog")
    expect(confirm).to_contain_text("Delete the preset web-hero?")
    confirm.get_by_role("button", name="Keep").click()
    with server.client() as client:
        assert client.get("/v1/presets/web-hero").status_code == 200
    page.get_by_role("button", name="Delete").click()
    confirm.get_by_role("button", name="Delete").click()
    expect(page.locator("#preset-select option[value='web-hero']")).to_have_count(0)
    with server.client() as client:
        assert client.get("/v1/presets/web-hero").status_code == 404
    dashboard.watch.assert_clean()
