"""Local files as request inputs: inline data URLs and multipart parts."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from imagebridge.client import BridgeAPIError, ErrorCode, file_input
from imagebridge.client._inputs import multipart_files, sniff_media_type


def image_bytes(fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("fmt", "media"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")]
)
def test_file_input_embeds_the_image(tmp_path: Path, fmt: str, media: str) -> None:
    data = image_bytes(fmt)
    path = tmp_path / f"source.{fmt.lower()}"
    path.write_bytes(data)
    item = file_input(path)
    assert item.type == "data_url"
    assert item.filename == path.name
    header, encoded = item.payload.split(",", 1)
    assert header == f"data:{media};base64"
    assert base64.b64decode(encoded) == data
    assert sniff_media_type(data) == media


def test_file_input_refuses_non_images_oversize_and_missing_files(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(BridgeAPIError) as caught:
        file_input(text)
    assert caught.value.code is ErrorCode.INPUT
    big = tmp_path / "big.png"
    big.write_bytes(image_bytes("PNG"))
    with pytest.raises(BridgeAPIError) as caught:
        file_input(big, max_bytes=10)
    assert caught.value.details["maximum_bytes"] == 10
    with pytest.raises(BridgeAPIError) as caught:
        file_input(tmp_path / "missing.png")
    assert caught.value.details["filename"] == "missing.png"
    assert str(tmp_path) not in caught.value.message


def test_multipart_parts_name_and_type_each_file(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(image_bytes("PNG"))
    parts = multipart_files(
        [path, image_bytes("JPEG"), ("c.bin", b"raw", "application/octet-stream")],
        mask=("mask.png", image_bytes("PNG")),
        reference_images=[image_bytes("WEBP")],
    )
    assert [(name, part[0], part[2]) for name, part in parts] == [
        ("image", "a.png", "image/png"),
        ("image", "image", "image/jpeg"),
        ("image", "c.bin", "application/octet-stream"),
        ("mask", "mask.png", "image/png"),
        ("reference_image", "image", "image/webp"),
    ]
