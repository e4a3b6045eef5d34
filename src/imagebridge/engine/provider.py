"""The provider interface: what every upstream transport implements.

A provider turns one (already validated and negotiated) :class:`ImageRequest` into an
:class:`ImageResponse` whose images carry their bytes as ``b64_json`` with the format and
dimensions the provider believes they have; the engine verifies all of it independently.
Its input images arrive loaded and verified on :attr:`ProviderContext.inputs`: a provider
never reads a file or fetches a URL for them.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.events import (
    CompletedEvent,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage, ImageResponse, SessionMetadata
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.decoded import DecodedPayload, attach_decoded
from imagebridge.engine.inputs import LoadedInputs

if TYPE_CHECKING:  # the pixel layer (Pillow) stays unloaded for the interface alone
    from imagebridge.imaging.inspect import ImageInfo

__all__ = [
    "AccountCounters",
    "EventSink",
    "Provider",
    "ProviderContext",
    "ProviderEventT",
    "diagnostics_owner",
    "inline_image",
]

ProviderEventT = StartedEvent | ProgressEvent | PartialImageEvent | CompletedEvent
EventSink = Callable[[ProviderEventT], Awaitable[None]]
"""Receives provider events; it may apply backpressure by awaiting."""

_MAX_DECORATOR_DEPTH = 8


def diagnostics_owner(provider: object) -> Any:
    """``provider``, or the transport it decorates, that has an ``async diagnostics()`` hook.

    Decorators (the fan-out) expose what they wrap as ``inner``; the hook lives on the
    transport, so the chain is followed a bounded number of steps. ``None`` when no link
    has one.
    """
    current: object | None = provider
    for _ in range(_MAX_DECORATOR_DEPTH):
        if current is None:
            return None
        if callable(getattr(current, "diagnostics", None)):
            return current
        current = getattr(current, "inner", None)
    return None


@dataclass(frozen=True, slots=True)
class AccountCounters:
    """One upstream account a provider spreads its calls over, for metrics: its configured
    name (a label, never an identity), whether it takes calls now, and its call counts."""

    account: str
    ready: bool
    in_flight: int
    succeeded: int
    failed: int


@dataclass(slots=True)
class ProviderContext:
    """Everything a provider needs about the call besides the request itself."""

    request_id: str
    deadline: Deadline
    cancellation: CancelToken = field(default_factory=CancelToken)
    events: EventSink | None = None
    inputs: LoadedInputs = field(default_factory=LoadedInputs)
    """The request's input images, loaded and verified by the engine before the call."""

    async def emit(self, event: ProviderEventT) -> None:
        """Forward an event; a failing or absent sink never fails the generation."""
        if self.events is None:
            return
        with contextlib.suppress(Exception):
            await self.events(event)


def inline_image(
    index: int,
    b64_json: str,
    info: ImageInfo,
    *,
    generation_ms: int | None = None,
    decoded: DecodedPayload | None = None,
) -> GeneratedImage:
    """An output carried as base64, described by what inspecting its bytes proved.

    ``decoded``: ``b64_json`` already decoded, with ``info`` computed over it; the
    materializer uses it instead of decoding and hashing the same payload again.
    """
    image = GeneratedImage(
        index=index,
        type="b64_json",
        b64_json=b64_json,
        format=info.format,
        width=info.width,
        height=info.height,
        bytes=info.bytes,
        sha256=info.sha256,
        generation_ms=generation_ms,
    )
    if decoded is not None:
        attach_decoded(image, decoded)
    return image


class Provider(ABC):
    """An image-generation backend registered under a lowercase name."""

    @property
    @abstractmethod
    def descriptor(self) -> ProviderDescriptor: ...

    @property
    def name(self) -> str:
        return self.descriptor.name

    @abstractmethod
    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        """The capability document for ``model`` (``None``: the default model)."""

    @abstractmethod
    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        """Generate ``request.parameters.n`` images, indexed 0..n-1."""

    async def execute_negotiated(
        self, request: ImageRequest, context: ProviderContext, caps: ProviderCapabilities
    ) -> ImageResponse:
        """:meth:`execute` for a request the runtime negotiated against ``caps`` (what
        :meth:`capabilities` returned for its model): how the runtime calls every provider.

        A provider that negotiates on its own (the fan-out decorator) overrides this to
        skip doing it again while its document still equals ``caps``; any other provider,
        a decorator that adds something else included, runs :meth:`execute`.
        """
        return await self.execute(request, context)

    @property
    def validates_requests(self) -> bool:
        """Whether :meth:`execute_negotiated` holds the request to the request limits
        itself (the fan-out decorator does, before cutting a batch), so the runtime need not
        check a negotiated request again unless negotiation grew it. ``False`` is always
        safe: the runtime then checks every negotiated request."""
        return False

    async def check_ready(self) -> None:  # noqa: B027 - optional hook
        """Raise a :class:`BridgeError` when the provider cannot serve requests now."""

    async def get_session(self, key: str) -> SessionMetadata:
        raise self._no_sessions()

    async def delete_session(self, key: str) -> None:
        raise self._no_sessions()

    def restart_count(self) -> int | None:
        """Child-process restarts, for providers that run one; ``None`` otherwise."""
        return None

    def account_counters(self) -> list[AccountCounters]:
        """The upstream accounts this provider spreads calls over (none by default)."""
        return []

    async def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Release resources; called once when the bridge stops."""

    def _unserved_model(self, requested: str, supported: Iterable[str]) -> BridgeError:
        """The refusal of a model this provider does not serve (same shape everywhere)."""
        return BridgeError.unsupported(
            "requested model is not served by this provider",
            field="routing.model",
            requested_model=requested,
            supported_models=list(supported),
        ).with_provider(self.name)

    def _no_sessions(self) -> BridgeError:
        error = BridgeError.unsupported(
            "provider does not expose persistent sessions", field="session.mode"
        )
        error.provider = self.name
        return error
