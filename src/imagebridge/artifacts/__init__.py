"""Artifacts and images: inspection, chroma key, XMP metadata, the store, inputs, remote.

Every function here is synchronous and may block (decode, pixel work, file I/O); each
module offers ``a*`` wrappers that run the same work in a worker thread for async
callers. All failures are :class:`~imagebridge.contract.errors.BridgeError`.
"""

from imagebridge.artifacts.chroma import (
    AlphaSummary,
    ChromaKey,
    ChromaOptions,
    ChromaResult,
    choose_key_for_prompt,
    remove_background,
    remove_chroma_key,
)
from imagebridge.artifacts.ids import canonical_uuid, uuid7
from imagebridge.artifacts.inputs import InputLoader
from imagebridge.artifacts.inspect import (
    ImageInfo,
    ImageLimits,
    inspect_image,
    make_thumbnail,
    sniff_format,
)
from imagebridge.artifacts.loaded import LoadedImage
from imagebridge.artifacts.metadata import (
    build_generation_record,
    embed_metadata,
    extract_metadata,
    fit_generation_record,
)
from imagebridge.artifacts.naming import sanitize_prefix
from imagebridge.artifacts.remote import RemoteFetchPolicy, RemoteImageFetcher, is_public_address
from imagebridge.artifacts.store import (
    ArtifactContent,
    ArtifactStore,
    AsyncArtifactStore,
    CleanupReport,
    PublishedArtifact,
    RepairReport,
)

__all__ = [
    "AlphaSummary",
    "ArtifactContent",
    "ArtifactStore",
    "AsyncArtifactStore",
    "ChromaKey",
    "ChromaOptions",
    "ChromaResult",
    "CleanupReport",
    "ImageInfo",
    "ImageLimits",
    "InputLoader",
    "LoadedImage",
    "PublishedArtifact",
    "RemoteFetchPolicy",
    "RemoteImageFetcher",
    "RepairReport",
    "build_generation_record",
    "canonical_uuid",
    "choose_key_for_prompt",
    "embed_metadata",
    "extract_metadata",
    "fit_generation_record",
    "inspect_image",
    "is_public_address",
    "make_thumbnail",
    "remove_background",
    "remove_chroma_key",
    "sanitize_prefix",
    "sniff_format",
    "uuid7",
]
