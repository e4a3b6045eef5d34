"""Provider discovery documents: descriptors, pages and capability documents."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

from pydantic import Field, field_validator

from imagebridge.contract._base import (
    U8,
    U16,
    U32,
    U64,
    ContractModel,
    StrictBool,
    StrictStr,
    omit_none,
)
from imagebridge.contract.enums import (
    Background,
    BatchMode,
    ImageAction,
    InputFidelity,
    Moderation,
    OutputFormat,
    Quality,
    SupportLevel,
    enum_rank,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import parse_size

__all__ = [
    "BatchCapabilities",
    "InputCapabilities",
    "ProviderCapabilities",
    "ProviderDescriptor",
    "ProviderPage",
    "SizeCapabilities",
    "U8Range",
]

E = TypeVar("E", bound=StrEnum)


def _canonical_set(values: list[E]) -> list[E]:
    """De-duplicate and order a capability set by the contract's enum order."""
    return sorted(set(values), key=enum_rank)


class U8Range(ContractModel):
    min: U8
    max: U8

    def contains(self, value: int) -> bool:
        return self.min <= value <= self.max


class BatchCapabilities(ContractModel):
    mode: BatchMode
    native_count: U8Range
    max_parallel_outputs: U8


class SizeCapabilities(ContractModel):
    auto: StrictBool
    # Always sent, even empty: the original omitted an empty list, and its own SDK then
    # failed to decode the capabilities of any provider without fixed sizes (KeyError).
    allowed: list[StrictStr] = Field(default_factory=list)
    arbitrary: StrictBool = False
    min_edge: U32 | None = Field(default=None, exclude_if=omit_none)
    max_edge: U32 | None = Field(default=None, exclude_if=omit_none)
    edge_multiple: U32 | None = Field(default=None, exclude_if=omit_none)
    min_pixels: U64 | None = Field(default=None, exclude_if=omit_none)
    max_pixels: U64 | None = Field(default=None, exclude_if=omit_none)
    max_aspect_ratio: float | None = Field(default=None, exclude_if=omit_none)

    @field_validator("allowed")
    @classmethod
    def _sorted_explicit_sizes(cls, values: list[str]) -> list[str]:
        for value in values:
            if parse_size(value) is None:
                raise ValueError("allowed sizes are explicit WxH values")
        return sorted(set(values))

    def supports(self, size: str) -> bool:
        """Whether ``size`` (``auto`` or ``WxH``) is accepted by these constraints."""
        dims = parse_size(size)
        if dims is None:
            return self.auto
        if size in self.allowed:
            return True
        if not self.arbitrary:
            return False
        width, height = dims
        short, long = min(width, height), max(width, height)
        pixels = width * height
        checks = [
            self.min_edge is None or short >= self.min_edge,
            self.max_edge is None or long <= self.max_edge,
            self.edge_multiple is None
            or (
                (self.edge_multiple > 0 and width % self.edge_multiple == 0)
                and height % self.edge_multiple == 0
            ),
            self.min_pixels is None or pixels >= self.min_pixels,
            self.max_pixels is None or pixels <= self.max_pixels,
            self.max_aspect_ratio is None or long / short <= self.max_aspect_ratio,
        ]
        return all(checks)


class InputCapabilities(ContractModel):
    support: SupportLevel
    max_count: U16
    max_bytes_each: U64
    max_bytes_total: U64

    @classmethod
    def unsupported(cls) -> InputCapabilities:
        return cls(
            support=SupportLevel.UNSUPPORTED, max_count=0, max_bytes_each=0, max_bytes_total=0
        )

    @property
    def available(self) -> bool:
        return self.support is not SupportLevel.UNSUPPORTED and self.max_count > 0


class ProviderCapabilities(ContractModel):
    """What one provider/model can do; negotiation reads only this document."""

    provider: StrictStr
    implementation_version: StrictStr
    model: StrictStr | None = Field(default=None, exclude_if=omit_none)
    experimental: StrictBool = False
    generation: StrictBool
    edits: StrictBool
    count: U8Range
    batching: BatchCapabilities
    sizes: SizeCapabilities
    aspect_ratio: SupportLevel
    resolution: SupportLevel
    qualities: list[Quality]
    output_formats: list[OutputFormat]
    backgrounds: list[Background]
    transparent_background: SupportLevel
    moderation: list[Moderation]
    negative_prompt: SupportLevel
    revised_prompt: SupportLevel
    user_attribution: SupportLevel
    input_fidelities: list[InputFidelity]
    actions: list[ImageAction]
    reference_images: InputCapabilities
    edit_images: InputCapabilities
    masks: InputCapabilities
    partial_images: U8Range
    persistent_sessions: StrictBool
    explicit_threads: StrictBool

    @field_validator(
        "qualities", "output_formats", "backgrounds", "moderation", "input_fidelities", "actions"
    )
    @classmethod
    def _canonical_order(cls, values: list[Any]) -> list[Any]:
        return _canonical_set(values)

    def validate_consistency(self) -> None:
        """Reject self-contradictory documents with ``protocol`` errors."""

        def fail(message: str) -> BridgeError:
            return BridgeError(ErrorCode.PROTOCOL, message, provider=self.provider)

        count, batching = self.count, self.batching
        if count.min < 1 or count.min > count.max:
            raise fail("provider capability count range is invalid")
        native = batching.native_count
        if native.min < 1 or native.min > native.max:
            raise fail("provider native batch range is invalid")
        if native.min < count.min or native.max > count.max:
            raise fail("provider native batch range lies outside its count range")
        if not 1 <= batching.max_parallel_outputs <= count.max:
            raise fail("provider max_parallel_outputs is outside its count range")
        if batching.mode is BatchMode.NATIVE and (native.min, native.max) != (
            count.min,
            count.max,
        ):
            raise fail("native batching requires the native count to equal the count range")
        if batching.mode is BatchMode.FAN_OUT and native.max >= count.max:
            raise fail("fan-out batching requires a native count below the count range")
        if self.partial_images.min > self.partial_images.max:
            raise fail("provider partial image range is invalid")
        native_alpha = Background.TRANSPARENT in self.backgrounds
        if native_alpha != (self.transparent_background is SupportLevel.NATIVE):
            raise fail("transparent background support contradicts the background set")
        if self.transparent_background is SupportLevel.EMULATED:
            if not {Background.AUTO, Background.OPAQUE} & set(self.backgrounds):
                raise fail("emulated transparency needs an auto or opaque background")
            if not {OutputFormat.PNG, OutputFormat.WEBP} & set(self.output_formats):
                raise fail("emulated transparency needs a PNG or WebP output format")


class ProviderDescriptor(ContractModel):
    name: StrictStr
    display_name: StrictStr
    version: StrictStr
    experimental: StrictBool = False
    models: list[StrictStr] = Field(default_factory=list)


class ProviderPage(ContractModel):
    items: list[ProviderDescriptor]
    next_cursor: StrictStr | None = Field(default=None, exclude_if=omit_none)
