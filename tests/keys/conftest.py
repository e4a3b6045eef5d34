"""A key service on a real SQLite key store, and the requests and answers a charge sees."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.request import GenerationParameters, ImageRequest
from imagebridge.contract.response import ImageResponse, Timings
from imagebridge.engine.served import mark_served, merge_served
from imagebridge.keys import KeyService, KeyServiceSettings, read_create
from imagebridge.storage import SqliteKeyStore
from imagebridge.storage.records import KeyRecord
from tests.support.fakes import image_item
from tests.support.images import png_bytes

PNG = png_bytes()


@pytest.fixture
async def keys(tmp_path: Path) -> AsyncIterator[KeyService]:
    settings = KeyServiceSettings(slot_lease_secs=30, slot_poll_max_ms=50)
    service = KeyService(await SqliteKeyStore.open(tmp_path / "jobs.sqlite3"), settings)
    try:
        yield service
    finally:
        await service.aclose()


async def make_key(keys: KeyService, name: str, **limits: Any) -> KeyRecord:
    issued = await keys.create(read_create({"name": name, **limits}), actor="test")
    return await keys.get(issued.key.id)


def image_request(n: int = 1, provider: str | None = "mock", **routing: Any) -> ImageRequest:
    return ImageRequest.model_validate(
        {
            "operation": "generate",
            "prompt": "a paper fox",
            "parameters": {"n": n},
            "routing": {"provider": provider, **routing},
        }
    )


def image_response(
    images: int, *, provider: str = "mock", served: Mapping[str, int] | None = None
) -> ImageResponse:
    """An answer of ``images`` images, served by pool accounts ``{account: images}``."""
    response = ImageResponse(
        id="req-1",
        created=int(time.time()),
        provider=provider,
        model="test-image",
        requested=GenerationParameters(n=images),
        effective=GenerationParameters(n=images),
        data=[image_item(index, PNG) for index in range(images)],
        timings=Timings(provider_ms=1, total_ms=1),
    )
    parts = []
    for account, count in (served or {}).items():
        part = response.model_copy(update={"data": response.data[:count]})
        mark_served(part, account)
        parts.append(part)
    merge_served(response, parts)
    return response
