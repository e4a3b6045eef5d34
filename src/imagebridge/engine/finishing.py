"""Finishing: what a verified image goes through before it is delivered.

The transport's encoder is checked against what was negotiated (another format is
re-encoded, another JPEG quality or see-through pixels in an image asked opaque are
reported), an emulated mask is composited over the source, a chroma key is removed or
native alpha validated, and dimensions other than asked are reported. Each step changes a
:class:`~.verification.VerifiedImage` through ``replace_data`` and answers with the
normalizations that say what it did; pixel work runs in a worker thread.
"""

from __future__ import annotations

import asyncio

from imagebridge.contract.enums import Background, OutputFormat
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest, parse_size
from imagebridge.contract.response import ImageResponse, Normalization
from imagebridge.engine.masking import MaskPlan
from imagebridge.engine.transparency import ChromaPlan
from imagebridge.engine.verification import VerifiedImage, verification_failure
from imagebridge.imaging.chroma.images import inspect_transparent_alpha, remove_background
from imagebridge.imaging.inspect import ImageLimits
from imagebridge.imaging.masks import composite_masked
from imagebridge.imaging.recode import estimate_jpeg_quality, recode, see_through_pixels

__all__ = [
    "BACKGROUND_WARNING",
    "DIMENSIONS_WARNING",
    "FORMAT_REENCODED",
    "FORMAT_WARNING",
    "QUALITY_WARNING",
    "apply_chroma",
    "check_encoding",
    "composite_mask",
    "encoding_warnings",
    "reconcile_dimensions",
    "validate_native_alpha",
]

FORMAT_WARNING = "provider_output_format_differed"
FORMAT_REENCODED = "provider_output_format_reencoded"
QUALITY_WARNING = "provider_output_quality_differed"
BACKGROUND_WARNING = "provider_output_background_differed"
DIMENSIONS_WARNING = "provider_output_dimensions_differed"
JPEG_QUALITY_TOLERANCE = 2
"""Quality points a JPEG's tables may differ from the asked ``output_compression`` by."""


# -- what the transport's encoder did -------------------------------------------------------


async def check_encoding(
    image: VerifiedImage, effective: ImageRequest, limits: ImageLimits
) -> list[Normalization]:
    """Another format than negotiated is re-encoded into it; a JPEG quality other than
    the ``output_compression`` asked for is reported (as its tables show it), and so
    is see-through alpha in an image asked to be opaque."""
    notes: list[Normalization] = []
    params = effective.parameters
    if params.background is Background.OPAQUE and image.info.has_alpha:
        see_through = await asyncio.to_thread(see_through_pixels, image.data, limits)
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
        await _reencode(image, made, expected, params.output_compression, limits, notes)
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


async def _reencode(
    image: VerifiedImage,
    made: OutputFormat,
    expected: OutputFormat,
    compression: int | None,
    limits: ImageLimits,
    notes: list[Normalization],
) -> None:
    try:
        data, info = await asyncio.to_thread(
            recode, image.data, expected, compression=compression, limits=limits
        )
    except BridgeError as error:
        raise verification_failure(error, image.index, "format_reencode") from None
    image.replace_data(data, info)
    notes.append(
        Normalization(
            field=f"data[{image.index}].format",
            requested=expected.value,
            effective={"provider": made.value, "delivered": expected.value},
            reason=FORMAT_REENCODED,
        )
    )


def encoding_warnings(normalizations: list[Normalization]) -> list[str]:
    """The response warnings :func:`check_encoding`'s notes call for, in their fixed order."""
    reasons = {n.reason for n in normalizations}
    warnings: list[str] = []
    if FORMAT_REENCODED in reasons:
        warnings.append(FORMAT_WARNING)
    if QUALITY_WARNING in reasons:
        warnings.append(QUALITY_WARNING)
    if BACKGROUND_WARNING in reasons:
        warnings.append(BACKGROUND_WARNING)
    return warnings


# -- masks ------------------------------------------------------------------------------


async def composite_mask(
    image: VerifiedImage, plan: MaskPlan, effective: ImageRequest, limits: ImageLimits
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
            limits=limits,
        )
    except BridgeError as error:
        raise verification_failure(error, image.index, "mask_composite") from None
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


async def apply_chroma(
    image: VerifiedImage, plan: ChromaPlan, effective: ImageRequest, limits: ImageLimits
) -> list[Normalization]:
    """The chroma key removed, its colour sampled from the image's actual border."""
    try:
        result = await asyncio.to_thread(
            remove_background,
            image.data,
            key="auto",
            transparent_threshold=plan.transparent_threshold,
            opaque_threshold=plan.opaque_threshold,
            despill=plan.despill,
            output_format=effective.parameters.output_format,
            limits=limits,
        )
    except BridgeError as error:
        raise verification_failure(error, image.index, "transparent_background") from None
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


async def validate_native_alpha(image: VerifiedImage, limits: ImageLimits) -> Normalization:
    """A transport's own transparency, checked to be there (no corner rule)."""
    try:
        summary = await asyncio.to_thread(inspect_transparent_alpha, image.data, limits)
    except BridgeError as error:
        raise verification_failure(error, image.index, "transparent_background") from None
    return Normalization(
        field=f"data[{image.index}].transparency.alpha",
        effective=summary.to_dict(),
        reason="validated_native_alpha",
    )


# -- dimensions ---------------------------------------------------------------------------


def reconcile_dimensions(
    verified: list[VerifiedImage], effective: ImageRequest, response: ImageResponse
) -> list[Normalization]:
    """Dimensions other than the explicit size asked: one ``parameters.size`` change (and
    ``response.effective.size``) when every image agrees, else one note per image."""
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
                reason=DIMENSIONS_WARNING,
            )
        ]
    return [
        Normalization(
            field=f"data[{image.index}].size",
            requested=wanted,
            effective=size,
            reason=DIMENSIONS_WARNING,
        )
        for image, size in zip(verified, actual, strict=True)
        if size != wanted
    ]
