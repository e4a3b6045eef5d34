"""Local ``file`` inputs become verified inline images; nothing else in the request moves."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from imagebridge.artifacts.inputs.inline import inline_file_inputs
from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from tests.artifacts.images import jpeg, png


def _file(path: Path) -> dict[str, str]:
    return {"type": "file", "path": str(path), "filename": path.name}


def _data_url(data: bytes) -> dict[str, str]:
    return {
        "type": "data_url",
        "data_url": "data:image/png;base64," + base64.b64encode(data).decode(),
    }


async def test_every_file_input_is_inlined_and_other_inputs_are_kept(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(png(2, 3))
    (tmp_path / "mask.png").write_bytes(png(2, 3, (0, 0, 0, 255)))
    (tmp_path / "ref.jpg").write_bytes(jpeg(4, 4))
    kept = _data_url(png(1, 1))
    request = ImageRequest.model_validate(
        {
            "prompt": "x",
            "operation": "edit",
            "images": [_file(tmp_path / "a.png"), kept],
            "mask": _file(tmp_path / "mask.png"),
            "reference_images": [_file(tmp_path / "ref.jpg")],
        }
    )

    resolved = await inline_file_inputs(request, InputLoader([tmp_path]))

    first, second = resolved.images or []
    assert first.type == "base64" and first.media_type == "image/png"
    assert first.filename == "a.png"
    assert base64.b64decode(first.payload) == (tmp_path / "a.png").read_bytes()
    assert second == (request.images or [])[1]
    assert resolved.mask is not None and resolved.mask.type == "base64"
    assert base64.b64decode(resolved.mask.payload) == (tmp_path / "mask.png").read_bytes()
    (reference,) = resolved.reference_images or []
    assert reference.type == "base64" and reference.media_type == "image/jpeg"
    assert resolved.prompt == "x" and request.images is not None
    assert request.images[0].type == "file"  # the caller's request is not modified


async def test_a_request_without_file_inputs_is_returned_as_is(tmp_path: Path) -> None:
    request = ImageRequest.model_validate(
        {"prompt": "x", "operation": "edit", "images": [_data_url(png(1, 1))]}
    )
    assert await inline_file_inputs(request, InputLoader([tmp_path])) is request


async def test_files_outside_the_loader_roots_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.png").write_bytes(png(1, 1))
    request = ImageRequest.model_validate(
        {"prompt": "x", "operation": "edit", "images": [_file(tmp_path / "outside.png")]}
    )
    with pytest.raises(BridgeError) as caught:
        await inline_file_inputs(request, InputLoader([root]))
    assert caught.value.code is ErrorCode.INPUT
