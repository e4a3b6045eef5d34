"""``artifacts.backend`` → the store the engine publishes to and the server serves from.

``filesystem`` (the default) is the local :class:`ArtifactStore` under ``artifacts.root``,
run in a worker thread; ``s3`` is the :class:`S3ArtifactStore` on ``[artifacts.s3]``, so
every instance on the same bucket reads every instance's artifacts. The S3 object store
opens its connection pool on first use and is closed with the application. Surfaces that
hand out local file paths (the CLI's in-process runs, the local MCP server) ask for the
filesystem whatever the config says: a path must name a file on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.application.inputs import image_limits
from imagebridge.application.object_store import s3_settings
from imagebridge.artifacts.filesystem.store import ArtifactStore, AsyncArtifactStore
from imagebridge.artifacts.interfaces import ArtifactBackend
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.config.model import BridgeConfig

__all__ = ["ChosenBackend", "choose_artifact_backend"]


@dataclass(frozen=True, slots=True)
class ChosenBackend:
    """The backend, and its object store when it has one (to check and to close)."""

    store: ArtifactBackend
    objects: S3ObjectStore | None = None


def choose_artifact_backend(
    config: BridgeConfig, local: ArtifactStore, *, local_only: bool = False
) -> ChosenBackend:
    """The configured backend (``local_only``: the filesystem store ``local`` always)."""
    if local_only or config.artifacts.backend != "s3":
        return ChosenBackend(AsyncArtifactStore(local))
    objects = S3ObjectStore(s3_settings(config.artifacts.s3))
    store = S3ArtifactStore(
        objects, image_limits(config), stale_upload_secs=config.artifacts.s3.stale_upload_secs
    )
    return ChosenBackend(store, objects)
