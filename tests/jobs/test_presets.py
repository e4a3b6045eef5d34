"""Preset service: CRUD semantics and template validation over a real SQLite preset store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.presets import ImagePresetCreate, ImagePresetTemplate, ImagePresetWrite
from imagebridge.engine.validation import RequestLimits
from imagebridge.jobs import PresetService, template_request
from imagebridge.storage import SqlitePresetStore
from tests.jobs.conftest import FakeClock


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlitePresetStore]:
    opened = await SqlitePresetStore.open(tmp_path / "jobs.sqlite3")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000)


@pytest.fixture
def service(store: SqlitePresetStore, clock: FakeClock) -> PresetService:
    return PresetService(store, RequestLimits(), clock=clock)


def create(name: str, template: dict[str, Any] | None = None, **extra: Any) -> ImagePresetCreate:
    return ImagePresetCreate.model_validate({"name": name, "template": template or {}, **extra})


def write(template: dict[str, Any] | None = None, **extra: Any) -> ImagePresetWrite:
    return ImagePresetWrite.model_validate({"template": template or {}, **extra})


async def test_created_presets_are_stored_with_every_default_expanded(
    service: PresetService, store: SqlitePresetStore
) -> None:
    preset = await service.create(
        create("portrait-high", {"parameters": {"quality": "high"}}, description="Portraits")
    )
    assert (preset.created, preset.updated) == (1_000, 1_000)
    assert preset.description == "Portraits"
    stored = (await store.get("portrait-high")).template()
    assert stored["operation"] == "generate"
    assert stored["parameters"]["quality"] == "high" and stored["parameters"]["n"] == 1
    assert stored["routing"] == {"fallback_policy": "on_unavailable"}
    assert stored["session"] == {"mode": "isolated"}
    assert stored["output"]["response_format"] == "b64_json"
    assert stored["policies"]["batch_execution"] == "auto"
    assert "prompt" not in stored
    assert await service.get("portrait-high") == preset


async def test_an_existing_name_is_a_conflict(service: PresetService) -> None:
    await service.create(create("fox"))
    with pytest.raises(BridgeError) as caught:
        await service.create(create("fox", {"prompt": "another"}))
    error = caught.value
    assert error.code is ErrorCode.IDEMPOTENCY_CONFLICT and error.http_status == 409
    assert error.message == "a preset with this name already exists"
    assert error.details == {"field": "name", "resource": "preset"}
    assert (await service.get("fox")).template.prompt is None


async def test_replace_keeps_created_and_clears_an_omitted_description(
    service: PresetService, clock: FakeClock
) -> None:
    await service.create(create("fox", {"prompt": "a fox"}, description="first"))
    clock.advance(10)
    replaced = await service.replace("fox", write({"prompt": "a red fox"}))
    assert (replaced.created, replaced.updated) == (1_000, 1_010)
    assert replaced.description is None and replaced.template.prompt == "a red fox"
    assert await service.get("fox") == replaced


async def test_missing_presets_are_not_found_on_every_route(service: PresetService) -> None:
    for operation in (
        service.get("ghost"),
        service.replace("ghost", write()),
        service.delete("ghost"),
    ):
        with pytest.raises(BridgeError) as caught:
            await operation
        assert caught.value.http_status == 404
        assert caught.value.message == "preset was not found"
        assert caught.value.details["resource"] == "preset"


async def test_deleted_presets_are_gone(service: PresetService) -> None:
    await service.create(create("fox"))
    await service.delete("fox")
    with pytest.raises(BridgeError) as caught:
        await service.get("fox")
    assert caught.value.http_status == 404


@pytest.mark.parametrize("name", ["", "-fox", ".fox", "fox/1", "f" * 65, "fóx", "fox bird"])
async def test_invalid_names_are_refused_on_every_route(service: PresetService, name: str) -> None:
    for operation in (
        service.create(ImagePresetCreate.model_validate({"name": name, "template": {}})),
        service.get(name),
        service.replace(name, write()),
        service.delete(name),
    ):
        with pytest.raises(BridgeError) as caught:
            await operation
        assert caught.value.http_status == 422 and caught.value.field == "name"


async def test_name_edge_cases_that_are_valid(service: PresetService) -> None:
    for name in ("a", "A0._-", "f" * 64):
        assert (await service.create(create(name))).name == name


@pytest.mark.parametrize("description", ["d" * 513, "line\nbreak", "tab\there", "é" * 257])
async def test_bad_descriptions_are_refused(service: PresetService, description: str) -> None:
    with pytest.raises(BridgeError) as caught:
        await service.create(create("fox", description=description))
    assert caught.value.http_status == 422 and caught.value.field == "description"
    await service.create(create("fox"))
    with pytest.raises(BridgeError) as on_replace:
        await service.replace("fox", write(description=description))
    assert on_replace.value.field == "description"


async def test_a_description_of_512_bytes_is_accepted(service: PresetService) -> None:
    preset = await service.create(create("fox", description="é" * 256))
    assert preset.description == "é" * 256


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t"])
async def test_a_blank_template_prompt_is_refused(service: PresetService, prompt: str) -> None:
    with pytest.raises(BridgeError) as caught:
        await service.create(create("fox", {"prompt": prompt}))
    assert caught.value.http_status == 422 and caught.value.field == "template.prompt"


async def test_templates_are_validated_with_the_configured_limits(
    store: SqlitePresetStore,
) -> None:
    roomy = PresetService(store, RequestLimits(max_outputs=255))
    preset = await roomy.create(create("batch", {"parameters": {"n": 40}}))
    assert preset.template.parameters.n == 40

    tight = PresetService(store, RequestLimits(max_outputs=4, max_prompt_bytes=8))
    with pytest.raises(BridgeError) as caught:
        await tight.create(create("too-many", {"prompt": "a long prompt", "parameters": {"n": 5}}))
    error = caught.value
    assert error.code is ErrorCode.INVALID_REQUEST and error.http_status == 422
    assert error.message == "preset template validation failed"
    fields = [issue["field"] for issue in error.details["issues"]]
    assert fields == ["template.parameters.n", "template.prompt"]
    with pytest.raises(BridgeError):
        await tight.get("too-many")


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ({"session": {"mode": "persistent"}}, "template.session.key"),
        ({"operation": "edit", "parameters": {"action": "generate"}}, "template.parameters.action"),
        ({"timeout_ms": 0}, "template.timeout_ms"),
        ({"output": {"filename_prefix": "fox"}}, "template.output.filename_prefix"),
    ],
)
async def test_templates_that_cannot_become_valid_requests_are_refused(
    service: PresetService, template: dict[str, Any], field: str
) -> None:
    with pytest.raises(BridgeError) as caught:
        await service.create(create("fox", template))
    assert [issue["field"] for issue in caught.value.details["issues"]] == [field]


@pytest.mark.parametrize(
    "template",
    [
        {"operation": "edit"},
        {"operation": "edit", "parameters": {"input_fidelity": "high"}},
        {"parameters": {"input_fidelity": "high"}},
        {"parameters": {"action": "edit"}},
        {"session": {"mode": "persistent", "key": "gallery"}},
    ],
)
async def test_templates_needing_an_input_image_get_a_placeholder(
    service: PresetService, template: dict[str, Any]
) -> None:
    preset = await service.create(create("fox", template))
    request = template_request(preset.template)
    assert request.prompt.strip()
    assert request.edit_images or request.reference_images or "operation" not in template
    built = preset.template.request("a caller prompt")
    assert built.prompt == "a caller prompt" and built.reference_images == []


async def test_listing_is_by_name_with_an_exclusive_cursor(service: PresetService) -> None:
    for name in ("delta", "alpha", "charlie", "bravo"):
        await service.create(create(name))
    first = await service.list(limit=3)
    assert [p.name for p in first.items] == ["alpha", "bravo", "charlie"]
    assert first.next_cursor is not None
    second = await service.list(limit=3, cursor=first.next_cursor)
    assert [p.name for p in second.items] == ["delta"] and second.next_cursor is None
    assert [p.name for p in (await service.list()).items] == ["alpha", "bravo", "charlie", "delta"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": 0}, "preset page limit must be between 1 and 100"),
        ({"limit": 101}, "preset page limit must be between 1 and 100"),
        ({"cursor": "%%%"}, "preset cursor is malformed"),
        ({"cursor": "LWZveA"}, "preset cursor is malformed"),  # "-fox": not a preset name
    ],
)
async def test_bad_list_queries_are_refused(
    service: PresetService, query: dict[str, Any], message: str
) -> None:
    with pytest.raises(BridgeError) as caught:
        await service.list(**query)
    assert caught.value.http_status == 422 and caught.value.message == message


def test_template_requests_use_the_stored_prompt() -> None:
    template = ImagePresetTemplate.model_validate({"prompt": "stored", "operation": "generate"})
    assert template_request(template).prompt == "stored"
