"""Transparent-background planning: native alpha, or a local chroma key.

Planning is pure: it rewrites the request the provider sees and returns a :class:`ChromaPlan`
for the materializer, which samples the real border colour and removes it from the pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imagebridge.contract.capabilities import ProviderCapabilities
from imagebridge.contract.enums import (
    Background,
    CompatibilityMode,
    OutputFormat,
    SupportLevel,
    TransparencyMode,
)
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import Normalization
from imagebridge.engine.validation import parse_key_color
from imagebridge.imaging.chroma.keys import choose_key_for_prompt

__all__ = [
    "ChromaPlan",
    "TransparencyPreparation",
    "choose_key_color",
    "chroma_prompt_suffix",
    "prepare_transparency",
]


@dataclass(frozen=True, slots=True)
class ChromaPlan:
    """How the materializer turns a keyed background into alpha."""

    key_color: str
    transparent_threshold: int
    opaque_threshold: int
    despill: bool


@dataclass(slots=True)
class TransparencyPreparation:
    request: ImageRequest
    plan: ChromaPlan | None = None
    normalizations: list[Normalization] = field(default_factory=list)


def choose_key_color(prompt: str) -> str:
    """The key colour the prompt mentions least, as ``#rrggbb`` (whole-word matching)."""
    return choose_key_for_prompt(prompt).hex


def chroma_prompt_suffix(key_color: str) -> str:
    return (
        "\n\nTRANSPARENT BACKGROUND WORKFLOW: Render the complete subject isolated on a "
        f"perfectly flat, uniform, solid {key_color} background with no gradient, texture, "
        "pattern, horizon, environment, floor, cast shadow, glow, reflection or extra objects. "
        "Keep every part of the subject away from the image edges and keep its contours clean "
        f"and antialiased. Do not use {key_color} anywhere in the subject."
    )


def _unsupported(
    caps: ProviderCapabilities, message: str, field_name: str, **details: Any
) -> BridgeError:
    error = BridgeError.unsupported(message, field=field_name, model=caps.model, **details)
    error.provider = caps.provider
    return error


def prepare_transparency(
    request: ImageRequest, caps: ProviderCapabilities
) -> TransparencyPreparation:
    """Plan a transparent background, or pass the request through unchanged."""
    if request.parameters.background is not Background.TRANSPARENT:
        return TransparencyPreparation(request=request)
    options = request.output.transparency
    native = caps.transparent_background is SupportLevel.NATIVE
    if (
        options.mode is TransparencyMode.AUTO
        and caps.transparent_background is SupportLevel.UNSUPPORTED
    ):
        raise _unsupported(
            caps,
            "selected provider/model does not support transparent output",
            "parameters.background",
        )
    if options.mode is TransparencyMode.AUTO:
        effective_mode = TransparencyMode.NATIVE if native else TransparencyMode.CHROMA_KEY
    else:
        effective_mode = options.mode
    normalizations = [
        Normalization(
            field="output.transparency.mode",
            requested=options.mode.value,
            effective=effective_mode.value,
            reason=(
                "provider_supports_native_alpha"
                if effective_mode is TransparencyMode.NATIVE
                else "provider_alpha_emulated_with_local_chroma_key"
            ),
        )
    ]
    if effective_mode is TransparencyMode.NATIVE and not native:
        raise _unsupported(
            caps,
            "provider has no native transparent output",
            "output.transparency.mode",
            requested="native",
        )
    data = request.model_dump(mode="python")
    params = data["parameters"]
    jpeg = params["output_format"] is OutputFormat.JPEG
    if jpeg:
        # JPEG has no alpha channel: refused (strict) or switched to PNG before any provider
        # call, on the native path too, where the provider would otherwise run and its
        # image fail the alpha check afterwards.
        if request.policies.compatibility is CompatibilityMode.STRICT:
            raise _unsupported(
                caps, "transparent output cannot be encoded as JPEG", "parameters.output_format"
            )
        params["output_format"] = OutputFormat.PNG
        params["output_compression"] = None
        normalizations.append(
            Normalization(
                field="parameters.output_format",
                requested="jpeg",
                effective="png",
                reason="transparent_output_requires_alpha_capable_format",
            )
        )
    if effective_mode is TransparencyMode.NATIVE:
        if jpeg:
            request = ImageRequest.model_validate(data)
        return TransparencyPreparation(request=request, normalizations=normalizations)
    if request.operation.value == "generate":
        data.pop("images", None)
        data.pop("mask", None)
    if options.key_color is not None:
        rgb = parse_key_color(options.key_color)
        if rgb is None:
            raise BridgeError.invalid_request(
                "key_color must be #RRGGBB", field="output.transparency.key_color"
            )
        key_color = "#{:02x}{:02x}{:02x}".format(*rgb)
        key_reason = "explicit_chroma_key"
    else:
        key_color = choose_key_color(request.prompt)
        key_reason = "prompt_aware_chroma_key_selection"
    if Background.AUTO in caps.backgrounds:
        params["background"] = Background.AUTO
    elif Background.OPAQUE in caps.backgrounds:
        params["background"] = Background.OPAQUE
    else:
        raise _unsupported(
            caps, "provider cannot generate a chroma-key background", "parameters.background"
        )
    data["prompt"] = request.prompt + chroma_prompt_suffix(key_color)
    normalizations.append(
        Normalization(
            field="parameters.background",
            requested="transparent",
            effective="transparent",
            reason="transparent_result_via_chroma_key_postprocessing",
        )
    )
    normalizations.append(
        Normalization(
            field="output.transparency.key_color",
            requested=options.key_color,
            effective=key_color,
            reason=key_reason,
        )
    )
    plan = ChromaPlan(
        key_color=key_color,
        transparent_threshold=options.transparent_threshold,
        opaque_threshold=options.opaque_threshold,
        despill=options.despill,
    )
    return TransparencyPreparation(
        request=ImageRequest.model_validate(data), plan=plan, normalizations=normalizations
    )
