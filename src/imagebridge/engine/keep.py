"""What a caller who may go away needs from the engine: when paid work began, and what it kept.

A synchronous caller can leave (a proxy cuts its connection, a client times out) while its
request runs. Whether that stops the work depends on whether anything was paid for yet, so
the engine says when the first provider call of a request begins (:class:`ProviderDispatch`):
before it, leaving cancels cleanly; after it, the surface's ``on_disconnect`` policy decides.
And a request can ask that every output be kept as an artifact whatever the caller's
``response_format`` (:class:`KeptImages`), so a finished image is never only in an answer
nobody reads: the history shows it and a retry is answered from it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from imagebridge.engine.publishing import PublishedArtifact

__all__ = ["KeptImages", "ProviderDispatch"]


class ProviderDispatch:
    """Set once the request's first provider call is about to be made (never cleared).

    The engine sets it right before it hands the negotiated request to a provider; a
    fallback or a fan-out chunk finds it already set.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncio.Event()

    @property
    def begun(self) -> bool:
        return self._event.is_set()

    def begin(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


@dataclass(slots=True)
class KeptImages:
    """The artifact each output of a request was kept as, by output index.

    ``None`` for an output whose publication met a storage fault (the caller still gets
    the image it asked for; only the kept copy is missing).
    """

    by_index: dict[int, PublishedArtifact | None] = field(default_factory=dict)

    def keep(self, index: int, artifact: PublishedArtifact | None) -> None:
        self.by_index[index] = artifact

    def artifact(self, index: int) -> PublishedArtifact | None:
        return self.by_index.get(index)
