"""The ``mock`` provider: an offline, deterministic test double that makes real images.

Pixels are derived from (prompt, output index), so the same request always yields the same
bytes; edits derive from the first source image. It exists for demos, tests and
benchmarks: its descriptor says so, and it never touches the network itself.

Masks are native, as in OpenAI's edits: an edit with a mask is drawn at the source's size
and composited through the mask by the bridge's own rule (:mod:`imagebridge.imaging.masks`,
with a hard edge), so the source's pixels stay exactly where the mask is opaque and only
the transparent area changes. The drawing (plain and masked) is
:mod:`imagebridge.providers.mock_render`'s; this module is the provider around it.

Its input images are the engine's, like every provider's: ``file``, ``url``, ``base64`` and
``data_url`` inputs are loaded and verified before it runs, under the same local roots,
remote fetch policy and declared-media-type check; the mock holds them to the bounds its
capability document states (count, bytes per image and in total).

For black-box tests the prompt may carry directives, which are removed before rendering:
``[mock:fail=CODE]`` fails the call with that error code, ``[mock:fail-output=I,J]`` fails
the listed absolute output indices, ``[mock:latency=MS]`` overrides the latency.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from PIL import Image

from imagebridge._version import __version__
from imagebridge.contract.capabilities import (
    ProviderCapabilities,
    ProviderDescriptor,
    SizeCapabilities,
    U8Range,
)
from imagebridge.contract.enums import (
    Background,
    ImageAction,
    InputFidelity,
    Moderation,
    MultiImageFailurePolicy,
    OutputFormat,
    Quality,
    SessionMode,
    SupportLevel,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent, ProgressEvent, StartedEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import (
    GeneratedImage,
    ImageFailure,
    ImageResponse,
    SessionMetadata,
    Timings,
    Usage,
)
from imagebridge.engine.inputs import LoadedInputs
from imagebridge.engine.provider import Provider, ProviderContext
from imagebridge.engine.validation import check_mask
from imagebridge.providers.mock_render import (
    MaskedSource,
    open_masked,
    open_source,
    render_image,
    render_image_async,
    render_masked,
)
from imagebridge.providers.shared import native_batch, native_inputs

__all__ = ["MOCK_PROVIDER", "MockProvider", "MockSettings", "render_image"]

MOCK_PROVIDER = "mock"
AUTO_SIZE = (1024, 1024)
MAX_EDGE = 4096
MAX_INPUT_COUNT = 5
MAX_SOURCE_BYTES = 32 * 1024 * 1024
"""Bytes per input image; twice that for all edit images, or all references, together."""
_DIRECTIVE_RE = re.compile(r"\[mock:([a-z-]+)(?:=([^\]]*))?\]")
_OUTPUT_SUFFIX_RE = re.compile(r":output:(\d+)$")


@dataclass(frozen=True, slots=True)
class MockSettings:
    """``[providers.mock]``: behaviour of the test double."""

    native_count: int = 1
    latency_ms: int = 0
    latency_jitter_ms: int = 0
    failure_rate: float = 0.0
    seed: int | None = None
    models: tuple[str, ...] = ("mock-image-1",)
    name: str = MOCK_PROVIDER
    max_sessions: int = 10_000
    """Persistent sessions kept in memory; the least recently used goes first."""


@dataclass(slots=True)
class _Directives:
    prompt: str
    fail: ErrorCode | None = None
    fail_outputs: set[int] = field(default_factory=set)
    latency_ms: int | None = None


def _parse_directives(prompt: str) -> _Directives:
    directives = _Directives(prompt=_DIRECTIVE_RE.sub("", prompt).strip())
    for name, value in _DIRECTIVE_RE.findall(prompt):
        if name == "fail":
            try:
                directives.fail = ErrorCode(value)
            except ValueError:
                directives.fail = ErrorCode.UPSTREAM
        elif name == "fail-output":
            directives.fail_outputs |= {int(v) for v in value.split(",") if v.strip().isdigit()}
        elif name == "latency" and value.isdigit():
            directives.latency_ms = int(value)
    return directives


class MockProvider(Provider):
    """Offline image generation with real, verifiable images."""

    def __init__(
        self,
        settings: MockSettings | None = None,
        *,
        before_output: Callable[[str, int], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings or MockSettings()
        if self.settings.native_count < 1 or self.settings.native_count > 255:
            raise BridgeError(ErrorCode.CONFIGURATION, "mock native_count must be 1 to 255")
        self._rng = random.Random(self.settings.seed)
        self._sessions: dict[str, str] = {}
        self._capabilities: dict[str, ProviderCapabilities] = {}
        self._before_output = before_output
        self.calls = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.cancellations = 0

    @property
    def descriptor(self) -> ProviderDescriptor:
        return ProviderDescriptor(
            name=self.settings.name,
            display_name="Mock (offline test double)",
            version=__version__,
            experimental=True,
            models=list(self.settings.models),
        )

    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        chosen = model or self.settings.models[0]
        cached = self._capabilities.get(chosen)
        if cached is None:
            cached = self._capabilities[chosen] = self._describe(chosen)
        # the document depends only on the settings: build and validate it once per model
        return cached.model_copy()

    def _describe(self, chosen: str) -> ProviderCapabilities:
        if chosen not in self.settings.models:
            raise self._unserved_model(chosen, self.settings.models)
        count, batching = native_batch(self.settings.native_count)
        inputs = native_inputs(MAX_INPUT_COUNT, MAX_SOURCE_BYTES, 2 * MAX_SOURCE_BYTES)
        return ProviderCapabilities(
            provider=self.name,
            implementation_version=__version__,
            model=chosen,
            experimental=True,
            generation=True,
            edits=True,
            count=count,
            batching=batching,
            sizes=SizeCapabilities(
                auto=True, arbitrary=True, min_edge=1, max_edge=MAX_EDGE, max_pixels=MAX_EDGE**2
            ),
            aspect_ratio=SupportLevel.UNSUPPORTED,
            resolution=SupportLevel.UNSUPPORTED,
            qualities=list(Quality),
            output_formats=list(OutputFormat),
            backgrounds=list(Background),
            transparent_background=SupportLevel.NATIVE,
            moderation=list(Moderation),
            negative_prompt=SupportLevel.EMULATED,
            revised_prompt=SupportLevel.NATIVE,
            user_attribution=SupportLevel.NATIVE,
            input_fidelities=list(InputFidelity),
            actions=list(ImageAction),
            reference_images=inputs,
            edit_images=inputs,
            masks=native_inputs(1, MAX_SOURCE_BYTES, MAX_SOURCE_BYTES),
            partial_images=U8Range(min=0, max=3),
            persistent_sessions=True,
            explicit_threads=True,
        )

    async def get_session(self, key: str) -> SessionMetadata:
        thread = self._sessions.get(key)
        if thread is None:
            raise BridgeError(
                ErrorCode.SESSION, "persistent session was not found", provider=self.name
            )
        return SessionMetadata(key=key, thread_id=thread, reused=True)

    async def delete_session(self, key: str) -> None:
        if self._sessions.pop(key, None) is None:
            raise BridgeError(
                ErrorCode.SESSION, "persistent session was not found", provider=self.name
            )

    def _session(self, request: ImageRequest) -> SessionMetadata:
        options = request.session
        if options.mode is SessionMode.PERSISTENT:
            assert options.key is not None
            thread = self._sessions.pop(options.key, None)
            reused = thread is not None
            if thread is None:
                thread = f"mock-thread-{hashlib.sha256(options.key.encode()).hexdigest()[:16]}"
                while len(self._sessions) >= self.settings.max_sessions:
                    del self._sessions[next(iter(self._sessions))]  # the least recently used
            self._sessions[options.key] = thread  # the newest last
            return SessionMetadata(key=options.key, thread_id=thread, reused=reused)
        if options.mode is SessionMode.THREAD:
            assert options.thread_id is not None
            return SessionMetadata(thread_id=options.thread_id, reused=True)
        return SessionMetadata(thread_id=f"mock-ephemeral-{self.calls}", reused=False)

    async def _sleep(self, seconds: float, context: ProviderContext) -> None:
        if seconds <= 0:
            if context.cancellation.cancelled:
                raise self._cancelled()
            return
        try:
            await asyncio.wait_for(context.cancellation.wait(), timeout=seconds)
        except TimeoutError:
            return
        raise self._cancelled()

    def _cancelled(self) -> BridgeError:
        self.cancellations += 1
        return BridgeError(ErrorCode.CANCELLED, "mock generation was cancelled", provider=self.name)

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        self.calls += 1
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            return await self._execute(request, context)
        finally:
            self.in_flight -= 1

    async def _execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        started = time.monotonic()
        params = request.parameters
        if params.n > self.settings.native_count:
            raise BridgeError(
                ErrorCode.PROTOCOL, "mock received more outputs than its native count"
            )
        directives = _parse_directives(request.prompt)
        await context.emit(StartedEvent())
        latency = directives.latency_ms
        if latency is None:
            latency = self.settings.latency_ms
            if self.settings.latency_jitter_ms:
                latency += self._rng.randint(0, self.settings.latency_jitter_ms)
        offset_match = _OUTPUT_SUFFIX_RE.search(context.request_id)
        base_index = int(offset_match.group(1)) if offset_match else 0
        if directives.fail is not None:
            await self._sleep(latency / 1000, context)
            raise self._injected(directives.fail)
        if self.settings.failure_rate and self._rng.random() < self.settings.failure_rate:
            raise self._injected(ErrorCode.UPSTREAM)
        dims = params.dimensions or AUTO_SIZE
        loaded = self._bounded_inputs(request, context.inputs)
        masked = await self._masked(loaded)
        source: Image.Image | None = None
        if masked is not None:
            dims = masked.size  # the mask is in the source's pixels: so is the composite
        elif loaded.images:
            source = await asyncio.to_thread(open_source, loaded.images[0])
        transparent = params.background is Background.TRANSPARENT
        partials = params.partial_images
        await context.emit(ProgressEvent(stage="generating"))
        steps = partials + 1
        images: list[GeneratedImage] = []
        failures: list[ImageFailure] = []
        for local in range(params.n):
            absolute = base_index + local
            if self._before_output is not None:
                await self._before_output(context.request_id, absolute)
            for partial in range(partials):
                await self._sleep(latency / 1000 / steps, context)
                preview = await render_image_async(
                    directives.prompt,
                    absolute,
                    max(1, dims[0] // 8),
                    max(1, dims[1] // 8),
                    OutputFormat.PNG,
                )
                await context.emit(
                    PartialImageEvent(
                        index=local,
                        partial_index=partial,
                        b64_json=base64.b64encode(preview).decode(),
                    )
                )
            await self._sleep(latency / 1000 / steps, context)
            if absolute in directives.fail_outputs:
                error = self._injected(ErrorCode.UPSTREAM)
                if params.failure_policy is MultiImageFailurePolicy.FAIL_FAST:
                    raise error
                failures.append(
                    ImageFailure.model_validate(
                        {"index": local, "error": error.to_dict(), "generation_ms": 0}
                    )
                )
                continue
            if masked is not None:
                data = await asyncio.to_thread(
                    render_masked,
                    directives.prompt,
                    absolute,
                    params.output_format,
                    transparent,
                    params.output_compression,
                    masked,
                )
            else:
                data = await render_image_async(
                    directives.prompt,
                    absolute,
                    dims[0],
                    dims[1],
                    params.output_format,
                    transparent=transparent,
                    compression=params.output_compression,
                    source=source,
                )
            images.append(
                GeneratedImage(
                    index=local,
                    type="b64_json",
                    b64_json=base64.b64encode(data).decode(),
                    format=params.output_format,
                    width=dims[0],
                    height=dims[1],
                    bytes=len(data),
                    sha256=hashlib.sha256(data).hexdigest(),
                )
            )
        elapsed = int((time.monotonic() - started) * 1000)
        prompt_tokens = max(1, len(directives.prompt.split()))
        return ImageResponse(
            id=context.request_id,
            created=int(time.time()),
            provider=self.name,
            model=request.routing.model or self.settings.models[0],
            # shallow copies: every GenerationParameters field is immutable (as for the
            # engine's copy_parameters, which this layer may not import), so nothing is shared
            requested=params.model_copy(),
            effective=params.model_copy(),
            data=images,
            failures=failures,
            revised_prompt=f"{directives.prompt} (mock rendering)",
            usage=Usage(
                input_tokens=prompt_tokens,
                output_tokens=len(images) * 100,
                total_tokens=prompt_tokens + len(images) * 100,
                provider={"images": len(images)},
            ),
            session=self._session(request),
            timings=Timings(provider_ms=elapsed, total_ms=elapsed),
        )

    async def _masked(self, loaded: LoadedInputs) -> MaskedSource | None:
        """The edit's source and mask, when the edit has a mask: its alpha marks the area,
        as OpenAI's edits read it. The engine checked its size already (and not its alpha,
        which a native transport judges); the mock checks both, the size again for a caller
        that runs it outside the engine."""
        if loaded.mask is None or not loaded.images:
            return None
        try:
            check_mask(loaded.mask.info, loaded.images[0].info, needs_alpha=True)
            return await asyncio.to_thread(open_masked, loaded.images[0], loaded.mask)
        except BridgeError as error:
            error.provider = self.name
            raise

    def _bounded_inputs(self, request: ImageRequest, loaded: LoadedInputs) -> LoadedInputs:
        """The engine's loaded inputs, held to the bounds the capability document states."""
        loaded = loaded.require_for(request, self.name)
        masks = (loaded.mask,) if loaded.mask is not None else ()
        for slot, images, total in (
            ("images", loaded.images, 2 * MAX_SOURCE_BYTES),
            ("mask", masks, MAX_SOURCE_BYTES),
            ("reference_images", loaded.reference_images, 2 * MAX_SOURCE_BYTES),
        ):
            size = 0
            for index, image in enumerate(images):
                field_name = slot if slot == "mask" else f"{slot}[{index}]"
                size += len(image.data)
                if len(image.data) > MAX_SOURCE_BYTES:
                    raise self._too_large("an input image is", field_name, MAX_SOURCE_BYTES)
                if size > total:
                    raise self._too_large("the input images together are", field_name, total)
        return loaded

    def _too_large(self, what: str, field_name: str, maximum: int) -> BridgeError:
        return BridgeError(
            ErrorCode.INPUT,
            f"{what} larger than the mock provider accepts",
            provider=self.name,
            details={"field": field_name, "maximum_bytes": maximum},
        )

    def _injected(self, code: ErrorCode) -> BridgeError:
        if code is ErrorCode.SAFETY_REJECTED:
            error = BridgeError.safety_rejected("mock provider refused the prompt")
        else:
            retryable = code in {
                ErrorCode.UPSTREAM,
                ErrorCode.RATE_LIMITED,
                ErrorCode.OVERLOADED,
                ErrorCode.TIMEOUT,
            }
            error = BridgeError(code, "mock provider injected failure", retryable=retryable)
            if code is ErrorCode.RATE_LIMITED:
                error.details["retry_after_ms"] = 2000
        error.provider = self.name
        return error
