"""Local image files for requests: inline ``data_url`` inputs and multipart parts.

A ``file`` input names a path on the *bridge's* machine. To send a file from this machine
use :func:`file_input`, which reads it (bounded), checks that it is PNG, JPEG or WebP and
embeds it as a data URL. Reading is blocking; async code runs it in a worker thread.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path

from imagebridge.client._exceptions import BridgeAPIError
from imagebridge.client._request import FileField
from imagebridge.contract.errors import ErrorCode
from imagebridge.contract.request import ImageInput

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "ImageFile",
    "file_input",
    "multipart_files",
    "sniff_media_type",
]

DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024
"""Twice the bridge's default encoded-image limit: the bridge makes the final call."""

ImageFile = bytes | str | os.PathLike[str] | tuple[str, bytes] | tuple[str, bytes, str]
"""Bytes, a local path, ``(filename, bytes)`` or ``(filename, bytes, content_type)``."""


def sniff_media_type(data: bytes) -> str | None:
    """``image/png``, ``image/jpeg`` or ``image/webp`` from the magic bytes, else ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _input_error(message: str, **details: object) -> BridgeAPIError:
    return BridgeAPIError(
        ErrorCode.INPUT,
        message,
        details=details or None,
        suggestions=["Pass a readable PNG, JPEG or WebP file within the size limit."],
    )


def _read(path: str | os.PathLike[str], max_bytes: int) -> tuple[str, bytes]:
    target = Path(path)
    try:
        with target.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise _input_error("an input image file could not be read", filename=target.name) from exc
    if len(data) > max_bytes:
        raise _input_error(
            "an input image file exceeds the size limit",
            filename=target.name,
            maximum_bytes=max_bytes,
        )
    return target.name, data


def file_input(
    path: str | os.PathLike[str],
    *,
    filename: str | None = None,
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> ImageInput:
    """A local image file as an inline ``data_url`` :class:`ImageInput` (blocking)."""
    name, data = _read(path, max_bytes)
    media_type = sniff_media_type(data)
    if media_type is None:
        raise _input_error("an input image file is not PNG, JPEG or WebP", filename=name)
    encoded = base64.b64encode(data).decode("ascii")
    return ImageInput.from_payload(
        "data_url", f"data:{media_type};base64,{encoded}", filename=filename or name
    )


def _part(field_name: str, value: ImageFile, max_bytes: int) -> FileField:
    content_type: str | None = None
    if isinstance(value, bytes):
        name, data = "image", value
    elif isinstance(value, tuple):
        name, data = value[0], value[1]
        content_type = value[2] if len(value) == 3 else None
    else:
        name, data = _read(value, max_bytes)
    if len(data) > max_bytes:
        raise _input_error("an input image exceeds the size limit", maximum_bytes=max_bytes)
    media = content_type or sniff_media_type(data) or "application/octet-stream"
    return field_name, (name, data, media)


def multipart_files(
    images: Sequence[ImageFile],
    *,
    mask: ImageFile | None = None,
    reference_images: Sequence[ImageFile] = (),
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> list[FileField]:
    """The file parts of an OpenAI-style multipart edit (blocking for paths)."""
    if not images:
        raise BridgeAPIError(
            ErrorCode.INVALID_REQUEST,
            "a multipart edit requires at least one image",
            details={"field": "image"},
        )
    parts = [_part("image", item, max_bytes) for item in images]
    if mask is not None:
        parts.append(_part("mask", mask, max_bytes))
    parts.extend(_part("reference_image", item, max_bytes) for item in reference_images)
    return parts
