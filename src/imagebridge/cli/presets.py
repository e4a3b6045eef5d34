"""Presets for the CLI: the shared store in ``server.jobs.database``, or a remote bridge.

Local commands go through the same :class:`~imagebridge.jobs.presets.PresetService` as the
HTTP API, so a template is validated identically (as a request with placeholders, against
the configured limits) whichever surface stores it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
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
    config: BridgeConfig, *, create: bool = True, env: Mapping[str, str] | None = None
) -> AsyncIterator[PresetService | None]:
    """The preset service over ``server.jobs.database`` (a SQLite file or a PostgreSQL URL,
    whose password variable is read from ``env``, default the process environment).

    ``None`` when the store does not exist yet and ``create`` is false: a read then creates
    no file and no PostgreSQL tables.
    """
    from imagebridge.application import request_limits
    from imagebridge.jobs.presets import PresetService
    from imagebridge.storage import (
        inspect_store_schema,
        is_postgres_url,
        open_preset_store,
        postgres_options,
    )
    from imagebridge.storage.location import resolve_store_location

    jobs = config.server.jobs
    location = jobs.database
    postgres = (
        postgres_options(jobs, os.environ if env is None else env)
        if is_postgres_url(location)
        else None
    )
    if not create:
        target = resolve_store_location(location, ErrorCode.INTERNAL, "preset database")
        if isinstance(target, Path):
            exists = await asyncio.to_thread(os.path.lexists, target)
        else:
            schema = await inspect_store_schema(target, "presets", postgres=postgres)
            exists = schema.initialized
        if not exists:
            yield None
            return
    store = await open_preset_store(location, postgres=postgres)
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
