"""Presets for the CLI: the shared store in ``server.jobs.database``, or a remote bridge.

Local commands go through the same :class:`~imagebridge.jobs.presets.PresetService` as the
HTTP API, so a template is validated identically (as a request with placeholders, against
the configured limits) whichever surface stores it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from imagebridge.contract._base import decode_model
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.presets import ImagePresetTemplate
from imagebridge.contract.request import ImageRequest

if TYPE_CHECKING:
    from imagebridge.config import BridgeConfig
    from imagebridge.jobs.presets import PresetService

__all__ = ["TEMPLATE_MESSAGE", "local_presets", "parse_template_source", "preset_not_found"]

TEMPLATE_MESSAGE = "preset template must be an ImagePresetTemplate or an ImageRequest"
_REQUEST_ONLY_KEYS = frozenset({"version", "images", "mask", "reference_images", "idempotency_key"})


def preset_not_found(name: str) -> BridgeError:
    return BridgeError(
        ErrorCode.INVALID_REQUEST,
        "preset was not found",
        details={"resource": "preset", "name": name},
        suggestions=["List the stored presets with `imagegen-bridge preset list`."],
    )


@asynccontextmanager
async def local_presets(
    config: BridgeConfig, *, create: bool = True
) -> AsyncIterator[PresetService | None]:
    """The preset service over ``server.jobs.database``; ``None`` when the database does not
    exist and ``create`` is false (a read then needs no new file)."""
    from imagebridge.application import request_limits
    from imagebridge.jobs.presets import PresetService
    from imagebridge.storage.presets import SqlitePresetStore

    path = config.server.jobs.database
    if not create and not await asyncio.to_thread(os.path.lexists, path):
        yield None
        return
    store = await SqlitePresetStore.open(path)
    try:
        yield PresetService(store, request_limits(config))
    finally:
        await store.close()


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
