"""OpenAI's Images API: the generation request, ``ImagesResponse``, and their mapping.

``CompatibleGenerationRequest.to_request`` maps a ``POST /v1/images/generations`` body onto
the native request (its fields decided by :mod:`imagebridge.contract.openai.fields`);
:func:`compat_response` projects a native response onto OpenAI's answer. The edits form is
mapped in :mod:`imagebridge.server.openai.multipart`, through the same field decisions.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from imagebridge.contract._base import (
    U8,
    U32,
    U64,
    ContractModel,
    RequestModel,
    StrictBool,
    StrictStr,
    omit_none,
)
from imagebridge.contract.enums import (
    Background,
    CompatibilityMode,
    ImageAction,
    InputFidelity,
    Moderation,
    NegativePromptMode,
    Operation,
    OutputFormat,
    Quality,
    Resolution,
    RevisedPromptPolicy,
)
from imagebridge.contract.openai.fields import Translation, translate
from imagebridge.contract.request import (
    AspectRatio,
    GenerationParameters,
    ImageInput,
    ImageRequest,
    ImageSize,
    SessionOptions,
)
from imagebridge.contract.response import (
    ImageResponse,
    Normalization,
    SessionMetadata,
    Timings,
    Usage,
)

__all__ = [
    "CompatBridgeExtension",
    "CompatImage",
    "CompatImagesResponse",
    "CompatResponseExtension",
    "CompatTokenDetails",
    "CompatUsage",
    "CompatibleGenerationRequest",
    "compat_response",
    "compat_usage",
]

CompatResponseFormat = Literal["b64_json", "url"]


class CompatBridgeExtension(RequestModel):
    """The ``imagegen_bridge`` extension object of a compatible generation request."""

    provider: StrictStr | None = None
    negative_prompt: StrictStr | None = None
    compatibility: CompatibilityMode | None = None
    negative_prompt_mode: NegativePromptMode | None = None
    revised_prompt: RevisedPromptPolicy | None = None
    aspect_ratio: AspectRatio | None = None
    resolution: Resolution | None = None
    partial_images: U8 | None = None
    input_fidelity: InputFidelity | None = None
    action: ImageAction | None = None
    session: SessionOptions | None = None
    reference_images: list[ImageInput] | None = None
    filename_prefix: StrictStr | None = None


OpenAIQuality = Literal["auto", "low", "medium", "high", "xhigh", "max", "standard", "hd"]
OpenAIOutputFormat = Literal["png", "jpeg", "webp", "gif", "svg"]


class CompatibleGenerationRequest(RequestModel):
    """``POST /v1/images/generations``: every field of OpenAI's ``images.generate``.

    Each field is passed on, mapped, ignored with a warning or refused by name
    (:mod:`imagebridge.contract.openai.fields`); an unknown field is refused by name.
    """

    prompt: StrictStr = ""
    model: StrictStr | None = None
    n: U8 | None = None
    size: ImageSize | None = None
    quality: OpenAIQuality | None = None
    output_format: OpenAIOutputFormat | None = None
    output_compression: U8 | None = None
    background: Background | None = None
    moderation: Moderation | None = None
    response_format: CompatResponseFormat | None = None
    user: StrictStr | None = None
    safety_identifier: StrictStr | None = None
    style: Literal["vivid", "natural"] | None = None
    complexity: Literal["low", "medium", "high"] | None = None
    partial_images: U8 | None = None
    stream: StrictBool | None = None
    frame_count: U32 | None = None
    frame_duration_ms: U32 | None = None
    svg: dict[str, Any] | None = None
    imagegen_bridge: CompatBridgeExtension | None = None

    def translate(self) -> Translation:
        """The OpenAI fields' decisions (raises the refusals, naming the field)."""
        return translate(self.model_dump(exclude={"imagegen_bridge"}))

    def to_request(
        self, *, idempotency_key: str | None = None, translation: Translation | None = None
    ) -> ImageRequest:
        ext = self.imagegen_bridge or CompatBridgeExtension()
        fields = translation or self.translate()
        parameters: dict[str, Any] = dict(fields.parameters)
        for key in ("aspect_ratio", "resolution", "partial_images", "input_fidelity", "action"):
            value = getattr(ext, key)
            if value is not None:
                parameters[key] = value
        policies: dict[str, Any] = {}
        if ext.compatibility is not None:
            policies["compatibility"] = ext.compatibility
        if ext.negative_prompt_mode is not None:
            policies["negative_prompt"] = ext.negative_prompt_mode
        if ext.revised_prompt is not None:
            policies["revised_prompt"] = ext.revised_prompt
        output: dict[str, Any] = {"response_format": self.response_format or "b64_json"}
        if ext.filename_prefix is not None:
            output["filename_prefix"] = ext.filename_prefix
        routing: dict[str, Any] = {}
        if ext.provider is not None:
            routing["provider"] = ext.provider
        if self.model is not None:
            routing["model"] = self.model
        data: dict[str, Any] = {
            "prompt": self.prompt,
            "operation": Operation.GENERATE,
            "parameters": parameters,
            "routing": routing,
            "output": output,
            "policies": policies,
        }
        if ext.negative_prompt is not None:
            data["negative_prompt"] = ext.negative_prompt
        if ext.session is not None:
            data["session"] = ext.session.model_dump(mode="json")
        if ext.reference_images:
            data["reference_images"] = [i.model_dump(mode="json") for i in ext.reference_images]
        if fields.user is not None:
            data["user"] = fields.user
        if idempotency_key is not None:
            data["idempotency_key"] = idempotency_key
        return ImageRequest.model_validate(data)


