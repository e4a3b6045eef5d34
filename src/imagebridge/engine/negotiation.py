"""Capability negotiation: fit a request to what one provider/model can do.

``strict`` refuses anything outside the capability document; ``normalize`` and
``best_effort`` (identical here) clamp or substitute and record each change as a
:class:`Normalization`. Some things are never normalized whatever the mode: an explicit
model, user attribution, input fidelity, sessions and inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from imagebridge.contract.capabilities import ProviderCapabilities
from imagebridge.contract.enums import (
    Background,
    CompatibilityMode,
    ImageAction,
    Moderation,
    NegativePromptMode,
    Operation,
    OutputFormat,
    Quality,
    RevisedPromptPolicy,
    SessionMode,
    SupportLevel,
)
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import GenerationParameters, ImageRequest
from imagebridge.contract.response import Normalization

__all__ = [
    "CODEX_MASK_CODE",
    "NEGATIVE_PROMPT_PREFIX",
    "NegotiationResult",
    "copy_parameters",
    "merge_negative_prompt",
    "negotiate_request",
]

CODEX_MASK_CODE = "CODEX_RASTER_MASK_UNSUPPORTED"
NEGATIVE_PROMPT_PREFIX = "\n\nNegative constraints (avoid these elements): "

E = TypeVar("E", bound=StrEnum)


@dataclass(slots=True)
class NegotiationResult:
    """The caller's parameters, the request to send, and every change made on the way."""

    requested: GenerationParameters
    request: ImageRequest
    normalizations: list[Normalization]
    mask_emulated: bool = False
    """The mask was taken out of ``request``: the bridge composites the edit through it."""


def copy_parameters(parameters: GenerationParameters) -> GenerationParameters:
    """An independent copy of ``parameters``.

    Every field of :class:`GenerationParameters` is an immutable scalar (int, str, enum or
    ``None``), so a shallow copy already shares nothing mutable; a deep copy costs several
    times more and this runs several times per request.
    """
    return parameters.model_copy()


def merge_negative_prompt(prompt: str, negative: str) -> str:
    return f"{prompt}{NEGATIVE_PROMPT_PREFIX}{negative}"


