"""Artifacts: the store that publishes images as files, and the loading of caller inputs.

The store (:mod:`.store`) writes verified images under the artifact root and implements
the engine's publishing port; :mod:`.inputs` implements its input port (local files
confined to the configured roots, inline base64 and data URLs, remote URLs through
:mod:`.remote` with its SSRF rules). Blocking work has ``a*`` wrappers that run it in a
worker thread. :mod:`.s3` (objects in an S3-compatible bucket) needs the ``s3`` extra and
is imported only by name, never from here. Every failure is a
:class:`~imagebridge.contract.errors.BridgeError`.
"""

from imagebridge.artifacts.async_store import AsyncArtifactStore
from imagebridge.artifacts.inputs import InputLoader
from imagebridge.artifacts.naming import sanitize_prefix
from imagebridge.artifacts.remote import RemoteFetchPolicy, RemoteImageFetcher, is_public_address
from imagebridge.artifacts.store import (
    ArtifactContent,
    ArtifactStore,
    CleanupReport,
    RepairReport,
    StoredArtifact,
)

__all__ = [
    "ArtifactContent",
    "ArtifactStore",
    "AsyncArtifactStore",
    "CleanupReport",
    "InputLoader",
    "RemoteFetchPolicy",
    "RemoteImageFetcher",
    "RepairReport",
    "StoredArtifact",
    "is_public_address",
    "sanitize_prefix",
]
