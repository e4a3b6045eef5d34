"""The native ``ImageRequest`` and every object nested in it."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from imagebridge.contract._base import (
    U8,
    U64,
    RequestModel,
    StrictBool,
    StrictStr,
    omit_empty,
    omit_none,
)
from imagebridge.contract.enums import (
    ArtifactCollisionPolicy,
    ArtifactMetadataPolicy,
    Background,
    BatchExecution,
    CompatibilityMode,
    DisconnectPolicy,
    FallbackPolicy,
    ImageAction,
    InputFidelity,
    Moderation,
    MultiImageFailurePolicy,
    NegativePromptMode,
    Operation,
    OutputFormat,
    Quality,
    Resolution,
    ResponseFormat,
    RevisedPromptPolicy,
    RoutingPreference,
    SessionMode,
    SizeMismatchPolicy,
    TransparencyMode,
)

__all__ = [
    "CONTRACT_VERSION",
    "AspectRatio",
    "GenerationParameters",
    "ImageInput",
    "ImageRequest",
    "ImageSize",
    "InputKind",
    "OutputOptions",
    "ProviderRoute",
    "RequestPolicies",
    "RoutingOptions",
    "SessionOptions",
    "TransparencyOptions",
    "parse_aspect_ratio",
    "parse_size",
    "resolution_tier",
]

CONTRACT_VERSION = "1"
_U32_MAX = 4_294_967_295
_SIZE_RE = re.compile(r"^(?:auto|[1-9][0-9]*x[1-9][0-9]*)$")
_RATIO_RE = re.compile(r"^([1-9][0-9]*):([1-9][0-9]*)$")


def parse_size(value: str) -> tuple[int, int] | None:
    """``"WxH"`` → ``(W, H)``; ``"auto"`` → ``None``. Raises ``ValueError`` when malformed."""
    if not _SIZE_RE.fullmatch(value):
        raise ValueError("size must be auto or WxH")
    if value == "auto":
        return None
    width_text, height_text = value.split("x")
    width, height = int(width_text), int(height_text)
    if width > _U32_MAX or height > _U32_MAX:
        raise ValueError("size edge does not fit 32 bits")
    return width, height


RESOLUTION_LONG_EDGE: dict[Resolution, int] = {
    Resolution.ONE_K: 1536,
    Resolution.TWO_K: 2048,
    Resolution.FOUR_K: 4096,
}
"""The longest edge of each ``resolution`` tier (a larger edge belongs to the next)."""


def resolution_tier(width: int, height: int) -> Resolution:
    """The tier a ``width``×``height`` image belongs to, by its longer edge."""
    long_edge = max(width, height)
    for tier, limit in RESOLUTION_LONG_EDGE.items():
        if long_edge <= limit:
            return tier
    return Resolution.FOUR_K


def _check_size(value: str) -> str:
    parse_size(value)
    return value


def parse_aspect_ratio(value: str) -> tuple[int, int]:
    """``"W:H"`` → ``(W, H)`` reduced by their greatest common divisor."""
    match = _RATIO_RE.fullmatch(value)
    if match is None:
        raise ValueError("aspect ratio must be W:H with positive integers")
    width, height = int(match.group(1)), int(match.group(2))
    if width > _U32_MAX or height > _U32_MAX:
        raise ValueError("aspect ratio term does not fit 32 bits")
    divisor = math.gcd(width, height)
    return width // divisor, height // divisor


def _reduce_ratio(value: str) -> str:
    width, height = parse_aspect_ratio(value)
    return f"{width}:{height}"


ImageSize = Annotated[
    StrictStr,
    Field(pattern=r"^(auto|[1-9][0-9]*x[1-9][0-9]*)$", examples=["auto", "1024x1024"]),
    AfterValidator(_check_size),
]
"""``"auto"`` or ``"WxH"`` (lower-case ``x``, no leading zeros)."""

AspectRatio = Annotated[
    StrictStr,
    Field(pattern=r"^[1-9][0-9]*:[1-9][0-9]*$", examples=["1:1", "16:9"]),
    AfterValidator(_reduce_ratio),
]
"""``"W:H"``, reduced by gcd when decoded (``1920:1080`` → ``16:9``)."""

InputKind = Literal["file", "url", "data_url", "base64"]
_PAYLOAD_KEY: dict[str, str] = {
    "file": "path",
    "url": "url",
    "data_url": "data_url",
    "base64": "data",
}


class ImageInput(RequestModel):
    """One image input: a server-local file, a remote URL, a data URL or bare base64."""

    type: InputKind
    path: StrictStr | None = Field(default=None, exclude_if=omit_none)
    url: StrictStr | None = Field(default=None, exclude_if=omit_none)
    data_url: StrictStr | None = Field(default=None, exclude_if=omit_none)
    data: StrictStr | None = Field(default=None, exclude_if=omit_none)
    media_type: StrictStr | None = Field(default=None, exclude_if=omit_none)
    filename: StrictStr | None = Field(default=None, exclude_if=omit_none)

    @model_validator(mode="before")
    @classmethod
    def _one_payload_for_the_type(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        kind = raw.get("type")
        if kind not in _PAYLOAD_KEY:
            return raw  # the Literal check reports it
        wanted = _PAYLOAD_KEY[kind]
        for key in _PAYLOAD_KEY.values():
            if key == wanted:
                if not isinstance(raw.get(key), str):
                    raise ValueError(f"{kind} input requires a string {key}")
            elif raw.get(key) is not None:  # a null payload key is absent
                raise ValueError(f"{key} is not a field of a {kind} input")
        return raw

    @property
    def payload(self) -> str:
        """The one payload string selected by ``type``."""
        value = getattr(self, _PAYLOAD_KEY[self.type])
        assert isinstance(value, str)
        return value

    @classmethod
    def from_payload(
        cls,
        kind: InputKind,
        payload: str,
        *,
        media_type: str | None = None,
        filename: str | None = None,
    ) -> ImageInput:
        return cls.model_validate(
            {
                "type": kind,
                _PAYLOAD_KEY[kind]: payload,
                "media_type": media_type,
                "filename": filename,
            }
        )


class GenerationParameters(RequestModel):
    """Provider-neutral generation parameters; every key optional on input."""

    n: U8 = 1
    size: ImageSize = "auto"
    aspect_ratio: AspectRatio | None = Field(default=None, exclude_if=omit_none)
    resolution: Resolution | None = Field(default=None, exclude_if=omit_none)
    quality: Quality = Quality.AUTO
    output_format: OutputFormat = OutputFormat.PNG
    output_compression: U8 | None = Field(default=None, exclude_if=omit_none)
    background: Background = Background.AUTO
    moderation: Moderation = Moderation.AUTO
    partial_images: U8 = 0
    failure_policy: MultiImageFailurePolicy = MultiImageFailurePolicy.FAIL_FAST
    input_fidelity: InputFidelity | None = Field(default=None, exclude_if=omit_none)
    action: ImageAction = ImageAction.AUTO

    @property
    def dimensions(self) -> tuple[int, int] | None:
        """Explicit ``(width, height)``, or ``None`` for ``auto``."""
        return parse_size(self.size)


class ProviderRoute(RequestModel):
    """One fallback route: a provider and optionally its model."""

    provider: StrictStr
    model: StrictStr | None = Field(default=None, exclude_if=omit_none)


class RoutingOptions(RequestModel):
    provider: StrictStr | None = Field(default=None, exclude_if=omit_none)
    model: StrictStr | None = Field(default=None, exclude_if=omit_none)
    fallbacks: list[ProviderRoute] = Field(default_factory=list, exclude_if=omit_empty)
    fallback_policy: FallbackPolicy = FallbackPolicy.ON_UNAVAILABLE
    prefer: RoutingPreference | None = Field(default=None, exclude_if=omit_none)
    """imagebridge addition, omitted when unset so the original's strict clients decode
    every request echo they can send (docs/api-decisions.md)."""


class SessionOptions(RequestModel):
    mode: SessionMode = SessionMode.ISOLATED
    key: StrictStr | None = Field(default=None, exclude_if=omit_none)
    thread_id: StrictStr | None = Field(default=None, exclude_if=omit_none)


class TransparencyOptions(RequestModel):
    """How a transparent background is produced, and the chroma-key matte thresholds."""

    mode: TransparencyMode = TransparencyMode.AUTO
    key_color: StrictStr | None = Field(default=None, exclude_if=omit_none)
    transparent_threshold: U8 = 12
    opaque_threshold: U8 = 96
    despill: StrictBool = True


class OutputOptions(RequestModel):
    response_format: ResponseFormat = ResponseFormat.B64_JSON
    filename_prefix: StrictStr | None = Field(default=None, exclude_if=omit_none)
    directory: StrictStr | None = Field(default=None, exclude_if=omit_none)
    filename: StrictStr | None = Field(default=None, exclude_if=omit_none)
    collision: ArtifactCollisionPolicy = ArtifactCollisionPolicy.ERROR
    metadata: ArtifactMetadataPolicy = ArtifactMetadataPolicy.NONE
    transparency: TransparencyOptions = Field(default_factory=TransparencyOptions)


class RequestPolicies(RequestModel):
    compatibility: CompatibilityMode = CompatibilityMode.STRICT
    negative_prompt: NegativePromptMode = NegativePromptMode.AUTO
    revised_prompt: RevisedPromptPolicy = RevisedPromptPolicy.INCLUDE
    batch_execution: BatchExecution = BatchExecution.AUTO
    size_mismatch: SizeMismatchPolicy | None = Field(default=None, exclude_if=omit_none)
    """imagebridge addition (``accept`` when unset), omitted when unset like ``prefer``."""
    on_disconnect: DisconnectPolicy | None = Field(default=None, exclude_if=omit_none)
    """imagebridge addition (the server's ``server.sync.on_disconnect`` when unset), omitted
    when unset: what a synchronous request becomes when its caller leaves after a provider
    call began."""


class ImageRequest(RequestModel):
    """A complete provider-neutral image request.

    ``operation`` selects the shape: ``generate`` forbids ``images`` and ``mask``; ``edit``
    requires the ``images`` key (an empty list is a validation issue, not a decode error).
    """

    version: StrictStr = CONTRACT_VERSION
    prompt: StrictStr
    negative_prompt: StrictStr | None = Field(default=None, exclude_if=omit_none)
    operation: Operation
    reference_images: list[ImageInput] = Field(default_factory=list, exclude_if=omit_empty)
    images: list[ImageInput] | None = Field(default=None, exclude_if=omit_none)
    mask: ImageInput | None = Field(default=None, exclude_if=omit_none)
    parameters: GenerationParameters = Field(default_factory=GenerationParameters)
    routing: RoutingOptions = Field(default_factory=RoutingOptions)
    session: SessionOptions = Field(default_factory=SessionOptions)
    output: OutputOptions = Field(default_factory=OutputOptions)
    policies: RequestPolicies = Field(default_factory=RequestPolicies)
    idempotency_key: StrictStr | None = Field(default=None, exclude_if=omit_none)
    timeout_ms: U64 | None = Field(default=None, exclude_if=omit_none)
    user: StrictStr | None = Field(default=None, exclude_if=omit_none)

    @model_validator(mode="before")
    @classmethod
    def _shape_follows_operation(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        operation = raw.get("operation")
        if operation == Operation.GENERATE:
            if raw.get("images") is not None or raw.get("mask") is not None:
                raise ValueError("generate requests carry no images or mask")
        elif operation == Operation.EDIT and not isinstance(raw.get("images"), list):
            raise ValueError("edit requests require an images array")
        return raw

    # -- conveniences used by every layer ---------------------------------------------

    @property
    def edit_images(self) -> list[ImageInput]:
        return list(self.images or [])

    def all_inputs(self) -> list[tuple[str, ImageInput]]:
        """Every input with its issue field path: images, then mask, then references."""
        inputs: list[tuple[str, ImageInput]] = [
            (f"images[{i}]", item) for i, item in enumerate(self.edit_images)
        ]
        if self.mask is not None:
            inputs.append(("mask", self.mask))
        inputs.extend(
            (f"reference_images[{i}]", item) for i, item in enumerate(self.reference_images)
        )
        return inputs

    def fingerprint_payload(self) -> dict[str, Any]:
        """The request as hashed for idempotency: normalized, minus key and timeout."""
        data = self.to_wire()
        data.pop("idempotency_key", None)
        data.pop("timeout_ms", None)
        return data