class _Negotiator:
    def __init__(self, request: ImageRequest, caps: ProviderCapabilities) -> None:
        self.original = request
        self.caps = caps
        self.strict = request.policies.compatibility is CompatibilityMode.STRICT
        self.data: dict[str, Any] = request.model_dump(mode="python")
        if request.operation is Operation.GENERATE:
            self.data.pop("images", None)
            self.data.pop("mask", None)
        self.params: dict[str, Any] = self.data["parameters"]
        self.normalizations: list[Normalization] = []
        self.mask_emulated = False

    # -- helpers -----------------------------------------------------------------------

    def unsupported(self, message: str, field: str, **details: Any) -> BridgeError:
        error = BridgeError.unsupported(message, field=field, model=self.caps.model, **details)
        error.provider = self.caps.provider
        return error

    def note(self, field: str, requested: Any, effective: Any, reason: str) -> None:
        self.normalizations.append(
            Normalization(
                field=field,
                requested=_json(requested),
                effective=_json(effective),
                reason=reason,
            )
        )

    def choose(self, field: str, value: E, supported: list[E], preferred: E) -> E:
        """Keep ``value`` if supported, else the preferred or first supported member."""
        if value in supported:
            return value
        if self.strict or not supported:
            raise self.unsupported(
                "requested value is outside provider capability",
                f"parameters.{field}",
                requested=value.value,
                supported=[member.value for member in supported],
            )
        fallback = preferred if preferred in supported else supported[0]
        self.note(f"parameters.{field}", value, fallback, "normalized_to_provider_value")
        return fallback

    # -- steps, in the original's order ----------------------------------------------

    def model(self) -> None:
        requested = self.original.routing.model
        if requested is not None and self.caps.model is not None and requested != self.caps.model:
            raise self.unsupported(
                "requested model is not served by this provider route",
                "routing.model",
                requested_model=requested,
                effective_model=self.caps.model,
            )

    def operation(self) -> None:
        operation = self.original.operation
        if operation is Operation.GENERATE and not self.caps.generation:
            raise self.unsupported("provider does not support image generation", "operation")
        if operation is Operation.EDIT and not self.caps.edits:
            raise self.unsupported("provider does not support image edits", "operation")

    def inputs(self) -> None:
        request, caps = self.original, self.caps
        references = len(request.reference_images)
        if references and (
            not caps.reference_images.available or references > caps.reference_images.max_count
        ):
            raise self.unsupported(
                "provider does not accept this many reference images",
                "reference_images",
                requested=references,
                supported=caps.reference_images.max_count if caps.reference_images.available else 0,
            )
        sources = len(request.edit_images)
        if request.operation is Operation.EDIT and (
            not caps.edit_images.available or sources > caps.edit_images.max_count
        ):
            raise self.unsupported(
                "provider does not accept this many edit images",
                "images",
                requested=sources,
                supported=caps.edit_images.max_count if caps.edit_images.available else 0,
            )
        if request.mask is None:
            return
        emulated = caps.masks.support is SupportLevel.EMULATED
        if not caps.masks.available or (emulated and self.strict):
            # strict mode keeps the original's refusal; the bridge emulates only when asked
            # to normalize (docs/providers.md, "What you asked, what you got")
            error = self.unsupported("provider does not support edit masks", "mask")
            if caps.provider.startswith("codex-"):
                error.details["codex_code"] = CODEX_MASK_CODE
            raise error
        if emulated:
            self.data["mask"] = None
            self.mask_emulated = True
            self.normalizations.append(
                Normalization(
                    field="mask",
                    requested="native",
                    effective="emulated",
                    reason="mask_emulated",
                )
            )

    def sessions(self) -> None:
        mode = self.original.session.mode
        if mode is SessionMode.PERSISTENT and not self.caps.persistent_sessions:
            raise self.unsupported("provider does not support persistent sessions", "session.mode")
        if mode is SessionMode.THREAD and not self.caps.explicit_threads:
            raise self.unsupported("provider does not support explicit threads", "session.mode")

    def user(self) -> None:
        if (
            self.original.user is not None
            and self.caps.user_attribution is SupportLevel.UNSUPPORTED
        ):
            raise self.unsupported("provider does not support user attribution", "user")

    def fidelity(self) -> None:
        fidelity = self.params.get("input_fidelity")
        if fidelity is not None and fidelity not in self.caps.input_fidelities:
            raise self.unsupported(
                "provider does not support this input fidelity",
                "parameters.input_fidelity",
                requested=fidelity.value,
                supported=[member.value for member in self.caps.input_fidelities],
            )

    def action(self) -> None:
        action: ImageAction = self.params["action"]
        if action is ImageAction.AUTO or action in self.caps.actions:
            return
        if ImageAction.AUTO not in self.caps.actions:
            raise self.unsupported(
                "provider does not support this action",
                "parameters.action",
                requested=action.value,
                supported=[member.value for member in self.caps.actions],
            )
        self.params["action"] = ImageAction.AUTO
        self.note("parameters.action", action, ImageAction.AUTO, "provider_uses_automatic_action")

    def count(self) -> None:
        n: int = self.params["n"]
        bounds = self.caps.count
        if bounds.contains(n):
            return
        if self.strict:
            raise self.unsupported(
                "requested output count is outside provider capability",
                "parameters.n",
                requested=n,
                supported={"min": bounds.min, "max": bounds.max},
            )
        clamped = min(max(n, bounds.min), bounds.max)
        self.params["n"] = clamped
        self.note("parameters.n", n, clamped, "clamped_to_provider_range")

    def size(self) -> None:
        size: str = self.params["size"]
        sizes = self.caps.sizes
        if sizes.supports(size):
            return
        if self.strict:
            raise self.unsupported(
                "requested size is outside provider capability",
                "parameters.size",
                requested=size,
            )
        if sizes.auto:
            fallback = "auto"
        elif sizes.allowed:
            fallback = sizes.allowed[0]
        else:
            raise self.unsupported("provider has no usable size fallback", "parameters.size")
        self.params["size"] = fallback
        self.note("parameters.size", size, fallback, "normalized_to_provider_size")

    def hints(self) -> None:
        for field, level in (
            ("aspect_ratio", self.caps.aspect_ratio),
            ("resolution", self.caps.resolution),
        ):
            value = self.params.get(field)
            if value is None or level is not SupportLevel.UNSUPPORTED:
                continue
            if self.strict:
                raise self.unsupported(
                    f"provider does not support the {field} hint", f"parameters.{field}"
                )
            self.params[field] = None
            self.normalizations.append(
                Normalization(
                    field=f"parameters.{field}",
                    requested=_json(value),
                    reason="provider_does_not_support_hint",
                )
            )

    def values(self) -> None:
        caps = self.caps
        self.params["quality"] = self.choose(
            "quality", self.params["quality"], caps.qualities, Quality.AUTO
        )
        self.params["output_format"] = self.choose(
            "output_format", self.params["output_format"], caps.output_formats, OutputFormat.PNG
        )
        compression = self.params.get("output_compression")
        if compression is not None and self.params["output_format"] not in (
            OutputFormat.JPEG,
            OutputFormat.WEBP,
        ):
            if self.strict:
                raise self.unsupported(
                    "effective output format has no compression setting",
                    "parameters.output_compression",
                )
            self.params["output_compression"] = None
            self.normalizations.append(
                Normalization(
                    field="parameters.output_compression",
                    requested=compression,
                    reason="effective_format_has_no_compression",
                )
            )
        self.params["background"] = self.choose(
            "background", self.params["background"], caps.backgrounds, Background.AUTO
        )
        self.params["moderation"] = self.choose(
            "moderation", self.params["moderation"], caps.moderation, Moderation.AUTO
        )

    def partials(self) -> None:
        partial: int = self.params["partial_images"]
        bounds = self.caps.partial_images
        if bounds.contains(partial):
            return
        if self.strict:
            raise self.unsupported(
                "requested partial images are outside provider capability",
                "parameters.partial_images",
                requested=partial,
                supported={"min": bounds.min, "max": bounds.max},
            )
        clamped = min(max(partial, bounds.min), bounds.max)
        self.params["partial_images"] = clamped
        self.note("parameters.partial_images", partial, clamped, "clamped_to_provider_range")

    def negative_prompt(self) -> None:
        negative = self.data.get("negative_prompt")
        if negative is None:
            return
        policy = self.original.policies.negative_prompt
        support = self.caps.negative_prompt
        if policy is NegativePromptMode.REJECT:
            raise self.unsupported("negative prompts are rejected by policy", "negative_prompt")
        if policy is NegativePromptMode.NATIVE:
            if support is not SupportLevel.NATIVE:
                raise self.unsupported("provider has no native negative prompt", "negative_prompt")
            return
        if policy is NegativePromptMode.AUTO:
            if support is SupportLevel.NATIVE:
                return
            if support is SupportLevel.UNSUPPORTED:
                raise self.unsupported(
                    "provider does not support negative prompts", "negative_prompt"
                )
        self.data["prompt"] = merge_negative_prompt(self.data["prompt"], negative)
        self.data["negative_prompt"] = None
        self.normalizations.append(
            Normalization(
                field="negative_prompt",
                requested=True,
                effective="merged_into_prompt",
                reason="negative_prompt_prompt_merge",
            )
        )

    def revised_prompt(self) -> None:
        if (
            self.original.policies.revised_prompt is RevisedPromptPolicy.REQUIRE
            and self.caps.revised_prompt is SupportLevel.UNSUPPORTED
        ):
            raise self.unsupported(
                "provider does not report revised prompts", "policies.revised_prompt"
            )

    def run(self) -> NegotiationResult:
        self.caps.validate_consistency()
        for step in (
            self.model,
            self.operation,
            self.inputs,
            self.sessions,
            self.user,
            self.fidelity,
            self.action,
            self.count,
            self.size,
            self.hints,
            self.values,
            self.partials,
            self.negative_prompt,
            self.revised_prompt,
        ):
            step()
        effective = ImageRequest.model_validate(self.data)
        return NegotiationResult(
            requested=copy_parameters(self.original.parameters),
            request=effective,
            normalizations=self.normalizations,
            mask_emulated=self.mask_emulated,
        )


def _json(value: Any) -> Any:
    return value.value if isinstance(value, StrEnum) else value


def negotiate_request(request: ImageRequest, caps: ProviderCapabilities) -> NegotiationResult:
    """Fit ``request`` to ``caps`` or raise ``unsupported_capability`` (``protocol`` when the
    capability document itself is inconsistent)."""
    return _Negotiator(request, caps).run()
