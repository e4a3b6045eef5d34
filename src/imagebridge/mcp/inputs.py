"""Image arguments of the MCP tools: local paths confined to ``inputs.local_roots``, or
data URLs. Local files are read here (never by a remote bridge) and sent inline."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from imagebridge.artifacts.inputs import InputLoader
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageInput, ImageRequest

__all__ = ["describe_inputs", "inline_file_inputs"]

MAX_INPUT_ARGUMENT_CHARS = 96 * 1024 * 1024


def _input_from_argument(value: str, field: str) -> dict[str, Any]:
    """A tool argument as an ``ImageInput`` mapping (validated later with the request)."""
    if not isinstance(value, str) or not value.strip():
        raise BridgeError.invalid_request(
            "an image argument must be a non-empty string", field=field
        )
    if len(value) > MAX_INPUT_ARGUMENT_CHARS:
        raise BridgeError(
            ErrorCode.INPUT, "an image argument exceeds the size limit", details={"field": field}
        )
    if value.startswith("data:"):
        return {"type": "data_url", "data_url": value}
    path = value
    if value.startswith("file://"):
        parts = urlsplit(value)
        if parts.netloc not in ("", "localhost"):
            raise BridgeError(
                ErrorCode.INPUT, "file URLs must name a local file", details={"field": field}
            )
        path = unquote(parts.path)
    path = os.path.expanduser(path)
    name = os.path.basename(path)
    safe = 0 < len(name) <= 160 and name.isprintable() and "\\" not in name
    return {"type": "file", "path": path, "filename": name if safe else None}


def describe_inputs(
    images: Sequence[str] | None, mask: str | None, references: Sequence[str] | None
) -> dict[str, Any]:
    """The ``images``/``mask``/``reference_images`` keys of a request from tool arguments."""
    data: dict[str, Any] = {}
    if images is not None:
        data["images"] = [_input_from_argument(v, f"images[{i}]") for i, v in enumerate(images)]
    if mask is not None:
        data["mask"] = _input_from_argument(mask, "mask")
    if references:
        data["reference_images"] = [
            _input_from_argument(v, f"reference_images[{i}]") for i, v in enumerate(references)
        ]
    return data


async def inline_file_inputs(request: ImageRequest, loader: InputLoader) -> ImageRequest:
    """Replace ``file`` inputs by verified inline images (the loader enforces the roots)."""
    if not any(item.type == "file" for _, item in request.all_inputs()):
        return request

    async def inline(item: ImageInput) -> ImageInput:
        if item.type != "file":
            return item
        loaded = await loader.aload("file", item.payload, filename=item.filename)
        encoded = await asyncio.to_thread(base64.b64encode, loaded.data)
        return ImageInput.from_payload(
            "base64",
            encoded.decode("ascii"),
            media_type=loaded.info.media_type,
            filename=item.filename,
        )

    update: dict[str, Any] = {}
    if request.images is not None:
        update["images"] = [await inline(item) for item in request.images]
    if request.mask is not None:
        update["mask"] = await inline(request.mask)
    if request.reference_images:
        update["reference_images"] = [await inline(item) for item in request.reference_images]
    return request.model_copy(update=update)
