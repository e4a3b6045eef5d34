"""OpenAI-compatible request and response shapes and their mapping."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from imagebridge.contract._base import U8, U64, ContractModel, RequestModel, StrictStr, omit_none
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
    "CompatModel",
    "CompatModelList",
    "CompatResponseExtension",
    "CompatibleGenerationRequest",
    "compat_response",
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


class CompatibleGenerationRequest(RequestModel):
    """``POST /v1/images/generations``: OpenAI's fields we honour; anything else is refused."""

    prompt: StrictStr = ""
    model: StrictStr | None = None
    n: U8 | None = None
    size: ImageSize | None = None
    quality: Quality | None = None
    output_format: OutputFormat | None = None
    output_compression: U8 | None = None
    background: Background | None = None
    moderation: Moderation | None = None
    response_format: CompatResponseFormat | None = None
    user: StrictStr | None = None
    imagegen_bridge: CompatBridgeExtension | None = None

    def to_request(self, *, idempotency_key: str | None = None) -> ImageRequest:
        ext = self.imagegen_bridge or CompatBridgeExtension()
        parameters: dict[str, Any] = {}
        for key in ("n", "size", "quality", "output_format", "output_compression"):
            value = getattr(self, key)
            if value is not None:
                parameters[key] = value
        for key in ("background", "moderation"):
            value = getattr(self, key)
            if value is not None:
                parameters[key] = value
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
        if self.user is not None:
            data["user"] = self.user
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


class CompatImagesResponse(ContractModel):
    created: U64
    data: list[CompatImage]
    usage: Usage | None = Field(default=None, exclude_if=omit_none)
    imagegen_bridge: CompatResponseExtension


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
    return CompatImagesResponse(
        created=response.created,
        data=images,
        usage=response.usage,
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


class CompatModel(ContractModel):
    """One entry of ``GET /v1/models`` (OpenAI's ``Model``)."""

    id: StrictStr
    object: Literal["model"] = "model"
    created: U64
    owned_by: StrictStr


class CompatModelList(ContractModel):
    """``GET /v1/models``: OpenAI's list shape."""

    object: Literal["list"] = "list"
    data: list[CompatModel]
