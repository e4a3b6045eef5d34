"""Materialization: verify every provider output independently, then project it.

Nothing a provider says about its images is trusted: the bytes are decoded and measured,
checked against what was negotiated, optionally keyed to transparency, and only then
delivered as base64, metadata, a bridge artifact or a bridge-hosted URL.

:class:`Materializer` keeps the order and the response's byte budget; each stage is its
own module: :mod:`.verification` (the output set, each image's bytes), :mod:`.finishing`
(re-encoding, masks, transparency, dimensions), :mod:`.generation_record` (embedded
records and sidecars), :mod:`.projection` (the delivered items) through the artifact
ports of :mod:`.publishing`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from imagebridge.contract.enums import Background, ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage, ImageResponse, Normalization
from imagebridge.engine import tracing
from imagebridge.engine.finishing import (
    DIMENSIONS_WARNING,
    apply_chroma,
    check_encoding,
    composite_mask,
    encoding_warnings,
    reconcile_dimensions,
    validate_native_alpha,
)
from imagebridge.engine.generation_record import (
    C2PA_WARNING,
    embed_record,
    invalidates_c2pa,
    write_sidecars,
)
from imagebridge.engine.keep import KeptImages
from imagebridge.engine.masking import MaskPlan
from imagebridge.engine.projection import Delivery, delivered
from imagebridge.engine.publishing import ARTIFACT_NOT_STORED, ArtifactLinker, ArtifactSink
from imagebridge.engine.sizes import SIZE_WARNING, SizeReport, size_mismatch_error, size_report
from imagebridge.engine.transparency import ChromaPlan
from imagebridge.engine.verification import (
    ResponseBudget,
    VerifiedImage,
    check_output_set,
    verify_output,
)
from imagebridge.imaging.inspect import ImageLimits

__all__ = ["MaterializeLimits", "Materializer"]

T = TypeVar("T")
MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class MaterializeLimits:
    max_base64_chars: int = 128 * MiB
    max_response_bytes: int = 256 * MiB
    image: ImageLimits = field(default_factory=ImageLimits)


async def _each(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """``asyncio.gather`` of ``calls``; a single one (the common single image) is awaited
    directly, which gives the same result without a task and its scheduling."""
    if len(calls) == 1:
        return [await calls[0]]
    return list(await asyncio.gather(*calls))


def _sizes(verified: list[VerifiedImage]) -> list[tuple[int, int, int]]:
    return [(image.index, image.info.width, image.info.height) for image in verified]


class Materializer:
    def __init__(
        self,
        limits: MaterializeLimits | None = None,
        *,
        artifacts: ArtifactSink | None = None,
        public_base_url: str | None = None,
        links: ArtifactLinker | None = None,
    ) -> None:
        self.limits = limits or MaterializeLimits()
        self.artifacts = artifacts
        self.public_base_url = public_base_url
        self.links = links

    def url_base(self, link_base: str | None) -> str | None:
        """Where ``url`` outputs point: the configured public base, else the caller's."""
        return self.public_base_url or link_base

    def _delivery(self, link_base: str | None) -> Delivery:
        return Delivery(self.artifacts, self.links, self.url_base(link_base))

    async def check_delivery(self, effective: ImageRequest, link_base: str | None) -> None:
        """Refuse, before any provider work, a delivery that could not be made afterwards."""
        await self._delivery(link_base).check(effective)

    async def materialize(
        self,
        response: ImageResponse,
        effective: ImageRequest,
        plan: ChromaPlan | None,
        *,
        owner: str,
        original: ImageRequest | None = None,
        link_base: str | None = None,
        mask: MaskPlan | None = None,
        on_transport_size: Callable[[SizeReport], None] | None = None,
        keep: KeptImages | None = None,
    ) -> ImageResponse:
        """Verify ``response`` against ``effective`` and project it for delivery.

        ``original`` is the caller's request: its size ask is what delivered sizes are
        compared with (and embedded metadata records name it). ``link_base`` is the
        address the caller reached the bridge on (for ``url`` outputs). ``mask``:
        composite every output through an emulated mask. ``on_transport_size`` hears how
        the transport's own output compared with the ask (before any compositing), even
        when the request then fails on ``policies.size_mismatch``. ``keep``: publish every
        output as an artifact whatever the response format and record it there.
        ``response`` is consumed: its items' base64 text is released once decoded.
        """
        image_limits = self.limits.image
        with tracing.span(tracing.VERIFICATION, {tracing.IMAGES: len(response.data)}):
            check_output_set(response, effective)
            budget = ResponseBudget(response, self.limits.max_response_bytes)
            verified = await _each(
                [
                    verify_output(
                        item, max_base64_chars=self.limits.max_base64_chars, limits=image_limits
                    )
                    for item in response.data
                ]
            )
            for image in verified:
                budget.add(len(image.data))
        normalizations: list[Normalization] = []
        encoder_notes = await _each(
            [check_encoding(image, effective, image_limits) for image in verified]
        )
        for notes in encoder_notes:
            normalizations.extend(notes)
        warnings = encoding_warnings(normalizations)
        asked = (original or effective).parameters
        if on_transport_size is not None:
            transport = size_report(asked, effective.parameters.size, _sizes(verified))
            if transport is not None:
                on_transport_size(transport)
        if mask is not None:
            normalizations.extend(
                await _each(
                    [composite_mask(image, mask, effective, image_limits) for image in verified]
                )
            )
            warnings.append("mask_emulated")
        sizes = size_report(asked, effective.parameters.size, _sizes(verified))
        if sizes is not None:
            refusal = size_mismatch_error(sizes, (original or effective).policies.size_mismatch)
            if refusal is not None:
                raise refusal
        background = effective.parameters.background
        for image in verified:
            if plan is not None:
                normalizations.extend(await apply_chroma(image, plan, effective, image_limits))
            elif background is Background.TRANSPARENT:
                normalizations.append(await validate_native_alpha(image, image_limits))
        size_changes = reconcile_dimensions(verified, effective, response)
        if size_changes:
            normalizations.extend(size_changes)
            warnings.append(DIMENSIONS_WARNING)
        if sizes is not None and not sizes.matched:
            normalizations.extend(sizes.normalizations)
            warnings.append(SIZE_WARNING)
        if effective.output.metadata.embeds:
            if invalidates_c2pa(verified):
                warnings.append(C2PA_WARNING)
            record_response = response.model_copy(deep=True)
            record_response.normalizations.extend(normalizations)
            for warning in warnings:
                record_response.add_warning(warning)
            await _each(
                [
                    embed_record(
                        image, record_response, original or effective, effective, image_limits
                    )
                    for image in verified
                ]
            )
        delivery = self._delivery(link_base)
        projected: list[GeneratedImage] = []
        unstored: list[Normalization] = []
        if effective.output.response_format in (ResponseFormat.B64_JSON, ResponseFormat.METADATA):
            projected = await _each(
                [delivery.project(i, effective, owner, keep=keep) for i in verified]
            )
        else:  # publication is sequential so collision suffixes stay deterministic
            for image in verified:
                projected.append(
                    await delivery.project(image, effective, owner, unstored, keep=keep)
                )
        if unstored:
            normalizations.extend(unstored)
            warnings.append(ARTIFACT_NOT_STORED)
        for item in projected:
            budget.add(ResponseBudget.payload_size(item))
        result = delivered(response, projected)
        result.normalizations.extend(normalizations)
        for warning in warnings:
            result.add_warning(warning)
        return result

    async def attach_sidecars(
        self,
        response: ImageResponse,
        original: ImageRequest,
        effective: ImageRequest,
    ) -> ImageResponse:
        """Write ``metadata-<id>.json`` beside every artifact once timings are final."""
        if not original.output.metadata.writes_sidecar:
            return response
        if self.artifacts is None:
            raise BridgeError(ErrorCode.CONFIGURATION, "artifact storage is not configured")
        return await write_sidecars(self.artifacts, response, original, effective)
