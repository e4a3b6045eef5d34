"""Closed value sets of the v1 contract.

Members are declared in the contract's canonical order (``auto < low < medium < high``,
``png < jpeg < webp`` …): capability sets are emitted and searched in that order.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ArtifactCollisionPolicy",
    "ArtifactMetadataPolicy",
    "Background",
    "BatchExecution",
    "BatchMode",
    "CompatibilityMode",
    "DisconnectPolicy",
    "FallbackPolicy",
    "ImageAction",
    "ImageJobStatus",
    "InputFidelity",
    "Moderation",
    "MultiImageFailurePolicy",
    "NegativePromptMode",
    "Operation",
    "OutputFormat",
    "ProviderAttemptOutcome",
    "Quality",
    "Resolution",
    "ResponseFormat",
    "RevisedPromptPolicy",
    "RoutingPreference",
    "SessionMode",
    "SizeMismatchPolicy",
    "SupportLevel",
    "TransparencyMode",
    "enum_rank",
]


class Operation(StrEnum):
    GENERATE = "generate"
    EDIT = "edit"


class Quality(StrEnum):
    AUTO = "auto"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class OutputFormat(StrEnum):
    PNG = "png"
    JPEG = "jpeg"
    WEBP = "webp"

    @property
    def media_type(self) -> str:
        return f"image/{self.value}"

    @property
    def extension(self) -> str:
        return "jpg" if self is OutputFormat.JPEG else self.value


class Background(StrEnum):
    AUTO = "auto"
    OPAQUE = "opaque"
    TRANSPARENT = "transparent"


class Moderation(StrEnum):
    AUTO = "auto"
    LOW = "low"


class Resolution(StrEnum):
    ONE_K = "1k"
    TWO_K = "2k"
    FOUR_K = "4k"


class InputFidelity(StrEnum):
    LOW = "low"
    HIGH = "high"


class ImageAction(StrEnum):
    AUTO = "auto"
    GENERATE = "generate"
    EDIT = "edit"


class MultiImageFailurePolicy(StrEnum):
    FAIL_FAST = "fail_fast"
    BEST_EFFORT = "best_effort"


class FallbackPolicy(StrEnum):
    ON_UNAVAILABLE = "on_unavailable"
    ON_ERROR = "on_error"


class SessionMode(StrEnum):
    ISOLATED = "isolated"
    PERSISTENT = "persistent"
    THREAD = "thread"


class ResponseFormat(StrEnum):
    B64_JSON = "b64_json"
    URL = "url"
    ARTIFACT = "artifact"
    METADATA = "metadata"


class ArtifactCollisionPolicy(StrEnum):
    ERROR = "error"
    SUFFIX = "suffix"


class ArtifactMetadataPolicy(StrEnum):
    NONE = "none"
    SIDECAR = "sidecar"
    EMBEDDED = "embedded"
    SIDECAR_AND_EMBEDDED = "sidecar_and_embedded"

    @property
    def writes_sidecar(self) -> bool:
        return self in (ArtifactMetadataPolicy.SIDECAR, ArtifactMetadataPolicy.SIDECAR_AND_EMBEDDED)

    @property
    def embeds(self) -> bool:
        return self in (
            ArtifactMetadataPolicy.EMBEDDED,
            ArtifactMetadataPolicy.SIDECAR_AND_EMBEDDED,
        )


class TransparencyMode(StrEnum):
    AUTO = "auto"
    NATIVE = "native"
    CHROMA_KEY = "chroma_key"


class CompatibilityMode(StrEnum):
    STRICT = "strict"
    NORMALIZE = "normalize"
    BEST_EFFORT = "best_effort"


class NegativePromptMode(StrEnum):
    AUTO = "auto"
    NATIVE = "native"
    MERGE = "merge"
    REJECT = "reject"


class RevisedPromptPolicy(StrEnum):
    INCLUDE = "include"
    OMIT = "omit"
    REQUIRE = "require"


class BatchExecution(StrEnum):
    AUTO = "auto"
    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"


class SizeMismatchPolicy(StrEnum):
    """``policies.size_mismatch`` (an imagebridge addition): what a delivered image of
    another size than asked becomes. ``accept`` reports it; ``fail`` refuses it after the
    (billed) call."""

    ACCEPT = "accept"
    FAIL = "fail"


class DisconnectPolicy(StrEnum):
    """``policies.on_disconnect`` (an imagebridge addition): what a synchronous request
    becomes when its caller goes away once a provider call has begun. ``keep`` finishes
    it and keeps its images in the history; ``cancel`` (the original's rule) stops it.
    Before any provider call a disconnect always cancels."""

    KEEP = "keep"
    CANCEL = "cancel"


class RoutingPreference(StrEnum):
    """``routing.prefer`` (an imagebridge addition): ``default`` routes as configured;
    ``honour_size`` sends a large explicit size to the transport measured to deliver it."""

    DEFAULT = "default"
    HONOUR_SIZE = "honour_size"


class SupportLevel(StrEnum):
    NATIVE = "native"
    EMULATED = "emulated"
    UNSUPPORTED = "unsupported"


class BatchMode(StrEnum):
    NATIVE = "native"
    FAN_OUT = "fan_out"


class ProviderAttemptOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ImageJobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def terminal(self) -> bool:
        return self not in (ImageJobStatus.QUEUED, ImageJobStatus.RUNNING)


def enum_rank(member: StrEnum) -> int:
    """Position of a member in its declaration order (the contract's sort order)."""
    return list(type(member)).index(member)
