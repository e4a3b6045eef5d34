"""Image arguments of the MCP tools: local paths confined to ``inputs.local_roots``, or
data URLs. Local files are read on this side (never by a remote bridge) and sent inline, by
:func:`~imagebridge.artifacts.inputs.inline.inline_file_inputs` (re-exported here)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from imagebridge.artifacts.inputs.inline import inline_file_inputs
from imagebridge.contract.errors import BridgeError, ErrorCode

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
