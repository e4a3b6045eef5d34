"""The remote backend: a running bridge reached through the SDK (``--remote URL``).

Generations use ``POST /v1/images/stream`` so the bridge's events become progress
notifications; images come back inline and are verified and published into this
machine's artifact store (with the caller's naming options), so the tools name local
paths exactly as in-process. Jobs, presets and capabilities are the bridge's own.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Literal

from imagebridge.application import image_limits, request_limits
from imagebridge.artifacts.filesystem.store import ArtifactStore
from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.artifacts.publication import Publication
from imagebridge.client import AsyncImageBridgeClient, CompletedEvent, StreamError
from imagebridge.config import BridgeConfig
from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.enums import ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.jobs import ImageJob, ImageJobPage
from imagebridge.contract.presets import ImagePreset
from imagebridge.contract.request import ImageRequest, OutputOptions
from imagebridge.contract.response import GeneratedImage, ImageResponse
from imagebridge.mcp.backend import EventSink, Generation, JobFilter, SavedImage
from imagebridge.mcp.settings import LOCAL_OWNER

__all__ = ["RemoteBackend"]

MAX_PROVIDER_PAGES = 100


def _inline_request(request: ImageRequest) -> ImageRequest:
    """The same request with images delivered inline (naming is applied locally)."""
    output = OutputOptions(
        response_format=ResponseFormat.B64_JSON, transparency=request.output.transparency
    )
    return request.model_copy(update={"output": output})


def _decode(item: GeneratedImage) -> bytes:
    if item.b64_json is None:
        raise BridgeError(ErrorCode.PROTOCOL, "the bridge returned an image without data")
    try:
        return base64.b64decode(item.b64_json, validate=True)
    except (binascii.Error, ValueError):
        raise BridgeError(ErrorCode.PROTOCOL, "the bridge returned malformed image data") from None


class RemoteBackend:
    mode: Literal["in-process", "remote"] = "remote"

    def __init__(self, client: AsyncImageBridgeClient, config: BridgeConfig) -> None:
        self.client = client
        self.config = config
        self.store = ArtifactStore(config.artifacts.root, image_limits(config))
        self.limits = request_limits(config)
        self.inputs = InputLoader(
            [str(root) for root in config.inputs.local_roots],
            image_limits(config),
            max_inline_encoded_bytes=config.runtime.request.max_inline_encoded_bytes,
        )

    @classmethod
    async def open(cls, client: AsyncImageBridgeClient, config: BridgeConfig) -> RemoteBackend:
        try:
            return await asyncio.to_thread(cls, client, config)
        except BaseException:
            await client.aclose()
            raise

    async def generate(self, request: ImageRequest, events: EventSink) -> Generation:
        stream = await self.client.images.stream(_inline_request(request))
        response: ImageResponse | None = None
        async with stream:
            async for event in stream:
                if isinstance(event, StreamError):
                    raise event.error
                await events(event)
                if isinstance(event, CompletedEvent):
                    response = event.response
        if response is None:  # the SDK raises first; kept for the type checker
            raise BridgeError(ErrorCode.PROTOCOL, "the bridge's stream ended without a result")
        images = [await self._publish(request, item) for item in response.data]
        return Generation(response, images)

    async def _publish(self, request: ImageRequest, item: GeneratedImage) -> SavedImage:
        output = request.output

        def publish() -> SavedImage:
            published = self.store.publish(
                Publication(
                    _decode(item),
                    expected_format=item.format,
                    owner=LOCAL_OWNER,
                    filename_prefix=output.filename_prefix,
                    directory=output.directory,
                    filename=output.filename,
                    collision=output.collision,
                )
            )
            return SavedImage(
                index=item.index,
                id=published.id,
                name=published.name,
                path=self.store.root / published.name,
                format=item.format,
                width=published.info.width,
                height=published.info.height,
                bytes=published.info.bytes,
                sha256=published.info.sha256,
            )

        return await asyncio.to_thread(publish)

    async def providers(self) -> list[ProviderDescriptor]:
        items: list[ProviderDescriptor] = []
        async for item in self.client.providers.iter():
            items.append(item)
            if len(items) > MAX_PROVIDER_PAGES * 100:
                break
        return items

    async def capabilities(self, provider: str | None, model: str | None) -> ProviderCapabilities:
        if provider is None:
            provider = await self._default_provider()
        return await self.client.providers.capabilities(provider, model=model)

    async def _default_provider(self) -> str:
        """The bridge's configured default (from its diagnostics), else its only provider."""
        diagnostics = await self.client.diagnostics()
        configuration = diagnostics.get("configuration")
        name = configuration.get("default_provider") if isinstance(configuration, dict) else None
        if isinstance(name, str) and name:
            return name
        descriptors = await self.providers()
        if len(descriptors) == 1:
            return descriptors[0].name
        raise BridgeError.invalid_request(
            "name a provider: this bridge has several", field="provider"
        )

    async def get_job(self, job_id: str) -> ImageJob:
        return await self.client.jobs.get(job_id)

    async def list_jobs(self, query: JobFilter) -> ImageJobPage:
        return await self.client.jobs.list(
            limit=query.limit, cursor=query.cursor, status=query.status, search=query.search
        )

    async def preset(self, name: str) -> ImagePreset:
        return await self.client.presets.get(name)

    def artifact_url(self, artifact_id: str) -> str | None:
        return f"{self.client.base_url}/v1/artifacts/{artifact_id}"

    async def aclose(self) -> None:
        await self.client.aclose()
