"""Latest partial preview per running job: verified, bounded, in memory only.

A preview is a courtesy: it is decoded and fully inspected in a worker thread, and anything
wrong with it (bad base64, not an image, too large) only means it is not shown. It never
fails the job, and it is gone once the job ends.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from dataclasses import dataclass

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.events import PartialImageEvent
from imagebridge.imaging.inspect import ImageLimits, inspect_image

__all__ = ["PartialPreview", "PreviewCache", "decode_preview"]

logger = logging.getLogger("imagebridge.jobs")

JobKey = tuple[str, str]
"""(owner scope, job id): a job is only ever addressed together with its owner."""


@dataclass(frozen=True, slots=True)
class PartialPreview:
    """One verified preview image and where it belongs in the job's output."""

    data: bytes
    media_type: str
    output_index: int
    partial_index: int


def _max_base64_chars(max_bytes: int) -> int:
    return -(-max_bytes // 3) * 4


def decode_preview(event: PartialImageEvent, max_bytes: int) -> PartialPreview | None:
    """Blocking: decode and fully verify ``event``'s image, or ``None`` when unusable."""
    encoded = event.b64_json
    if len(encoded) > _max_base64_chars(max_bytes):
        return None
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not data or len(data) > max_bytes:
        return None
    try:
        info = inspect_image(data, ImageLimits(max_encoded_bytes=max_bytes))
    except BridgeError:
        return None
    return PartialPreview(
        data=data,
        media_type=info.media_type,
        output_index=event.index,
        partial_index=event.partial_index,
    )


class PreviewCache:
    """Previews keyed by (owner scope, job id), only for jobs registered as running."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._active: set[JobKey] = set()
        self._previews: dict[JobKey, PartialPreview] = {}

    def open(self, key: JobKey) -> None:
        self._active.add(key)

    def close(self, key: JobKey) -> None:
        """Forget the job's preview; later offers for it are dropped."""
        self._active.discard(key)
        self._previews.pop(key, None)

    def get(self, key: JobKey) -> PartialPreview | None:
        return self._previews.get(key)

    def __len__(self) -> int:
        return len(self._previews)

    async def offer(self, key: JobKey, event: PartialImageEvent) -> bool:
        """Verify ``event`` off the event loop and keep it if valid; returns whether kept."""
        if key not in self._active:
            return False
        preview = await asyncio.to_thread(decode_preview, event, self._max_bytes)
        if preview is None:
            logger.warning(
                "ignored an invalid partial preview",
                extra={"output_index": event.index, "partial_index": event.partial_index},
            )
            return False
        if key not in self._active:  # the job ended while the preview was being checked
            return False
        self._previews[key] = preview
        return True
