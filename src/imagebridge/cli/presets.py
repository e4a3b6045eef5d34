"""Presets for the CLI: the shared SQLite store (``server.jobs.database``) or a remote bridge.

Templates are checked the way the server checks them: a template is turned into a request
with a placeholder prompt (and a placeholder image for edit templates) and validated
against the configured request limits, so a preset the CLI accepts is one the API and
dashboard accept too.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import TYPE_CHECKING, Any

from imagebridge.contract._base import decode_model
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.presets import ImagePresetTemplate
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.validation import RequestLimits, validate_request

if TYPE_CHECKING:
    from imagebridge.config import BridgeConfig
    from imagebridge.storage.base import PresetRecord
    from imagebridge.storage.presets import SqlitePresetStore

__all__ = [
    "TEMPLATE_MESSAGE",
    "open_store",
    "parse_template_source",
    "preset_not_found",
    "record_to_wire",
    "validate_template",
]

TEMPLATE_MESSAGE = "preset template must be an ImagePresetTemplate or an ImageRequest"
_PLACEHOLDER_PROMPT = "preset validation placeholder"
_PLACEHOLDER_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
_REQUEST_ONLY_KEYS = frozenset({"version", "images", "mask", "reference_images", "idempotency_key"})


def preset_not_found(name: str) -> BridgeError:
    return BridgeError.invalid_request("preset was not found", resource="preset", name=name)


async def open_store(config: BridgeConfig, *, create: bool = True) -> SqlitePresetStore | None:
    """The preset store in the jobs database; ``None`` when it does not exist and
    ``create`` is false (reads then need not create a database)."""
    from imagebridge.storage.presets import SqlitePresetStore

    path = config.server.jobs.database
    if not create and not await asyncio.to_thread(os.path.lexists, path):
        return None
    return await SqlitePresetStore.open(path)


def record_to_wire(record: PresetRecord) -> dict[str, Any]:
    """A stored preset in the API's ``ImagePreset`` shape."""
    body: dict[str, Any] = {"name": record.name}
    if record.description is not None:
        body["description"] = record.description
    body["template"] = record.template()
    body["created"] = record.created_at
    body["updated"] = record.updated_at
    return body


def parse_template_source(data: bytes) -> ImagePresetTemplate:
    """``--from`` content: a template, or a full request reduced to its reusable fields."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        raise BridgeError.invalid_request(TEMPLATE_MESSAGE) from None
    if isinstance(document, dict) and _REQUEST_ONLY_KEYS & document.keys():
        request = decode_model(ImageRequest, document, TEMPLATE_MESSAGE)
        return ImagePresetTemplate.from_request(request)
    return decode_model(ImagePresetTemplate, document, TEMPLATE_MESSAGE)


def validate_template(template: ImagePresetTemplate, limits: RequestLimits) -> None:
    """Reject a template that could never become a valid request."""
    if template.prompt is not None and not template.prompt.strip():
        raise BridgeError.invalid_request(
            "template prompt must not be blank", field="template.prompt"
        )
    data = template.model_dump(mode="json")
    data["prompt"] = template.prompt if template.prompt is not None else _PLACEHOLDER_PROMPT
    if template.operation.value == "edit":
        data["images"] = [{"type": "base64", "data": _PLACEHOLDER_PNG, "filename": "image.png"}]
    request = decode_model(ImageRequest, data, TEMPLATE_MESSAGE)
    validate_request(request, limits)


def now() -> int:
    return int(time.time())
