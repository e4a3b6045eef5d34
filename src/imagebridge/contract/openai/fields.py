"""One decision per OpenAI Images request field: passed on, mapped, ignored, or refused.

OpenAI's SDKs send fields the bridge's native request has no slot for (``style``,
``safety_identifier``, ``quality: "hd"``, ``output_format: "gif"`` …). Both compatible
routes (JSON generations, multipart edits) run their values through :func:`translate`, so a
field means the same on both. Refusals name the OpenAI field in ``details.field`` (the
envelope's ``param``); the table in docs/api-decisions.md ("OpenAI clients") lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.response import Normalization

__all__ = [
    "IGNORED_FIELDS",
    "OPENAI_QUALITIES",
    "REFUSED_FIELDS",
    "Translation",
    "invalid",
    "openai_param",
    "refuse",
    "translate",
    "validation_refusal",
]

_MAX_PARAM_CHARS = 100

PASSED = ("n", "size", "output_compression", "background", "moderation", "input_fidelity")
"""Fields whose OpenAI values are the native ``parameters`` values."""

OPENAI_QUALITIES: dict[str, str] = {
    "auto": "auto",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "standard": "medium",  # DALL·E's default quality
    "hd": "high",  # DALL·E's finer quality
    "xhigh": "high",  # above every bridge provider's highest level
    "max": "high",
}
NATIVE_FORMATS = frozenset({"png", "jpeg", "webp"})

IGNORED_FIELDS: dict[str, str] = {
    "style": "openai_style_ignored",
    "complexity": "openai_complexity_ignored",
}
"""Hints whose absence still yields the image asked for: accepted, reported as a warning."""

REFUSED_FIELDS: dict[str, str] = {
    "frame_count": "GIF frames need output_format gif, which no bridge provider produces",
    "frame_duration_ms": "GIF frames need output_format gif, which no bridge provider produces",
    "svg": "SVG authoring needs output_format svg, which no bridge provider produces",
    "markup": "markup overlays are not supported by the bridge's providers; use mask",
}
"""Fields that change what is produced in a way no provider can honour: a 400 naming them."""

_NATIVE_PARAMS: dict[str, str] = {
    "routing.model": "model",
    "routing.provider": "imagegen_bridge.provider",
    "output.response_format": "response_format",
    "images": "image",
}


@dataclass(slots=True)
class Translation:
    """The native ``parameters`` and ``user`` an OpenAI request maps to, and what changed."""

    parameters: dict[str, Any] = field(default_factory=dict)
    user: str | None = None
    normalizations: list[Normalization] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def refuse(param: str, message: str) -> BridgeError:
    """A valid OpenAI value no bridge provider can honour: 400 ``unsupported_capability``."""
    return BridgeError(ErrorCode.UNSUPPORTED_CAPABILITY, message, details={"field": param})


def invalid(param: str, message: str) -> BridgeError:
    """A value OpenAI refuses too: the contract's request-shape 422."""
    return BridgeError(ErrorCode.INVALID_REQUEST, message, details={"field": param})


def translate(values: Mapping[str, Any]) -> Translation:
    """Map decoded OpenAI fields (``None`` = absent) onto the native request's pieces."""
    out = Translation()
    for name in PASSED:
        if values.get(name) is not None:
            out.parameters[name] = values[name]
    compression = values.get("output_compression")
    if compression is not None:
        if compression > 100:
            raise invalid("output_compression", "output_compression must be 0 to 100")
        if values.get("output_format") in (None, "png"):
            # OpenAI applies it to jpeg and webp only; PNG output is lossless either way
            del out.parameters["output_compression"]
            out.warnings.append("openai_output_compression_ignored_for_png")
    quality = values.get("quality")
    if quality is not None:
        native = OPENAI_QUALITIES[quality]
        out.parameters["quality"] = native
        if native != quality:
            out.normalizations.append(
                Normalization(
                    field="quality",
                    requested=quality,
                    effective=native,
                    reason="openai_quality_mapped_to_provider_level",
                )
            )
    output_format = values.get("output_format")
    if output_format is not None:
        if output_format not in NATIVE_FORMATS:
            raise refuse(
                "output_format",
                f"output_format {output_format} is not produced by the bridge's providers "
                "(png, jpeg, webp)",
            )
        out.parameters["output_format"] = output_format
    partial = values.get("partial_images")
    if partial is not None:
        if partial > 3:
            raise invalid("partial_images", "partial_images must be 0 to 3")
        out.parameters["partial_images"] = partial
    for name, message in REFUSED_FIELDS.items():
        if values.get(name) is not None:
            raise refuse(name, message)
    for name, warning in IGNORED_FIELDS.items():
        if values.get(name) is not None:
            out.warnings.append(warning)
    identifier = values.get("safety_identifier")
    out.user = identifier if identifier else values.get("user")
    return out


def openai_param(native_field: str | None) -> str | None:
    """The OpenAI request field a native field path corresponds to (``parameters.n`` → ``n``)."""
    if native_field is None:
        return None
    if native_field.startswith("parameters."):
        return native_field.removeprefix("parameters.")
    for prefix, param in _NATIVE_PARAMS.items():
        if native_field == prefix or native_field.startswith((prefix + "[", prefix + ".")):
            return param
    return native_field


def _loc_param(loc: tuple[int | str, ...]) -> str | None:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + item)
    param = "".join(parts)
    if not param or len(param) > _MAX_PARAM_CHARS or not param.isprintable():
        return None
    return param


def validation_refusal(exc: ValidationError, fallback: str) -> BridgeError:
    """The first problem of a decoded OpenAI body as a 422 naming the field.

    The message is ours (pydantic's text could echo the value); the allowed values of a
    closed set are ours too, so they are named.
    """
    for error in exc.errors(include_url=False, include_input=False):
        param = _loc_param(error["loc"])
        if param is None:
            continue
        kind = error["type"]
        if kind == "extra_forbidden":
            message = f"{param} is not a field of this request"
        elif kind == "missing":
            message = f"{param} is required"
        elif kind in ("literal_error", "enum"):
            expected = (error.get("ctx") or {}).get("expected")
            message = f"{param} must be one of {expected}" if expected else f"{param} is invalid"
        else:
            message = f"{param} is invalid"
        return invalid(param, message)
    return BridgeError.invalid_request(fallback)