class CompatImage(ContractModel):
    b64_json: StrictStr | None = Field(default=None, exclude_if=omit_none)
    url: StrictStr | None = Field(default=None, exclude_if=omit_none)
    revised_prompt: StrictStr | None = Field(default=None, exclude_if=omit_none)


class CompatResponseExtension(ContractModel):
    id: StrictStr
    provider: StrictStr
    model: StrictStr
    effective: GenerationParameters
    normalizations: list[Normalization] = Field(default_factory=list)
    session: SessionMetadata | None = Field(default=None, exclude_if=omit_none)
    timings: Timings
    warnings: list[StrictStr] = Field(default_factory=list)


class CompatTokenDetails(ContractModel):
    """OpenAI's ``input_tokens_details`` / ``output_tokens_details``."""

    text_tokens: U64
    image_tokens: U64


class CompatUsage(ContractModel):
    """OpenAI's image ``usage``: totals and their text/image split."""

    input_tokens: U64
    input_tokens_details: CompatTokenDetails
    output_tokens: U64
    output_tokens_details: CompatTokenDetails
    total_tokens: U64


class CompatImagesResponse(ContractModel):
    """OpenAI's ``ImagesResponse`` (strict decoders accept it) plus ``imagegen_bridge``."""

    created: U64
    data: list[CompatImage]
    background: Literal["transparent", "opaque"] | None = Field(default=None, exclude_if=omit_none)
    output_format: OutputFormat | None = Field(default=None, exclude_if=omit_none)
    quality: Literal["low", "medium", "high"] | None = Field(default=None, exclude_if=omit_none)
    size: StrictStr | None = Field(default=None, exclude_if=omit_none)
    usage: CompatUsage | None = Field(default=None, exclude_if=omit_none)
    imagegen_bridge: CompatResponseExtension


def compat_usage(usage: Usage | None) -> CompatUsage | None:
    """OpenAI's usage block from the provider's counts; absent when it reported none.

    The Codex providers report the image tool's own tokens as ``image_gen_*`` counters
    (their top-level counts are the carrier chat model's): those are the image's usage when
    present. The text/image split is the provider's where it gave one; otherwise input
    tokens count as text and output tokens as image.
    """
    if usage is None:
        return None
    counters = usage.provider
    prefix = ""
    given_in: int | None = usage.input_tokens
    given_out: int | None = usage.output_tokens
    total = usage.total_tokens
    if "image_gen_input_tokens" in counters or "image_gen_output_tokens" in counters:
        prefix = "image_gen_"
        given_in = counters.get("image_gen_input_tokens")
        given_out = counters.get("image_gen_output_tokens")
        total = counters.get("image_gen_total_tokens")
    if given_in is None and given_out is None:
        return None
    inputs, outputs = given_in or 0, given_out or 0
    in_image = min(counters.get(f"{prefix}input_image_tokens", 0), inputs)
    out_text = min(counters.get(f"{prefix}output_text_tokens", 0), outputs)
    return CompatUsage(
        input_tokens=inputs,
        input_tokens_details=CompatTokenDetails(
            text_tokens=inputs - in_image, image_tokens=in_image
        ),
        output_tokens=outputs,
        output_tokens_details=CompatTokenDetails(
            text_tokens=out_text, image_tokens=outputs - out_text
        ),
        total_tokens=total if total is not None else inputs + outputs,
    )


_BACKGROUNDS: dict[Background, Literal["transparent", "opaque"]] = {
    Background.TRANSPARENT: "transparent",
    Background.OPAQUE: "opaque",
}
"""``auto`` has no OpenAI answer value: the key is left out."""
_QUALITIES: dict[Quality, Literal["low", "medium", "high"]] = {
    Quality.LOW: "low",
    Quality.MEDIUM: "medium",
    Quality.HIGH: "high",
}


def _size(response: ImageResponse) -> str | None:
    if response.data:
        first = response.data[0]
        return f"{first.width}x{first.height}"
    size = response.effective.size
    return None if size == "auto" else size


def compat_response(response: ImageResponse) -> CompatImagesResponse:
    """Project a native response onto the OpenAI Images response shape."""
    images = [
        CompatImage(
            b64_json=item.b64_json,
            url=item.url,
            revised_prompt=response.revised_prompt,
        )
        for item in response.data
    ]
    effective = response.effective
    return CompatImagesResponse(
        created=response.created,
        data=images,
        background=_BACKGROUNDS.get(effective.background),
        output_format=response.data[0].format if response.data else effective.output_format,
        quality=_QUALITIES.get(effective.quality),
        size=_size(response),
        usage=compat_usage(response.usage),
        imagegen_bridge=CompatResponseExtension(
            id=response.id,
            provider=response.provider,
            model=response.model,
            effective=response.effective,
            normalizations=list(response.normalizations),
            session=response.session,
            timings=response.timings,
            warnings=list(response.warnings),
        ),
    )
