"""Input images for the Codex providers: order, counts and byte bounds, checked before sending.

The engine loads the images (``load_request_inputs``); the Codex bounds are held here.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.inputs import LoadedInputs, load_request_inputs
from imagebridge.providers.codex.inputs import CodexInputBounds, codex_inputs
from tests.support.images import png_bytes


def b64_input(data: bytes) -> dict[str, Any]:
    return {"type": "base64", "data": base64.b64encode(data).decode()}


def edit(
    images: list[dict[str, Any]], references: list[dict[str, Any]] | None = None, **extra: Any
) -> ImageRequest:
    body: dict[str, Any] = {"operation": "edit", "prompt": "p", "images": images, **extra}
    if references:
        body["reference_images"] = references
    return ImageRequest.model_validate(body)


async def load(
    request: ImageRequest, tmp_path: Path, bounds: CodexInputBounds | None = None
) -> Any:
    loaded = await load_request_inputs(request, InputLoader([tmp_path]))
    return codex_inputs(request, loaded, bounds or CodexInputBounds(), provider="codex-responses")


async def test_sources_come_before_references_and_files_load_under_a_root(tmp_path: Path) -> None:
    red, blue = png_bytes(8, 8, (255, 0, 0)), png_bytes(8, 8, (0, 0, 255))
    (tmp_path / "ref.png").write_bytes(blue)

    inputs = await load(edit([b64_input(red)], [{"type": "file", "path": "ref.png"}]), tmp_path)

    assert inputs.sources == (("image/png", red),)
    assert inputs.references == (("image/png", blue),)
    assert inputs.present and "bytes" not in repr(inputs) and str(len(red)) not in repr(inputs)


async def test_a_generate_request_without_inputs_loads_nothing(tmp_path: Path) -> None:
    request = ImageRequest.model_validate({"operation": "generate", "prompt": "p"})

    inputs = await load(request, tmp_path)

    assert not inputs.present and inputs.all == ()


def test_counts_are_checked_before_the_images() -> None:
    missing = {"type": "file", "path": "does-not-exist.png"}

    def check(request: ImageRequest, bounds: CodexInputBounds) -> None:
        codex_inputs(request, LoadedInputs(), bounds, provider="codex-responses")

    with pytest.raises(BridgeError) as too_many:
        check(edit([missing] * 6), CodexInputBounds())
    with pytest.raises(BridgeError) as too_many_total:
        check(edit([missing] * 3, [missing] * 3), CodexInputBounds(max_total_count=5))

    assert too_many.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert too_many.value.details["field"] == "images"
    assert too_many_total.value.details == {
        "field": "reference_images",
        "requested": 6,
        "supported": 5,
    }


async def test_a_mask_is_refused_with_the_codex_code(tmp_path: Path) -> None:
    image = b64_input(png_bytes(8, 8, (1, 2, 3)))

    with pytest.raises(BridgeError) as caught:
        await load(edit([image], mask=image), tmp_path)

    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert caught.value.details["codex_code"] == "CODEX_RASTER_MASK_UNSUPPORTED"


async def test_byte_bounds_per_image_and_in_total(tmp_path: Path) -> None:
    small, large = png_bytes(8, 8, (1, 1, 1)), png_bytes(64, 64, (2, 2, 2))
    each = CodexInputBounds(max_bytes_each=len(large) - 1, max_bytes_total=10 * len(large))
    total = CodexInputBounds(max_bytes_each=len(large), max_bytes_total=len(large) + len(small) - 1)

    with pytest.raises(BridgeError) as too_large:
        await load(edit([b64_input(small), b64_input(large)]), tmp_path, each)
    with pytest.raises(BridgeError) as too_much:
        await load(edit([b64_input(large)], [b64_input(small)]), tmp_path, total)

    assert too_large.value.code is ErrorCode.INPUT
    assert too_large.value.details["field"] == "images[1]"
    assert too_much.value.details["field"] == "reference_images[0]"
    assert too_much.value.provider == "codex-responses"


def test_inputs_the_engine_did_not_load_are_never_sent() -> None:
    request = edit([b64_input(png_bytes(8, 8, (1, 2, 3)))])

    with pytest.raises(BridgeError) as caught:
        codex_inputs(request, LoadedInputs(), CodexInputBounds(), provider="codex-responses")

    assert caught.value.code is ErrorCode.INTERNAL
    assert caught.value.provider == "codex-responses"
