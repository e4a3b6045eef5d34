"""Base classes of the resource namespaces (``client.images``, ``client.jobs`` …)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imagebridge.client._base_client import AsyncTransport, SyncTransport

__all__ = ["AsyncAPIResource", "SyncAPIResource"]


class SyncAPIResource:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport


class AsyncAPIResource:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport
