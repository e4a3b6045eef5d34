"""Forward in-progress image previews of a turn as :class:`PartialImageEvent` values.

codex 0.169 emits no partial images, but an ``imageGeneration`` item that is still in
progress and already carries a ``result`` is a preview. At most the number the request
asked for is forwarded; a preview that is not a bounded, valid base64 PNG, JPEG or WebP is
skipped silently (a preview is a courtesy, never a reason to fail the turn).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping

from imagebridge.contract.events import PartialImageEvent
from imagebridge.engine.provider import ProviderContext
from imagebridge.providers.codex_app_server.images import sniff_media_type
from imagebridge.providers.codex_app_server.notifications import Notification

__all__ = ["PartialImageForwarder"]

_FINAL_STATUSES = frozenset({"completed", "failed"})


def _valid_preview(encoded: str, max_bytes: int) -> bool:
    if len(encoded) > -(-max_bytes // 3) * 4:
        return False
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(data) <= max_bytes and sniff_media_type(data) is not None


class PartialImageForwarder:
    """Emits up to ``wanted`` previews of output ``index`` through ``context``."""

    def __init__(
        self, context: ProviderContext, *, wanted: int, max_bytes: int, index: int = 0
    ) -> None:
        self._context = context
        self._wanted = wanted
        self._max_bytes = max_bytes
        self._index = index
        self.sent = 0

    async def offer(self, notification: Notification) -> None:
        if self.sent >= self._wanted or notification.method not in (
            "item/started",
            "item/completed",
        ):
            return
        item = notification.params.get("item")
        if not isinstance(item, Mapping) or item.get("type") != "imageGeneration":
            return
        if item.get("status") in _FINAL_STATUSES:
            return
        result = item.get("result")
        if not isinstance(result, str) or not result.strip():
            return
        encoded = result.strip()
        if not await asyncio.to_thread(_valid_preview, encoded, self._max_bytes):
            return
        await self._context.emit(
            PartialImageEvent(index=self._index, partial_index=self.sent, b64_json=encoded)
        )
        self.sent += 1
