"""A scriptable fake provider, like the original's test provider "ready"."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import time
from collections.abc import Awaitable, Callable
from typing import Any

from PIL import Image

from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage, ImageResponse, Timings
from imagebridge.engine.provider import Provider, ProviderContext
from tests.support.capabilities import capabilities
from tests.support.images import png_bytes


def image_item(index: int, data: bytes, fmt: str = "png", **overrides: Any) -> GeneratedImage:
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
    body: dict[str, Any] = {
        "index": index,
        "type": "b64_json",
        "b64_json": base64.b64encode(data).decode(),
        "format": fmt,
        "width": width,
        "height": height,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    body.update(overrides)
    return GeneratedImage.model_validate(body)


Behaviour = Callable[[ImageRequest, ProviderContext], Awaitable[ImageResponse | None]]


class FakeProvider(Provider):
    """Returns 1×1 PNGs; every aspect can be scripted per test."""

    def __init__(
        self,
        name: str = "test-provider",
        *,
        caps: dict[str, Any] | None = None,
        delay: float = 0.0,
        fail: BridgeError | None = None,
        fail_capabilities: BridgeError | None = None,
        behaviour: Behaviour | None = None,
        image: bytes | None = None,
        partials: int = 0,
    ) -> None:
        self._name = name
        self._caps = {"provider": name, **(caps or {})}
        self.delay = delay
        self.fail = fail
        self.fail_capabilities = fail_capabilities
        self.behaviour = behaviour
        self.image = image or png_bytes()
        self.partials = partials
        self.calls = 0
        self.capability_calls = 0
        self.in_flight = 0
        self.peak = 0
        self.saw_cancellation = False
        self.shutdown_calls = 0
        self.requests: list[ImageRequest] = []
        self.request_ids: list[str] = []

    @property
    def descriptor(self) -> ProviderDescriptor:
        return ProviderDescriptor(
            name=self._name, display_name=self._name.title(), version="0.0.1", models=["test-image"]
        )

    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        self.capability_calls += 1
        if self.fail_capabilities is not None:
            raise self.fail_capabilities.copy()
        return capabilities(**self._caps)

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        self.calls += 1
        self.requests.append(request)
        self.request_ids.append(context.request_id)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.behaviour is not None:
                result = await self.behaviour(request, context)
                if result is not None:
                    return result
            for partial in range(self.partials):
                await context.emit(
                    PartialImageEvent(
                        index=0,
                        partial_index=partial,
                        b64_json=base64.b64encode(self.image).decode(),
                    )
                )
            if self.delay:
                try:
                    await asyncio.wait_for(context.cancellation.wait(), self.delay)
                except TimeoutError:
                    pass
                else:
                    self.saw_cancellation = True
                    raise BridgeError(ErrorCode.CANCELLED, "fake provider observed cancellation")
            if self.fail is not None:
                raise self.fail.copy()
            return self.response(request, context)
        finally:
            self.in_flight -= 1

    def response(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        return ImageResponse(
            id=context.request_id,
            created=int(time.time()),
            provider=self._name,
            model="test-image",
            requested=request.parameters,
            effective=request.parameters,
            data=[image_item(i, self.image) for i in range(request.parameters.n)],
            revised_prompt="revised by the fake",
            timings=Timings(provider_ms=1, total_ms=1),
        )

    async def shutdown(self) -> None:
        self.shutdown_calls += 1
