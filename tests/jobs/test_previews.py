"""Partial previews: only verified, bounded images are kept, and only for running jobs."""

from __future__ import annotations

import base64

import pytest

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.events import PartialImageEvent
from imagebridge.jobs.previews import PreviewCache, decode_preview
from imagebridge.providers.mock import render_image

KEY = ("anonymous-local", "01900000-0000-7000-8000-000000000001")


def event(data: bytes | str, *, index: int = 1, partial: int = 2) -> PartialImageEvent:
    encoded = data if isinstance(data, str) else base64.b64encode(data).decode()
    return PartialImageEvent(index=index, partial_index=partial, b64_json=encoded)


@pytest.mark.parametrize("output_format", list(OutputFormat))
def test_valid_previews_are_decoded_with_their_media_type(output_format: OutputFormat) -> None:
    data = render_image("fox", 0, 12, 8, output_format)
    preview = decode_preview(event(data), 1024 * 1024)
    assert preview is not None
    assert preview.data == data and preview.media_type == output_format.media_type
    assert (preview.output_index, preview.partial_index) == (1, 2)


@pytest.mark.parametrize(
    "payload",
    [
        "not base64!",
        base64.b64encode(b"plain text, not an image").decode(),
        base64.b64encode(render_image("fox", 0, 8, 8, OutputFormat.PNG)[:-20]).decode(),
        "",
    ],
)
def test_invalid_previews_are_ignored(payload: str) -> None:
    assert decode_preview(event(payload), 1024 * 1024) is None


def test_previews_above_the_bound_are_ignored() -> None:
    data = render_image("fox", 0, 32, 32, OutputFormat.PNG)
    assert decode_preview(event(data), len(data)) is not None
    assert decode_preview(event(data), len(data) - 1) is None
    oversized_text = "A" * (4 * (len(data) // 3 + 8))
    assert decode_preview(event(oversized_text), len(data)) is None


async def test_the_cache_keeps_the_latest_valid_preview_of_open_jobs() -> None:
    cache = PreviewCache(1024 * 1024)
    first = render_image("fox", 0, 8, 8, OutputFormat.PNG)
    assert await cache.offer(KEY, event(first)) is False  # not running: dropped
    cache.open(KEY)
    assert await cache.offer(KEY, event(first, partial=0)) is True
    assert await cache.offer(KEY, event("garbage")) is False
    kept = cache.get(KEY)
    assert kept is not None and kept.data == first and kept.partial_index == 0
    second = render_image("fox", 1, 8, 8, OutputFormat.WEBP)
    assert await cache.offer(KEY, event(second, partial=1)) is True
    latest = cache.get(KEY)
    assert latest is not None and latest.media_type == "image/webp"
    assert cache.get(("other-scope", KEY[1])) is None
    cache.close(KEY)
    assert cache.get(KEY) is None and len(cache) == 0
    assert await cache.offer(KEY, event(second)) is False
