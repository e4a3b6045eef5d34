"""Masks on every transport: the checks before a call and the plan for an emulated mask.

A mask reaches a route after negotiation. It is checked there, before any upstream call,
with the one shared rule (:func:`~imagebridge.engine.validation.check_mask`). When the
route's capability document says ``masks: emulated`` (and the caller allowed
normalization), negotiation took the mask out of the request; :func:`plan_mask_emulation`
then says in the prompt which area to change and hands the materializer what it needs to
composite the edit through the mask (:mod:`imagebridge.imaging.masks`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from imagebridge.contract.request import ImageRequest
from imagebridge.engine.inputs import LoadedImage, LoadedInputs
from imagebridge.engine.validation import check_mask
from imagebridge.imaging.inspect import ImageLimits
from imagebridge.imaging.masks import MaskRegion, describe_region, mask_region

__all__ = ["DEFAULT_FEATHER_PX", "MaskPlan", "check_request_mask", "plan_mask_emulation"]

DEFAULT_FEATHER_PX = 8


@dataclass(frozen=True, slots=True)
class MaskPlan:
    """What compositing needs: the source (first edit image), the mask and the seam."""

    source: LoadedImage
    mask: LoadedImage
    region: MaskRegion
    feather_px: int


def check_request_mask(inputs: LoadedInputs, *, emulated: bool) -> None:
    """The shared mask rule for a loaded request (nothing to check without a mask).

    Alpha is required when the bridge composites (it reads the mask's alpha); a native
    transport applies its own rule on top (OpenAI models require alpha too).
    """
    if inputs.mask is None or not inputs.images:
        return
    check_mask(inputs.mask.info, inputs.images[0].info, needs_alpha=emulated)


async def plan_mask_emulation(
    effective: ImageRequest,
    inputs: LoadedInputs,
    *,
    feather_px: int,
    limits: ImageLimits,
) -> tuple[ImageRequest, LoadedInputs, MaskPlan]:
    """The request sent without its mask (the area named in words), the inputs the
    provider sees (no mask) and the compositing plan."""
    assert inputs.mask is not None, "checked by check_request_mask"
    assert inputs.images, "checked by check_request_mask"
    region = await asyncio.to_thread(mask_region, inputs.mask.data, limits)
    prompt = f"{effective.prompt}\n\n{describe_region(region)}"
    request = effective.model_copy(update={"prompt": prompt})
    plan = MaskPlan(inputs.images[0], inputs.mask, region, feather_px)
    return request, replace(inputs, mask=None), plan
