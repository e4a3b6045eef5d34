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
import logging
from dataclasses import dataclass, field

from imagebridge.contract.enums import ArtifactCollisionPolicy, OutputFormat
from imagebridge.contract.errors import BridgeError
from imagebridge.engine.publishing import ArtifactSink, Publication, PublishedArtifact

__all__ = ["KeptImages", "ProviderDispatch"]

logger = logging.getLogger("imagebridge.engine")


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

    An ``artifact``/``url`` delivery is its own kept copy (:meth:`keep`). An image
    delivered inline (``b64_json``, ``metadata``) is held (:meth:`hold`) and published by
    :meth:`publish_held` once the caller has its answer: the copy is for the history and
    for retries, so the caller does not wait for its write. ``None`` for an output whose
    kept copy met a storage fault (the caller still got the image it asked for).
    """

    by_index: dict[int, PublishedArtifact | None] = field(default_factory=dict)
    held: dict[int, tuple[bytes, OutputFormat]] = field(default_factory=dict)

    def keep(self, index: int, artifact: PublishedArtifact | None) -> None:
        self.by_index[index] = artifact

    def hold(self, index: int, data: bytes, image_format: OutputFormat) -> None:
        """A verified image delivered inline, to be published by :meth:`publish_held`."""
        self.held[index] = (data, image_format)

    def artifact(self, index: int) -> PublishedArtifact | None:
        return self.by_index.get(index)

    async def publish_held(self, artifacts: ArtifactSink | None, owner: str) -> None:
        """Publish every held image under ``owner`` with the store's own naming, releasing
        its bytes; a failure costs that copy only (logged, recorded as ``None``)."""
        while self.held:
            index = min(self.held)
            data, image_format = self.held.pop(index)
            self.by_index[index] = await _published(artifacts, data, image_format, owner)


async def _published(
    artifacts: ArtifactSink | None, data: bytes, image_format: OutputFormat, owner: str
) -> PublishedArtifact | None:
    if artifacts is None:
        return None
    try:
        return await artifacts.publish(
            Publication(
                data,
                expected_format=image_format,
                owner=owner,
                collision=ArtifactCollisionPolicy.SUFFIX,
            )
        )
    except BridgeError as error:
        logger.warning(
            "a kept copy of a delivered image could not be stored",
            extra={"code": error.code.value, "reason": error.details.get("reason")},
        )
        return None
