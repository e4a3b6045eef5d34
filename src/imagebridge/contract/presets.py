"""Presets: reusable request templates without inputs or idempotency keys."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from imagebridge.contract._base import U64, ContractModel, RequestModel, StrictStr, omit_none
from imagebridge.contract.enums import Operation
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import (
    GenerationParameters,
    ImageInput,
    ImageRequest,
    OutputOptions,
    RequestPolicies,
    RoutingOptions,
    SessionOptions,
)

__all__ = [
    "ImagePreset",
    "ImagePresetCreate",
    "ImagePresetPage",
    "ImagePresetTemplate",
    "ImagePresetWrite",
]


class ImagePresetTemplate(RequestModel):
    """Every reusable field of an ``ImageRequest``; serialized with defaults expanded."""

    prompt: StrictStr | None = Field(default=None, exclude_if=omit_none)
    negative_prompt: StrictStr | None = Field(default=None, exclude_if=omit_none)
    operation: Operation = Operation.GENERATE
    parameters: GenerationParameters = Field(default_factory=GenerationParameters)
    routing: RoutingOptions = Field(default_factory=RoutingOptions)
    session: SessionOptions = Field(default_factory=SessionOptions)
    output: OutputOptions = Field(default_factory=OutputOptions)
    policies: RequestPolicies = Field(default_factory=RequestPolicies)
    timeout_ms: U64 | None = Field(default=None, exclude_if=omit_none)
    user: StrictStr | None = Field(default=None, exclude_if=omit_none)

    def request(
        self,
        prompt: str | None = None,
        *,
        images: list[ImageInput] | None = None,
    ) -> ImageRequest:
        """Build a request: the caller's prompt wins, else the stored one (never blank)."""
        chosen = prompt if prompt is not None else self.prompt
        if chosen is None or not chosen.strip():
            raise BridgeError.invalid_request("a prompt is required", field="prompt")
        data: dict[str, Any] = self.model_dump(mode="json", exclude={"prompt"})
        data["prompt"] = chosen
        if self.operation is Operation.EDIT:
            data["images"] = [item.model_dump(mode="json") for item in images or []]
        return ImageRequest.model_validate(data)

    @classmethod
    def from_request(cls, request: ImageRequest) -> ImagePresetTemplate:
        """Keep only the reusable fields: no inputs, mask or idempotency key."""
        data = request.model_dump(
            mode="json",
            exclude={"version", "images", "mask", "reference_images", "idempotency_key"},
        )
        return cls.model_validate(data)


class ImagePresetCreate(RequestModel):
    name: StrictStr
    description: StrictStr | None = Field(default=None, exclude_if=omit_none)
    template: ImagePresetTemplate


class ImagePresetWrite(RequestModel):
    description: StrictStr | None = Field(default=None, exclude_if=omit_none)
    template: ImagePresetTemplate


class ImagePreset(ContractModel):
    name: StrictStr
    description: StrictStr | None = Field(default=None, exclude_if=omit_none)
    template: ImagePresetTemplate
    created: U64
    updated: U64


class ImagePresetPage(ContractModel):
    items: list[ImagePreset]
    next_cursor: StrictStr | None = Field(default=None, exclude_if=omit_none)
