"""``ImageResponse`` and its parts, plus the raw ``BridgeError`` body."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from imagebridge.contract._base import (
    U8,
    U32,
    U64,
    ContractModel,
    StrictBool,
    StrictStr,
    omit_empty,
    omit_none,
)
from imagebridge.contract.enums import OutputFormat, ProviderAttemptOutcome
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import GenerationParameters

__all__ = [
    "KNOWN_WARNINGS",
    "MAX_SIDECAR_BYTES",
    "BridgeErrorBody",
    "GeneratedImage",
    "ImageFailure",
    "ImageResponse",
    "Normalization",
    "PayloadKind",
    "ProviderAttempt",
    "SessionMetadata",
    "Timings",
    "Usage",
    "ValidationIssue",
]

KNOWN_WARNINGS = (
    "provider_fallback_used",
    "transparent_background_postprocessed",
    "provider_output_dimensions_differed",
    "emulated_multi_image_fanout",
    "sequential_multi_image_fanout",
    "partial_output_failure",
    "transient_provider_retry_used",
    # added by imagebridge (docs/providers.md)
    "responses_model_fallback_used",
    "c2pa_manifest_invalidated",
    "account_failover_used",
    "mask_emulated",
    "provider_output_size_differed",
    "provider_output_format_differed",
    "provider_output_quality_differed",
    "provider_output_background_differed",
)

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")

MAX_SIDECAR_BYTES = 1024 * 1024
"""The metadata sidecar a generated image's ``metadata_name`` names is a JSON object of at
most this many bytes (the original's bound): the artifact stores write and read no larger
one, and the CLI refuses a larger one on disk."""


class ValidationIssue(ContractModel):
    """One intrinsic validation problem: a field path, a stable code and a message."""

    field: StrictStr
    code: StrictStr
    message: StrictStr


class BridgeErrorBody(ContractModel):
    """The raw error shape used in jobs, failures and readiness."""

    code: ErrorCode
    message: StrictStr
    retryable: StrictBool = False
    provider: StrictStr | None = Field(default=None, exclude_if=omit_none)
    upstream_request_id: StrictStr | None = Field(default=None, exclude_if=omit_none)
    details: dict[str, Any] = Field(default_factory=dict, exclude_if=omit_empty)
    suggestions: list[StrictStr] = Field(default_factory=list, exclude_if=omit_empty)

    @classmethod
    def from_error(cls, error: BridgeError) -> BridgeErrorBody:
        return cls.model_validate(error.to_dict())

    def to_error(self) -> BridgeError:
        return BridgeError.from_dict(self.model_dump(mode="json"))


class Normalization(ContractModel):
    """One change the bridge made to what the caller asked for, and why."""

    field: StrictStr
    requested: Any | None = Field(default=None, exclude_if=omit_none)
    effective: Any | None = Field(default=None, exclude_if=omit_none)
    reason: StrictStr


class ProviderAttempt(ContractModel):
    provider: StrictStr
    model: StrictStr | None = Field(default=None, exclude_if=omit_none)
    outcome: ProviderAttemptOutcome
    error_code: ErrorCode | None = Field(default=None, exclude_if=omit_none)
    duration_ms: U64


PayloadKind = Literal["b64_json", "url", "artifact", "metadata"]


class GeneratedImage(ContractModel):
    """One verified output. ``type`` selects which payload keys are present."""

    index: U8
    type: PayloadKind
    b64_json: StrictStr | None = Field(default=None, exclude_if=omit_none)
    url: StrictStr | None = Field(default=None, exclude_if=omit_none)
    id: StrictStr | None = Field(default=None, exclude_if=omit_none)
    name: StrictStr | None = Field(default=None, exclude_if=omit_none)
    format: OutputFormat
    width: U32
    height: U32
    bytes: U64
    sha256: StrictStr
    generation_ms: U64 | None = Field(default=None, exclude_if=omit_none)
    metadata_name: StrictStr | None = Field(default=None, exclude_if=omit_none)
    # In-process only, never serialized: an ``artifacts.decoded.DecodedPayload`` when the
    # provider already decoded ``b64_json`` (the materializer then does not do it again).
    _decoded: Any = PrivateAttr(default=None)

    @field_validator("sha256")
    @classmethod
    def _lower_hex_digest(cls, value: str) -> str:
        if not _SHA256_RE.fullmatch(value):
            raise ValueError("sha256 must be 64 lower-case hex characters")
        return value

    @model_validator(mode="after")
    def _payload_matches_type(self) -> GeneratedImage:
        present = {
            key for key in ("b64_json", "url", "id", "name") if getattr(self, key) is not None
        }
        allowed: dict[str, set[str]] = {
            "b64_json": {"b64_json"},
            "url": {"url"},
            "artifact": {"id", "name"},
            "metadata": set(),
        }
        required = {"b64_json": "b64_json", "url": "url", "artifact": "id"}
        if not present <= allowed[self.type]:
            raise ValueError(f"{self.type} images carry no {sorted(present - allowed[self.type])}")
        needed = required.get(self.type)
        if needed is not None and needed not in present:
            raise ValueError(f"{self.type} images require {needed}")
        return self


class ImageFailure(ContractModel):
    """A best-effort output that failed, at its original index."""

    index: U8
    error: BridgeErrorBody
    generation_ms: U64


class Usage(ContractModel):
    input_tokens: U64 | None = Field(default=None, exclude_if=omit_none)
    output_tokens: U64 | None = Field(default=None, exclude_if=omit_none)
    total_tokens: U64 | None = Field(default=None, exclude_if=omit_none)
    provider: dict[str, U64] = Field(default_factory=dict, exclude_if=omit_empty)


class SessionMetadata(ContractModel):
    key: StrictStr | None = Field(default=None, exclude_if=omit_none)
    thread_id: StrictStr | None = Field(default=None, exclude_if=omit_none)
    reused: StrictBool


class Timings(ContractModel):
    queue_ms: U64 = 0
    input_ms: U64 = 0
    provider_ms: U64 = 0
    artifact_ms: U64 = 0
    total_ms: U64 = 0


class ImageResponse(ContractModel):
    """A verified, materialized result of one logical request."""

    id: StrictStr
    created: U64
    provider: StrictStr
    model: StrictStr
    requested: GenerationParameters
    effective: GenerationParameters
    normalizations: list[Normalization] = Field(default_factory=list, exclude_if=omit_empty)
    attempts: list[ProviderAttempt] = Field(default_factory=list, exclude_if=omit_empty)
    data: list[GeneratedImage] = Field(default_factory=list)
    failures: list[ImageFailure] = Field(default_factory=list, exclude_if=omit_empty)
    revised_prompt: StrictStr | None = Field(default=None, exclude_if=omit_none)
    usage: Usage | None = Field(default=None, exclude_if=omit_none)
    session: SessionMetadata | None = Field(default=None, exclude_if=omit_none)
    timings: Timings = Field(default_factory=Timings)
    warnings: list[StrictStr] = Field(default_factory=list, exclude_if=omit_empty)
    # In-process only, never serialized: ``{pool account: images}`` it was served by
    # (``engine.served``), for the per-key usage by account (docs/keys.md).
    _served_by: Any = PrivateAttr(default=None)

    def add_warning(self, code: str) -> None:
        if code not in self.warnings:
            self.warnings.append(code)
