"""What the MCP tools need from a bridge, whether it runs in this process or elsewhere.

:class:`LocalBackend` (:mod:`.local`) drives the engine in-process; :class:`RemoteBackend`
(:mod:`.remote`) talks to a running bridge through the SDK. Both leave every generated
image as a verified file in *this* machine's artifact store, so a tool result can always
name an absolute path, an artifact id and its relative name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from imagebridge.artifacts.filesystem.store import ArtifactStore
from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.enums import ImageJobStatus, OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import (
    CompletedEvent,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
)
from imagebridge.contract.jobs import ImageJob, ImageJobPage
from imagebridge.contract.presets import ImagePreset
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.validation import RequestLimits

__all__ = [
    "Backend",
    "EventSink",
    "Generation",
    "JobFilter",
    "SavedImage",
    "provider_not_found",
]

EventSink = Callable[
    [StartedEvent | ProgressEvent | PartialImageEvent | CompletedEvent], Awaitable[None]
]


@dataclass(frozen=True, slots=True)
class SavedImage:
    """One generated image as a file in the local artifact store."""

    index: int
    id: str
    name: str
    path: Path
    format: OutputFormat
    width: int
    height: int
    bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Generation:
    response: ImageResponse
    images: list[SavedImage]


@dataclass(frozen=True, slots=True)
class JobFilter:
    limit: int
    cursor: str | None = None
    status: ImageJobStatus | None = None
    search: str | None = None


class Backend(Protocol):
    mode: Literal["in-process", "remote"]
    store: ArtifactStore
    limits: RequestLimits
    inputs: InputLoader

    async def generate(self, request: ImageRequest, events: EventSink) -> Generation: ...

    async def providers(self) -> list[ProviderDescriptor]: ...

    async def capabilities(
        self, provider: str | None, model: str | None
    ) -> ProviderCapabilities: ...

    async def get_job(self, job_id: str) -> ImageJob: ...

    async def list_jobs(self, query: JobFilter) -> ImageJobPage: ...

    async def preset(self, name: str) -> ImagePreset: ...

    def artifact_url(self, artifact_id: str) -> str | None:
        """Where a job's artifact can be fetched when it is not in the local store."""
        ...

    async def aclose(self) -> None: ...


def provider_not_found(name: str) -> BridgeError:
    return BridgeError(
        ErrorCode.INVALID_REQUEST,
        "requested provider is not registered",
        details={"field": "provider", "provider": name},
        suggestions=["Call list_providers to see the registered providers."],
    )
