"""``artifacts.backend`` → the one store the engine publishes to and the server serves from.

``filesystem`` (the default) is the local :class:`ArtifactStore` under ``artifacts.root``,
run in a worker thread (:class:`AsyncArtifactStore`); ``s3`` is the
:class:`S3ArtifactStore` on ``[artifacts.s3]``, so every instance on the same bucket reads
every instance's artifacts. The S3 object store opens its connection pool on first use
and is closed with the application. Nothing else is built: on S3 no filesystem store
exists (the signed links' key, kept under ``artifacts.root``, is read by the links
themselves).

Surfaces that hand out local file paths (the CLI's in-process runs, the local MCP server)
build the filesystem store themselves with :func:`filesystem_store` and pass it to
``build_application(..., artifacts=AsyncArtifactStore(store))``: a path must name a file
on this machine, whatever the config says.
"""

from __future__ import annotations

from imagebridge.application.inputs import image_limits
from imagebridge.application.object_store import s3_settings
from imagebridge.artifacts.filesystem.store import ArtifactStore, AsyncArtifactStore
from imagebridge.artifacts.interfaces import ArtifactBackend
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.config.model import BridgeConfig

__all__ = ["bucket_store", "choose_artifact_backend", "filesystem_store"]


def filesystem_store(config: BridgeConfig) -> ArtifactStore:
    """The filesystem store under ``artifacts.root`` (created if missing; blocking)."""
    return ArtifactStore(config.artifacts.root, image_limits(config))


def bucket_store(config: BridgeConfig) -> S3ArtifactStore:
    """The S3 store of ``[artifacts.s3]`` (whatever ``artifacts.backend`` says); its
    object store (``.objects``) connects on first use and is the caller's to close."""
    objects = S3ObjectStore(s3_settings(config.artifacts.s3))
    return S3ArtifactStore(
        objects, image_limits(config), stale_upload_secs=config.artifacts.s3.stale_upload_secs
    )


def choose_artifact_backend(config: BridgeConfig) -> ArtifactBackend:
    """The backend ``artifacts.backend`` names."""
    if config.artifacts.backend == "s3":
        return bucket_store(config)
    return AsyncArtifactStore(filesystem_store(config))
