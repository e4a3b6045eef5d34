"""The artifact ports: where ``artifact``/``url`` outputs are published and linked.

The engine calls them only after an image is verified and finished; the adapters in
``artifacts/`` implement them (the filesystem and S3 stores, the bridge's signed links and
the bucket's presigned URLs), wired in ``application/``. A storage fault met here comes
after the image was made and paid for, so it degrades the delivery instead of failing it
(:data:`ARTIFACT_NOT_STORED`, :data:`SIDECAR_NOT_STORED`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from imagebridge.contract.enums import ArtifactCollisionPolicy, OutputFormat
from imagebridge.contract.errors import BridgeError
from imagebridge.engine.storage_faults import DISK_FAULT_REASONS

__all__ = [
    "ARTIFACT_NOT_STORED",
    "SIDECAR_NOT_STORED",
    "ArtifactLinker",
    "ArtifactSink",
    "Publication",
    "PublishedArtifact",
    "is_storage_fault",
]


@dataclass(frozen=True, slots=True)
class Publication:
    """An image to publish: its bytes, the scope that owns it and how to name it.

    The one value every artifact backend's ``publish`` takes. ``expected_format`` (when
    given) must be the image's; ``filename`` (extension appended if missing) replaces the
    ``<filename_prefix>-<id>.<ext>`` name; ``directory`` is a portable relative path below
    the store's root; ``collision`` says what a taken name does on a filesystem (``error``
    or ``suffix``: ``name-2.ext`` …).
    """

    data: bytes = field(repr=False)
    expected_format: OutputFormat | str | None
    owner: str
    filename_prefix: str | None = None
    directory: str | None = None
    filename: str | None = None
    collision: ArtifactCollisionPolicy | str = ArtifactCollisionPolicy.ERROR


@dataclass(frozen=True, slots=True)
class PublishedArtifact:
    id: str
    name: str


class ArtifactSink(Protocol):
    """Where ``artifact``/``url`` outputs are published (the artifact store implements it)."""

    async def publish(self, publication: Publication) -> PublishedArtifact: ...

    async def attach_metadata(self, artifact_id: str, name: str, record: dict[str, Any]) -> str:
        """Write the sidecar beside the artifact; returns its portable name."""
        ...


class ArtifactLinker(Protocol):
    """Makes the ``url`` of a published artifact: a bridge-hosted signed link, or (an
    absolute URL) a presigned URL of the object store."""

    async def ready(self) -> None:
        """Fail now, before paid work, if no link could be made later."""
        ...

    async def link(self, artifact: PublishedArtifact) -> str:
        """The link's path and query, relative to the bridge's base address, or an
        absolute ``http(s)://`` URL used as it is."""
        ...


def is_storage_fault(error: BridgeError) -> bool:
    """The artifact storage did not take a write: a disk fault, or an object store that
    did not answer or refused (the S3 store marks those ``details.storage``)."""
    return (
        error.details.get("reason") in DISK_FAULT_REASONS
        or error.details.get("storage") == "artifacts"
    )


ARTIFACT_NOT_STORED = "artifact_not_stored"
"""Warning: storage failed (full disk, I/O error, an object store away) after the image
was made and paid for, so it is delivered inline as ``b64_json`` instead (``data[i].type``
normalization says why)."""
SIDECAR_NOT_STORED = "metadata_sidecar_not_stored"
"""Warning: the artifact was stored but storage failed before its metadata sidecar was."""
