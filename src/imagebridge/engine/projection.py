"""Projection: a finished image as the item the caller asked for.

``output.response_format`` decides the delivered item: ``b64_json`` (the provider's own
canonical text when the bytes did not change), ``metadata`` (every measured field, no
payload), or a published ``artifact`` and its ``url``. Publication goes through the
engine's artifact ports (:mod:`.publishing`); a storage fault there comes after the image
was made and billed, so the image is delivered inline instead and a normalization says why.

A request that keeps its images (:class:`~.keep.KeptImages`) has every output kept as an
artifact whatever the delivered item: an ``artifact`` or ``url`` delivery's own is recorded
there, a ``b64_json``/``metadata`` one is held there to be published once the caller has
its answer. Keeping never changes the answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from imagebridge.contract.enums import ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage, ImageResponse, Normalization
from imagebridge.engine.keep import KeptImages
from imagebridge.engine.publishing import (
    ArtifactLinker,
    ArtifactSink,
    Publication,
    is_storage_fault,
)
from imagebridge.engine.verification import INLINE_BYTES, VerifiedImage
from imagebridge.imaging.b64 import encode_text

__all__ = ["Delivery", "delivered"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where ``artifact``/``url`` outputs of one request go: the artifact sink, the
    linker and the base address a bridge-hosted link is made absolute with."""

    artifacts: ArtifactSink | None
    links: ArtifactLinker | None
    url_base: str | None

    async def check(self, effective: ImageRequest) -> None:
        """Refuse, before any provider work, a delivery that could not be made afterwards."""
        if effective.output.response_format not in (ResponseFormat.URL, ResponseFormat.ARTIFACT):
            return
        if self.artifacts is None:
            raise BridgeError(ErrorCode.CONFIGURATION, "artifact storage is not configured")
        if effective.output.response_format is ResponseFormat.ARTIFACT:
            return
        if self.url_base is None:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "public artifact base URL is not configured",
                details={"field": "output.response_format"},
            )
        if self.links is None:
            raise BridgeError(ErrorCode.CONFIGURATION, "artifact links are not configured")
        await self.links.ready()

    async def project(
        self,
        image: VerifiedImage,
        effective: ImageRequest,
        owner: str,
        unstored: list[Normalization] | None = None,
        keep: KeptImages | None = None,
    ) -> GeneratedImage:
        """The delivered item. An ``artifact``/``url`` image whose publication meets a
        storage fault (the image is made and billed by then) is delivered inline instead,
        within ``max_response_bytes``, with a normalization appended to ``unstored``.
        With ``keep``, the image's artifact (its own, or a copy) is recorded there."""
        info = image.info
        common: dict[str, Any] = {
            "index": image.index,
            "format": info.format,
            "width": info.width,
            "height": info.height,
            "bytes": info.bytes,
            "sha256": info.sha256,
            "generation_ms": image.generation_ms,
        }
        response_format = effective.output.response_format
        if keep is not None and response_format in (
            ResponseFormat.B64_JSON,
            ResponseFormat.METADATA,
        ):
            keep.hold(image.index, image.data, info.format)
        if response_format is ResponseFormat.B64_JSON:
            if image.encoded is not None:
                encoded = image.encoded  # verified, canonical: the same text encoding gives
            elif len(image.data) <= INLINE_BYTES:
                encoded = encode_text(image.data)
            else:
                encoded = await asyncio.to_thread(encode_text, image.data)
            return GeneratedImage(type="b64_json", b64_json=encoded, **common)
        if response_format is ResponseFormat.METADATA:
            return GeneratedImage(type="metadata", **common)
        await self.check(effective)
        assert self.artifacts is not None
        output = effective.output
        try:
            published = await self.artifacts.publish(
                Publication(
                    image.data,
                    expected_format=info.format,
                    owner=owner,
                    filename_prefix=output.filename_prefix,
                    directory=output.directory,
                    filename=output.filename,
                    collision=output.collision,
                )
            )
        except BridgeError as error:
            reason = error.details.get("reason")
            if unstored is None or not is_storage_fault(error):
                raise
            if keep is not None:
                keep.keep(image.index, None)
            unstored.append(
                Normalization(
                    field=f"data[{image.index}].type",
                    requested=response_format.value,
                    effective=ResponseFormat.B64_JSON.value,
                    reason=f"artifact_storage_{reason}",
                )
            )
            inline = image.encoded
            if inline is None:
                inline = await asyncio.to_thread(encode_text, image.data)
            return GeneratedImage(type="b64_json", b64_json=inline, **common)
        if keep is not None:
            keep.keep(image.index, published)
        if response_format is ResponseFormat.URL:
            base, links = self.url_base, self.links
            assert base is not None
            assert links is not None
            link = await links.link(published)
            url = link if link.startswith(("https://", "http://")) else base + link
            return GeneratedImage(type="url", url=url, **common)
        return GeneratedImage(type="artifact", id=published.id, name=published.name, **common)


def delivered(response: ImageResponse, projected: list[GeneratedImage]) -> ImageResponse:
    """The delivered response: ``projected`` in place of the provider's items.

    ``response`` is consumed, so a deep copy (the largest single cost of a small request)
    buys nothing: the result gets its own containers and timings, which the runtime goes on
    to change, and shares the members nothing changes after materialization.
    """
    return response.model_copy(
        update={
            "data": projected,
            "normalizations": list(response.normalizations),
            "attempts": list(response.attempts),
            "failures": list(response.failures),
            "warnings": list(response.warnings),
            "timings": response.timings.model_copy(),
        }
    )
