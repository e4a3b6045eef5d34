"""Materialization: verify every provider output independently, then project it.

Nothing a provider says about its images is trusted: the bytes are decoded and measured,
checked against what was negotiated, optionally keyed to transparency, and only then
delivered as base64, metadata, a bridge artifact or a bridge-hosted URL.
"""

from __future__ import annotations

import asyncio
import binascii
import itertools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from imagebridge.contract.enums import (
    ArtifactCollisionPolicy,
    Background,
    MultiImageFailurePolicy,
    OutputFormat,
    ResponseFormat,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest, parse_size
from imagebridge.contract.response import GeneratedImage, ImageResponse, Normalization
from imagebridge.engine.decoded import take_decoded
from imagebridge.engine.masking import MaskPlan
from imagebridge.engine.sizes import SIZE_WARNING, SizeReport, size_mismatch_error, size_report
from imagebridge.engine.storage_faults import DISK_FAULT_REASONS
from imagebridge.engine.transparency import ChromaPlan
from imagebridge.imaging.b64 import decode_strict, encode_text, is_canonical
from imagebridge.imaging.chroma import inspect_transparent_alpha, remove_background
from imagebridge.imaging.inspect import ImageInfo, ImageLimits, inspect_image
from imagebridge.imaging.masks import composite_masked
from imagebridge.imaging.metadata import (
    build_generation_record,
    embed_metadata,
    fit_generation_record,
    has_c2pa_manifest,
)
from imagebridge.imaging.recode import estimate_jpeg_quality, recode, see_through_pixels

__all__ = [
    "ARTIFACT_NOT_STORED",
    "SIDECAR_NOT_STORED",
    "ArtifactLinker",
    "ArtifactSink",
    "MaterializeLimits",
    "Materializer",
    "PublishedArtifact",
    "VerifiedImage",
    "operation_summary",
]

T = TypeVar("T")
MiB = 1024 * 1024
INLINE_BYTES = 256 * 1024
"""Outputs up to this size (encoded) are decoded, verified and re-encoded on the event
loop: for such small images a worker-thread hop costs more CPU and latency than the work."""
INLINE_PIXELS = 256 * 256
"""…and only when the header says at most this many pixels (a small file can still
declare a huge image); anything larger is verified in a worker thread."""


@dataclass(frozen=True, slots=True)
class MaterializeLimits:
    max_base64_chars: int = 128 * MiB
    max_response_bytes: int = 256 * MiB
    image: ImageLimits = field(default_factory=ImageLimits)


@dataclass(frozen=True, slots=True)
class PublishedArtifact:
    id: str
    name: str


class ArtifactSink(Protocol):
    """Where ``artifact``/``url`` outputs are published (the artifact store implements it)."""

    async def publish(
        self,
        data: bytes,
        *,
        expected_format: OutputFormat,
        owner: str,
        filename_prefix: str | None,
        directory: str | None,
        filename: str | None,
        collision: ArtifactCollisionPolicy,
    ) -> PublishedArtifact: ...

    async def attach_metadata(self, artifact_id: str, name: str, record: dict[str, Any]) -> str:
        """Write the sidecar beside the artifact; returns its portable name."""
        ...


class ArtifactLinker(Protocol):
    """Makes the ``url`` of a published artifact: a bridge-hosted signed link, or (an
    absolute URL) a presigned URL of the object store."""

    async def ready(self) -> None:
        """Fail now, before paid work, if no link could be made later."""
        ...

    async def link(self, artifact: PublishedArtifact) -> str:
        """The link's path and query, relative to the bridge's base address, or an
        absolute ``http(s)://`` URL used as it is."""
        ...


def _storage_fault(error: BridgeError) -> bool:
    """The artifact storage did not take a write: a disk fault, or an object store that
    did not answer or refused (the S3 store marks those ``details.storage``)."""
    return (
        error.details.get("reason") in DISK_FAULT_REASONS
        or error.details.get("storage") == "artifacts"
    )


ARTIFACT_NOT_STORED = "artifact_not_stored"
"""Warning: storage failed (full disk, I/O error, an object store away) after the image
was made and paid for, so it is delivered inline as ``b64_json`` instead (``data[i].type``
normalization says why)."""
SIDECAR_NOT_STORED = "metadata_sidecar_not_stored"
"""Warning: the artifact was stored but storage failed before its metadata sidecar was."""

FORMAT_WARNING = "provider_output_format_differed"
FORMAT_REENCODED = "provider_output_format_reencoded"
QUALITY_WARNING = "provider_output_quality_differed"
BACKGROUND_WARNING = "provider_output_background_differed"
JPEG_QUALITY_TOLERANCE = 2
"""Quality points a JPEG's tables may differ from the asked ``output_compression`` by."""

C2PA_WARNING = "c2pa_manifest_invalidated"
"""Embedded metadata changed bytes that a C2PA manifest had signed."""


@dataclass(slots=True)
class VerifiedImage:
    """One output after verification, before projection."""

    index: int
    data: bytes
    info: ImageInfo
    generation_ms: int | None
    encoded: str | None = None
    """The provider's base64 of exactly ``data`` (canonical), passed on instead of encoding
    ``data`` again; ``None`` once ``data`` changes or when it was released."""

    def replace_data(self, data: bytes, info: ImageInfo) -> None:
        self.data, self.info, self.encoded = data, info, None


def operation_summary(request: ImageRequest) -> dict[str, Any]:
    """What the request did, without paths or bytes."""
    return {
        "kind": request.operation.value,
        "input_images": len(request.edit_images),
        "reference_images": len(request.reference_images),
        "mask": request.mask is not None,
    }


def _protocol(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.PROTOCOL, message, details=details)


def _verification_failure(error: BridgeError, index: int) -> BridgeError:
    """Re-code an inspection failure, keeping the specific reason."""
    details = dict(error.details)
    details["reason"] = error.message
    details["output_index"] = index
    return BridgeError(
        ErrorCode.ARTIFACT,
        "provider output image failed independent verification",
        details=details,
    )


async def _each(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """``asyncio.gather`` of ``calls``; a single one (the common single image) is awaited
    directly, which gives the same result without a task and its scheduling."""
    if len(calls) == 1:
        return [await calls[0]]
    return list(await asyncio.gather(*calls))


def _delivered(response: ImageResponse, projected: list[GeneratedImage]) -> ImageResponse:
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


def _sizes(verified: list[VerifiedImage]) -> list[tuple[int, int, int]]:
    return [(image.index, image.info.width, image.info.height) for image in verified]


def _decode_boxed(box: list[str]) -> bytes:
    """Decode the base64 text in ``box`` (a worker thread's argument).

    The executor's work item (and so its arguments) can outlive the ``await`` for a moment
    on a busy machine; passing the text itself would keep it alive after ``box`` released
    it for the pixels' sake (:meth:`Materializer._inspect`).
    """
    return decode_strict(box[0])


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

    async def check_delivery(self, effective: ImageRequest, link_base: str | None) -> None:
        """Refuse, before any provider work, a delivery that could not be made afterwards."""
        if effective.output.response_format not in (ResponseFormat.URL, ResponseFormat.ARTIFACT):
            return
        if self.artifacts is None:
            raise BridgeError(ErrorCode.CONFIGURATION, "artifact storage is not configured")
        if effective.output.response_format is ResponseFormat.ARTIFACT:
            return
        if self.url_base(link_base) is None:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "public artifact base URL is not configured",
                details={"field": "output.response_format"},
            )
        if self.links is None:
            raise BridgeError(ErrorCode.CONFIGURATION, "artifact links are not configured")
        await self.links.ready()

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
    ) -> ImageResponse:
        """Verify ``response`` against ``effective`` and project it for delivery.

        ``original`` is the caller's request: its size ask is what delivered sizes are
        compared with (and embedded metadata records name it). ``link_base`` is the
        address the caller reached the bridge on (for ``url`` outputs). ``mask``:
        composite every output through an emulated mask. ``on_transport_size`` hears how
        the transport's own output compared with the ask (before any compositing), even
        when the request then fails on ``policies.size_mismatch``.
        ``response`` is consumed: its items' base64 text is released once decoded.
        """
        self._check_output_set(response, effective)
        budget = self._initial_budget(response)
        verified = await _each([self._verify(item, effective) for item in response.data])
        for image in verified:
            budget += len(image.data)
            self._check_budget(budget)
        normalizations: list[Normalization] = []
        warnings: list[str] = []
        encoder_notes = await _each([self._encoder(image, effective) for image in verified])
        for notes in encoder_notes:
            normalizations.extend(notes)
        if any(n.reason == FORMAT_REENCODED for n in normalizations):
            warnings.append(FORMAT_WARNING)
        if any(n.reason == QUALITY_WARNING for n in normalizations):
            warnings.append(QUALITY_WARNING)
        if any(n.reason == BACKGROUND_WARNING for n in normalizations):
            warnings.append(BACKGROUND_WARNING)
        asked = (original or effective).parameters
        if on_transport_size is not None:
            transport = size_report(asked, effective.parameters.size, _sizes(verified))
            if transport is not None:
                on_transport_size(transport)
        if mask is not None:
            normalizations.extend(
                await _each([self._composite(image, mask, effective) for image in verified])
            )
            warnings.append("mask_emulated")
        delivered = size_report(asked, effective.parameters.size, _sizes(verified))
        if delivered is not None:
            refusal = size_mismatch_error(delivered, (original or effective).policies.size_mismatch)
            if refusal is not None:
                raise refusal
        background = effective.parameters.background
        for image in verified:
            if plan is not None:
                normalizations.extend(await self._apply_chroma(image, plan, effective))
            elif background is Background.TRANSPARENT:
                normalizations.append(await self._validate_native_alpha(image))
        size_changes = self._reconcile_dimensions(verified, effective, response)
        if size_changes:
            normalizations.extend(size_changes)
            warnings.append("provider_output_dimensions_differed")
        if delivered is not None and not delivered.matched:
            normalizations.extend(delivered.normalizations)
            warnings.append(SIZE_WARNING)
        if effective.output.metadata.embeds:
            # Asked for: XMP goes into the bytes, which breaks the C2PA manifest's binding.
            if any(has_c2pa_manifest(image.data, image.info.format) for image in verified):
                warnings.append(C2PA_WARNING)
            record_response = response.model_copy(deep=True)
            record_response.normalizations.extend(normalizations)
            for warning in warnings:
                record_response.add_warning(warning)
            await _each(
                [
                    self._embed(image, record_response, original or effective, effective)
                    for image in verified
                ]
            )
        projected: list[GeneratedImage] = []
        unstored: list[Normalization] = []
        if effective.output.response_format in (ResponseFormat.B64_JSON, ResponseFormat.METADATA):
            projected = await _each(
                [self._project(i, effective, owner, link_base) for i in verified]
            )
        else:  # publication is sequential so collision suffixes stay deterministic
            for image in verified:
                projected.append(await self._project(image, effective, owner, link_base, unstored))
        if unstored:
            normalizations.extend(unstored)
            warnings.append(ARTIFACT_NOT_STORED)
        for item in projected:
            budget += self._payload_size(item)
            self._check_budget(budget)
        result = _delivered(response, projected)
        result.normalizations.extend(normalizations)
        for warning in warnings:
            result.add_warning(warning)
        return result

    # -- checks ---------------------------------------------------------------------------

    @staticmethod
    def _check_output_set(response: ImageResponse, effective: ImageRequest) -> None:
        n = effective.parameters.n
        if (
            effective.parameters.failure_policy is MultiImageFailurePolicy.FAIL_FAST
            and response.failures
        ):
            raise _protocol("provider returned partial failures under fail-fast policy")
        actual = len(response.data) + len(response.failures)
        if actual != n:
            raise _protocol(
                "provider returned a different number of outputs", expected=n, actual=actual
            )
        indices = sorted([i.index for i in response.data] + [f.index for f in response.failures])
        if indices != list(range(n)):
            raise _protocol("provider returned duplicate or missing output indices")
        for items in ([i.index for i in response.data], [f.index for f in response.failures]):
            if any(later <= earlier for earlier, later in itertools.pairwise(items)):
                raise _protocol("provider returned outputs in an unstable index order")

    def _initial_budget(self, response: ImageResponse) -> int:
        total = len(response.id) + len(response.provider) + len(response.model)
        total += len(response.revised_prompt or "") + sum(len(w) for w in response.warnings)
        total += sum(self._payload_size(item) for item in response.data)
        self._check_budget(total)
        return total

    @staticmethod
    def _payload_size(item: GeneratedImage) -> int:
        if item.b64_json is not None:
            return len(item.b64_json)
        if item.url is not None:
            return len(item.url)
        return len(item.id or "") + len(item.name or "")

    def _check_budget(self, total: int) -> None:
        if total > self.limits.max_response_bytes:
            raise _protocol(
                "aggregate response payload exceeds the configured byte limit",
                maximum_bytes=self.limits.max_response_bytes,
            )

    async def _verify(self, item: GeneratedImage, effective: ImageRequest) -> VerifiedImage:
        if item.type == "url":
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "provider returned a URL output but remote output fetching is not configured",
            )
        if item.type != "b64_json" or item.b64_json is None:
            raise _protocol("provider returned an unverifiable internal payload type")
        if len(item.b64_json) > self.limits.max_base64_chars:
            raise _protocol(
                "provider base64 output exceeds the configured limit",
                maximum_bytes=self.limits.max_base64_chars,
            )
        decoded = take_decoded(item)
        # The provider's text, kept to be passed on unless the pixels need the memory:
        # ``text[0]`` is its only reference from here on (bench/memory.py).
        text = [item.b64_json.strip()]
        item.b64_json = None
        if decoded is not None:
            # The provider decoded this payload and computed its facts over exactly these
            # bytes: no second base64 decode and hash of the same payload.
            data = decoded.data
        else:
            try:
                if len(text[0]) <= INLINE_BYTES * 4 // 3:
                    data = decode_strict(text[0])
                else:
                    data = await asyncio.to_thread(_decode_boxed, text)
            except (binascii.Error, ValueError):
                raise _protocol("provider returned malformed base64 image data") from None
        try:
            if decoded is not None and decoded.verified_under == self.limits.image:
                info = decoded.info  # fully decoded under these very limits, in this process
            else:
                info = await self._inspect(data, decoded.info.sha256 if decoded else None, text)
        except BridgeError as error:
            raise _verification_failure(error, item.index) from None
        declared = (item.format, item.width, item.height, item.bytes, item.sha256)
        actual = (info.format, info.width, info.height, info.bytes, info.sha256)
        if declared != actual:
            raise _protocol(
                "provider output metadata does not match the decoded image",
                output_index=item.index,
            )
        encoded = text[0] if text and is_canonical(text[0]) else None
        return VerifiedImage(item.index, data, info, item.generation_ms, encoded)

    async def _inspect(self, data: bytes, sha256: str | None, text: list[str]) -> ImageInfo:
        """Full verification: on the loop for a small image, else in a worker thread.

        ``text`` (the payload's base64) is emptied if the check needs a pixel buffer: a
        large image's base64 (1.33x its size) is not held alongside its pixels
        (bench/memory.py). A plain PNG's check needs none, and its text is passed on.
        """
        if len(data) <= INLINE_BYTES:
            small = replace(
                self.limits.image, max_pixels=min(self.limits.image.max_pixels, INLINE_PIXELS)
            )
            try:
                return inspect_image(data, small, sha256=sha256)
            except BridgeError:
                pass  # more pixels than the loop should decode, or invalid: the full check
        return await asyncio.to_thread(
            inspect_image, data, self.limits.image, sha256=sha256, before_pixel_buffer=text.clear
        )

    # -- what the transport's encoder did -------------------------------------------------------

    async def _encoder(self, image: VerifiedImage, effective: ImageRequest) -> list[Normalization]:
        """Another format than negotiated is re-encoded into it; a JPEG quality other than
        the ``output_compression`` asked for is reported (as its tables show it), and so
        is see-through alpha in an image asked to be opaque."""
        notes: list[Normalization] = []
        params = effective.parameters
        if params.background is Background.OPAQUE and image.info.has_alpha:
            see_through = await asyncio.to_thread(see_through_pixels, image.data, self.limits.image)
            if see_through:
                notes.append(
                    Normalization(
                        field=f"data[{image.index}].background",
                        requested=Background.OPAQUE.value,
                        effective={"see_through_pixels": see_through},
                        reason=BACKGROUND_WARNING,
                    )
                )
        expected = params.output_format
        made = image.info.format
        if made is not expected:
            try:
                data, info = await asyncio.to_thread(
                    recode,
                    image.data,
                    expected,
                    compression=params.output_compression,
                    limits=self.limits.image,
                )
            except BridgeError as error:
                failure = _verification_failure(error, image.index)
                failure.details.setdefault("stage", "format_reencode")
                raise failure from None
            image.replace_data(data, info)
            notes.append(
                Normalization(
                    field=f"data[{image.index}].format",
                    requested=expected.value,
                    effective={"provider": made.value, "delivered": expected.value},
                    reason=FORMAT_REENCODED,
                )
            )
        elif made is OutputFormat.JPEG and params.output_compression is not None:
            shown = await asyncio.to_thread(estimate_jpeg_quality, image.data)
            wanted = params.output_compression
            if shown is not None and abs(shown - wanted) > JPEG_QUALITY_TOLERANCE:
                notes.append(
                    Normalization(
                        field=f"data[{image.index}].output_compression",
                        requested=wanted,
                        effective=shown,
                        reason=QUALITY_WARNING,
                    )
                )
        return notes

    # -- masks ------------------------------------------------------------------------------

    async def _composite(
        self, image: VerifiedImage, plan: MaskPlan, effective: ImageRequest
    ) -> Normalization:
        """The edit composited through the emulated mask, at the source's size."""
        try:
            result = await asyncio.to_thread(
                composite_masked,
                plan.source.data,
                plan.mask.data,
                image.data,
                feather_px=plan.feather_px,
                output_format=effective.parameters.output_format,
                compression=effective.parameters.output_compression,
                limits=self.limits.image,
            )
        except BridgeError as error:
            failure = _verification_failure(error, image.index)
            failure.details.setdefault("stage", "mask_composite")
            raise failure from None
        image.replace_data(result.data, result.info)
        generated = f"{result.generated_size[0]}x{result.generated_size[1]}"
        return Normalization(
            field=f"data[{image.index}].mask",
            effective={
                "composited": True,
                "region": plan.region.box,
                "feather_px": plan.feather_px,
                "generated_size": generated,
                "delivered_size": f"{result.info.width}x{result.info.height}",
                "resampled": result.resampled,
            },
            reason="mask_composited_over_source",
        )

    # -- transparency ------------------------------------------------------------------------

    async def _apply_chroma(
        self, image: VerifiedImage, plan: ChromaPlan, effective: ImageRequest
    ) -> list[Normalization]:
        try:
            result = await asyncio.to_thread(
                remove_background,
                image.data,
                key="auto",
                transparent_threshold=plan.transparent_threshold,
                opaque_threshold=plan.opaque_threshold,
                despill=plan.despill,
                output_format=effective.parameters.output_format,
                limits=self.limits.image,
            )
        except BridgeError as error:
            failure = _verification_failure(error, image.index)
            failure.details.setdefault("stage", "transparent_background")
            raise failure from None
        image.replace_data(result.data, result.info)
        return [
            Normalization(
                field=f"data[{image.index}].transparency.key_color",
                requested=plan.key_color,
                effective=result.key.hex,
                reason="sampled_provider_output_border",
            ),
            Normalization(
                field=f"data[{image.index}].transparency.alpha",
                effective=result.alpha.to_dict(),
                reason="validated_chroma_key_alpha",
            ),
        ]

    async def _validate_native_alpha(self, image: VerifiedImage) -> Normalization:
        try:
            summary = await asyncio.to_thread(
                inspect_transparent_alpha, image.data, self.limits.image
            )
        except BridgeError as error:
            failure = _verification_failure(error, image.index)
            failure.details.setdefault("stage", "transparent_background")
            raise failure from None
        return Normalization(
            field=f"data[{image.index}].transparency.alpha",
            effective=summary.to_dict(),
            reason="validated_native_alpha",
        )

    # -- metadata --------------------------------------------------------------------------

    async def _embed(
        self,
        image: VerifiedImage,
        response: ImageResponse,
        original: ImageRequest,
        effective: ImageRequest,
    ) -> None:
        """Embed the generation record as XMP (pixels untouched; bytes and sha256 change)."""
        timings: dict[str, Any] = {
            "queue_ms": response.timings.queue_ms,
            "provider_ms": response.timings.provider_ms,
        }
        if image.generation_ms is not None:
            timings["generation_ms"] = image.generation_ms
        record = build_generation_record(
            request_id=response.id,
            created=response.created,
            operation=operation_summary(original),
            original_prompt=original.prompt,
            effective_prompt=effective.prompt,
            negative_prompt=original.negative_prompt,
            policies=effective.policies.model_dump(mode="json"),
            provider=response.provider,
            model=response.model,
            requested=response.requested.model_dump(mode="json"),
            effective=response.effective.model_dump(mode="json"),
            normalizations=[n.model_dump(mode="json") for n in response.normalizations],
            revised_prompt=response.revised_prompt,
            usage=response.usage.model_dump(mode="json") if response.usage else None,
            session=response.session.model_dump(mode="json") if response.session else None,
            timings=timings,
            warnings=list(response.warnings),
            image={
                "index": image.index,
                "format": image.info.format.value,
                "width": image.info.width,
                "height": image.info.height,
            },
        )

        def embed() -> tuple[bytes, ImageInfo]:
            _, encoded = fit_generation_record(record)
            return embed_metadata(image.data, image.info.format, encoded, self.limits.image)

        try:
            image.replace_data(*await asyncio.to_thread(embed))
        except BridgeError as error:
            if error.code is ErrorCode.ARTIFACT:
                raise
            raise BridgeError(
                ErrorCode.ARTIFACT, error.message, details=error.details or None
            ) from error

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
        common = {
            "version": 1,
            "request_id": response.id,
            "created": response.created,
            "operation": operation_summary(original),
            "original_prompt": original.prompt,
            "effective_prompt": effective.prompt,
        }
        if original.negative_prompt is not None:
            common["negative_prompt"] = original.negative_prompt
        common.update(
            {
                "policies": effective.policies.model_dump(mode="json"),
                "provider": response.provider,
                "model": response.model,
                "requested": response.requested.model_dump(mode="json"),
                "effective": response.effective.model_dump(mode="json"),
                "normalizations": [n.model_dump(mode="json") for n in response.normalizations],
            }
        )
        if response.attempts:
            common["attempts"] = [a.model_dump(mode="json") for a in response.attempts]
        for key in ("revised_prompt", "usage", "session"):
            value = getattr(response, key)
            if value is not None:
                common[key] = value if isinstance(value, str) else value.model_dump(mode="json")
        common["timings"] = response.timings.model_dump(mode="json")
        common["warnings"] = list(response.warnings)
        result = response.model_copy(deep=True)
        for item in result.data:
            if item.type == "b64_json" and ARTIFACT_NOT_STORED in result.warnings:
                continue  # delivered inline: storage failed, there is nothing to describe
            if item.type != "artifact" or item.id is None or item.name is None:
                raise _protocol("metadata sidecars require named artifact outputs")
            image: dict[str, Any] = {
                "index": item.index,
                "artifact_name": item.name,
                "format": item.format.value,
                "width": item.width,
                "height": item.height,
                "bytes": item.bytes,
                "sha256": item.sha256,
            }
            if item.generation_ms is not None:
                image["generation_ms"] = item.generation_ms
            try:
                item.metadata_name = await self.artifacts.attach_metadata(
                    item.id, item.name, {**common, "image": image}
                )
            except BridgeError as error:
                if not _storage_fault(error):
                    raise
                result.add_warning(SIDECAR_NOT_STORED)  # the image itself is stored
        return result

    # -- dimensions ---------------------------------------------------------------------------

    @staticmethod
    def _reconcile_dimensions(
        verified: list[VerifiedImage], effective: ImageRequest, response: ImageResponse
    ) -> list[Normalization]:
        dims = parse_size(effective.parameters.size)
        if dims is None or not verified:
            return []
        wanted = f"{dims[0]}x{dims[1]}"
        actual = [f"{image.info.width}x{image.info.height}" for image in verified]
        if all(size == wanted for size in actual):
            return []
        if len(set(actual)) == 1:
            response.effective.size = actual[0]
            return [
                Normalization(
                    field="parameters.size",
                    requested=wanted,
                    effective=actual[0],
                    reason="provider_output_dimensions_differed",
                )
            ]
        return [
            Normalization(
                field=f"data[{image.index}].size",
                requested=wanted,
                effective=size,
                reason="provider_output_dimensions_differed",
            )
            for image, size in zip(verified, actual, strict=True)
            if size != wanted
        ]

    # -- projection ---------------------------------------------------------------------------

    async def _project(
        self,
        image: VerifiedImage,
        effective: ImageRequest,
        owner: str,
        link_base: str | None,
        unstored: list[Normalization] | None = None,
    ) -> GeneratedImage:
        """The delivered item. An ``artifact``/``url`` image whose publication meets a
        storage fault (the image is made and billed by then) is delivered inline instead,
        within ``max_response_bytes``, with a normalization appended to ``unstored``."""
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
        await self.check_delivery(effective, link_base)
        assert self.artifacts is not None
        output = effective.output
        try:
            published = await self.artifacts.publish(
                image.data,
                expected_format=info.format,
                owner=owner,
                filename_prefix=output.filename_prefix,
                directory=output.directory,
                filename=output.filename,
                collision=output.collision,
            )
        except BridgeError as error:
            reason = error.details.get("reason")
            if unstored is None or not _storage_fault(error):
                raise
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
        if response_format is ResponseFormat.URL:
            base, links = self.url_base(link_base), self.links
            assert base is not None
            assert links is not None
            link = await links.link(published)
            url = link if link.startswith(("https://", "http://")) else base + link
            return GeneratedImage(type="url", url=url, **common)
        return GeneratedImage(type="artifact", id=published.id, name=published.name, **common)
