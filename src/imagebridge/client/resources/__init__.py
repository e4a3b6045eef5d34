"""The resource namespaces of :class:`~imagebridge.client.ImageBridgeClient`."""

from imagebridge.client.resources.catalog import (
    AsyncPresets,
    AsyncProviders,
    AsyncSessions,
    Presets,
    Providers,
    Sessions,
)
from imagebridge.client.resources.images import AsyncImages, CompatEditFields, Images
from imagebridge.client.resources.jobs import AsyncJobs, Jobs
from imagebridge.client.resources.operations import (
    Artifacts,
    AsyncArtifacts,
    AsyncHealth,
    Health,
)

__all__ = [
    "Artifacts",
    "AsyncArtifacts",
    "AsyncHealth",
    "AsyncImages",
    "AsyncJobs",
    "AsyncPresets",
    "AsyncProviders",
    "AsyncSessions",
    "CompatEditFields",
    "Health",
    "Images",
    "Jobs",
    "Presets",
    "Providers",
    "Sessions",
]
