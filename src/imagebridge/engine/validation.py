"""Intrinsic request validation: every problem at once, sorted, bounded.

Validation looks only at the request and the configured :class:`RequestLimits`; what a
provider can do is negotiation's job. All issues are collected so a caller fixes them in one
round trip; the list is capped so a hostile request cannot amplify the error body.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from imagebridge.contract.enums import (
    ArtifactCollisionPolicy,
    BatchExecution,
    ImageAction,
    NegativePromptMode,
    Operation,
    OutputFormat,
    ResponseFormat,
    SessionMode,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import CONTRACT_VERSION, ImageInput, ImageRequest, parse_size
from imagebridge.contract.response import ValidationIssue

if TYPE_CHECKING:  # the pixel layer (Pillow) stays unloaded for the interface alone
    from imagebridge.imaging.inspect import ImageInfo

__all__ = [
    "MAX_EMBEDDED_PROMPT_BYTES",
    "MAX_ISSUES",
    "MAX_PARTIAL_IMAGES",
    "RequestLimits",
    "check_mask",
    "has_control_characters",
    "is_safe_directory",
    "is_safe_filename",
    "parse_key_color",
    "validate_negotiated_request",
    "validate_request",
    "validation_issues",
]

MAX_ISSUES = 64
"""At most 63 real issues plus one ``too_many_issues`` marker."""

MAX_PARTIAL_IMAGES = 3
MAX_FALLBACKS = 4
MAX_CHECKED_INPUTS = 64
MAX_EMBEDDED_PROMPT_BYTES = 12 * 1024
_MAX_DIRECTORY_BYTES = 512
_MAX_DIRECTORY_COMPONENT_BYTES = 128
_MAX_FILENAME_BYTES = 160
_PORTABLE_RE = re.compile(r"^[A-Za-z0-9._-]+$")
_KEY_COLOR_RE = re.compile(r"^#?([0-9A-Fa-f]{6})$")


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """Bounds on one request; defaults equal the config's ``runtime.request.*`` defaults."""

    max_prompt_bytes: int = 131_072
    max_negative_prompt_bytes: int = 65_536
    max_outputs: int = 255
    max_inputs: int = 16
    max_inline_encoded_bytes: int = 64 * 1024 * 1024
    max_edge: int = 16_384
    max_timeout_ms: int = 1_800_000
    max_identifier_bytes: int = 256


def has_control_characters(text: str) -> bool:
    return any(unicodedata.category(char) == "Cc" for char in text)


def parse_key_color(value: str) -> tuple[int, int, int] | None:
    """``#RRGGBB`` or ``RRGGBB`` → ``(r, g, b)``; ``None`` when malformed."""
    match = _KEY_COLOR_RE.fullmatch(value)
    if match is None:
        return None
    digits = match.group(1)
    return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)


def is_safe_directory(value: str) -> bool:
    """A portable relative directory: ``/``-separated, no dot-leading or empty components."""
    if not value or len(value.encode()) > _MAX_DIRECTORY_BYTES:
        return False
    for component in value.split("/"):
        if (
            not component
            or component in {".", ".."}
            or component.startswith(".")
            or len(component.encode()) > _MAX_DIRECTORY_COMPONENT_BYTES
            or not _PORTABLE_RE.fullmatch(component)
        ):
            return False
    return True


_FORMAT_EXTENSIONS: dict[OutputFormat, frozenset[str]] = {
    OutputFormat.PNG: frozenset({"png"}),
    OutputFormat.JPEG: frozenset({"jpg", "jpeg"}),
    OutputFormat.WEBP: frozenset({"webp"}),
}


def is_safe_filename(value: str, output_format: OutputFormat) -> bool:
    """A portable exact filename whose extension, if any, matches the output format."""
    if not value or len(value.encode()) > _MAX_FILENAME_BYTES or value.startswith("."):
        return False
    if not _PORTABLE_RE.fullmatch(value):
        return False
    if "." not in value:
        return True
    extension = value.rsplit(".", 1)[1].lower()
    return extension in _FORMAT_EXTENSIONS[output_format]


@dataclass(slots=True)
class _Issues:
    items: list[ValidationIssue] = field(default_factory=list)
    overflowed: bool = False

    def add(self, field_path: str, code: str, message: str) -> None:
        if self.overflowed:
            return
        if len(self.items) >= MAX_ISSUES - 1:
            self.overflowed = True
            self.items.append(
                ValidationIssue(
                    field="$",
                    code="too_many_issues",
                    message="further validation issues were omitted",
                )
            )
            return
        self.items.append(ValidationIssue(field=field_path, code=code, message=message))

    def sorted(self) -> list[ValidationIssue]:
        return sorted(self.items, key=lambda issue: (issue.field, issue.code))


def _check_identifier(issues: _Issues, path: str, value: str | None, limits: RequestLimits) -> None:
    if value is None:
        return
    if not value.strip():
        issues.add(path, "empty", "identifier must not be blank")
    elif len(value.encode()) > limits.max_identifier_bytes:
        issues.add(path, "too_large", f"identifier exceeds {limits.max_identifier_bytes} bytes")
    elif has_control_characters(value):
        issues.add(path, "invalid", "identifier must not contain control characters")


def _check_input(issues: _Issues, path: str, item: ImageInput, limits: RequestLimits) -> None:
    payload = item.payload
    if item.type == "file":
        if not payload:
            issues.add(path, "empty", "file input path must not be empty")
    elif item.type == "url":
        if not payload.strip():
            issues.add(path, "empty", "url input must not be blank")
    elif item.type == "data_url":
        if len(payload) > limits.max_inline_encoded_bytes:
            issues.add(path, "too_large", "data URL exceeds the inline byte limit")
        if not payload.startswith("data:image/"):
            issues.add(path, "invalid", "data URL must start with data:image/")
    else:
        if len(payload) > limits.max_inline_encoded_bytes:
            issues.add(path, "too_large", "base64 input exceeds the inline byte limit")
        if not payload:
            issues.add(path, "empty", "base64 input must not be empty")
    name = item.filename
    if name is not None and (
        not name or "/" in name or "\\" in name or has_control_characters(name)
    ):
        issues.add(path, "invalid_filename", "logical filename must be a plain file name")


def _check_prompts(issues: _Issues, request: ImageRequest, limits: RequestLimits) -> None:
    if request.version != CONTRACT_VERSION:
        issues.add("version", "unsupported_version", 'contract version must be "1"')
    if not request.prompt.strip():
        issues.add("prompt", "required", "prompt must not be blank")
    elif len(request.prompt.encode()) > limits.max_prompt_bytes:
        issues.add("prompt", "too_large", f"prompt exceeds {limits.max_prompt_bytes} bytes")
    negative = request.negative_prompt
    if negative is not None:
        if not negative.strip():
            issues.add("negative_prompt", "empty", "negative prompt must not be blank")
        elif len(negative.encode()) > limits.max_negative_prompt_bytes:
            issues.add(
                "negative_prompt",
                "too_large",
                f"negative prompt exceeds {limits.max_negative_prompt_bytes} bytes",
            )
        if request.policies.negative_prompt is NegativePromptMode.REJECT:
            issues.add(
                "policies.negative_prompt",
                "rejected_by_policy",
                "negative prompt is present while the policy rejects it",
            )


def _check_parameters(issues: _Issues, request: ImageRequest, limits: RequestLimits) -> None:
    params = request.parameters
    if params.n == 0 or params.n > limits.max_outputs:
        issues.add("parameters.n", "out_of_range", f"n must be between 1 and {limits.max_outputs}")
    dims = parse_size(params.size)
    if dims is not None:
        if max(dims) > limits.max_edge:
            issues.add(
                "parameters.size", "out_of_range", f"size edges must not exceed {limits.max_edge}"
            )
        if params.aspect_ratio is not None or params.resolution is not None:
            issues.add(
                "parameters.size",
                "ambiguous",
                "an explicit size cannot be combined with aspect_ratio or resolution",
            )
    if params.output_compression is not None:
        if params.output_compression > 100:
            issues.add(
                "parameters.output_compression", "out_of_range", "compression must be 0 to 100"
            )
        if params.output_format not in (OutputFormat.JPEG, OutputFormat.WEBP):
            issues.add(
                "parameters.output_compression",
                "incompatible",
                "compression applies only to jpeg and webp output",
            )
    if params.partial_images > MAX_PARTIAL_IMAGES:
        issues.add(
            "parameters.partial_images",
            "out_of_range",
            f"partial_images must be 0 to {MAX_PARTIAL_IMAGES}",
        )
    source_count = len(request.edit_images) + len(request.reference_images)
    if params.input_fidelity is not None and source_count == 0:
        issues.add(
            "parameters.input_fidelity",
            "incompatible",
            "input_fidelity needs at least one source or reference image",
        )
    if (
        params.action is ImageAction.EDIT
        and request.operation is Operation.GENERATE
        and not request.reference_images
    ):
        issues.add(
            "parameters.action",
            "incompatible",
            "action edit on a generate request needs reference images",
        )
    if params.action is ImageAction.GENERATE and request.operation is Operation.EDIT:
        issues.add(
            "parameters.action", "incompatible", "action generate cannot run an edit operation"
        )


def _check_routing_and_session(
    issues: _Issues, request: ImageRequest, limits: RequestLimits
) -> None:
    routing, session = request.routing, request.session
    _check_identifier(issues, "routing.provider", routing.provider, limits)
    _check_identifier(issues, "routing.model", routing.model, limits)
    for index, route in enumerate(routing.fallbacks):
        _check_identifier(issues, f"routing.fallbacks[{index}].provider", route.provider, limits)
        _check_identifier(issues, f"routing.fallbacks[{index}].model", route.model, limits)
    _check_identifier(issues, "idempotency_key", request.idempotency_key, limits)
    _check_identifier(issues, "user", request.user, limits)
    _check_identifier(issues, "session.key", session.key, limits)
    _check_identifier(issues, "session.thread_id", session.thread_id, limits)

    if len(routing.fallbacks) > MAX_FALLBACKS:
        issues.add(
            "routing.fallbacks", "too_many", f"at most {MAX_FALLBACKS} fallback routes are allowed"
        )
    seen: set[tuple[str, str | None]] = set()
    primary = (routing.provider, routing.model) if routing.provider is not None else None
    for index, route in enumerate(routing.fallbacks):
        pair = (route.provider, route.model)
        if pair in seen or pair == primary:
            issues.add(
                f"routing.fallbacks[{index}]", "duplicate", "fallback route repeats another route"
            )
        seen.add(pair)
    isolated = session.mode is SessionMode.ISOLATED
    if routing.fallbacks and not isolated:
        issues.add(
            "routing.fallbacks", "incompatible", "fallback routes require an isolated session"
        )
    if request.policies.batch_execution is BatchExecution.PARALLEL and not isolated:
        issues.add(
            "policies.batch_execution",
            "incompatible",
            "parallel batch execution requires an isolated session",
        )

    if session.mode is SessionMode.ISOLATED:
        if session.key is not None or session.thread_id is not None:
            issues.add("session", "incompatible", "isolated sessions take no key or thread_id")
    elif session.mode is SessionMode.PERSISTENT:
        if session.key is None or not session.key.strip():
            issues.add("session.key", "required", "persistent sessions require a key")
        if session.thread_id is not None:
            issues.add("session.thread_id", "incompatible", "persistent sessions take no thread_id")
    else:
        if session.thread_id is None or not session.thread_id.strip():
            issues.add("session.thread_id", "required", "thread sessions require a thread_id")
        if session.key is not None:
            issues.add("session.key", "incompatible", "thread sessions take no key")

    if request.timeout_ms is not None and not 1 <= request.timeout_ms <= limits.max_timeout_ms:
        issues.add("timeout_ms", "out_of_range", f"timeout_ms must be 1 to {limits.max_timeout_ms}")


def _check_output(issues: _Issues, request: ImageRequest) -> None:
    output = request.output
    transparency = output.transparency
    if transparency.transparent_threshold >= transparency.opaque_threshold:
        issues.add(
            "output.transparency.transparent_threshold",
            "out_of_range",
            "transparent_threshold must be below opaque_threshold",
        )
    if transparency.key_color is not None and parse_key_color(transparency.key_color) is None:
        issues.add("output.transparency.key_color", "invalid_format", "key_color must be #RRGGBB")

    publishes = output.response_format in (ResponseFormat.ARTIFACT, ResponseFormat.URL)
    if output.filename_prefix is not None and not publishes:
        issues.add(
            "output.filename_prefix",
            "incompatible",
            "filename_prefix needs artifact or url delivery",
        )
    if (output.directory is not None or output.filename is not None) and not publishes:
        issues.add("output", "incompatible", "directory and filename need artifact or url delivery")
    if output.filename is not None:
        if output.filename_prefix is not None:
            issues.add(
                "output.filename",
                "incompatible",
                "filename cannot be combined with filename_prefix",
            )
        if request.parameters.n != 1:
            issues.add("output.filename", "incompatible", "an exact filename requires n = 1")
    if output.collision is not ArtifactCollisionPolicy.ERROR and output.filename is None:
        issues.add(
            "output.collision", "incompatible", "collision suffix applies only to exact filenames"
        )
    if output.metadata.writes_sidecar and output.response_format is not ResponseFormat.ARTIFACT:
        issues.add("output.metadata", "incompatible", "metadata sidecars need artifact delivery")
    if output.metadata.embeds:
        if output.response_format is ResponseFormat.METADATA:
            issues.add(
                "output.metadata",
                "incompatible",
                "embedded metadata needs image bytes in the response",
            )
        prompt_bytes = len(request.prompt.encode()) + len((request.negative_prompt or "").encode())
        if prompt_bytes > MAX_EMBEDDED_PROMPT_BYTES:
            issues.add(
                "output.metadata",
                "too_large",
                "prompts are too large to embed as image metadata",
            )
    if output.directory is not None and not is_safe_directory(output.directory):
        issues.add("output.directory", "invalid", "directory must be a portable relative path")
    if output.filename is not None and not is_safe_filename(
        output.filename, request.parameters.output_format
    ):
        issues.add(
            "output.filename",
            "invalid",
            "filename must be portable and its extension must match the output format",
        )


def _check_inputs(issues: _Issues, request: ImageRequest, limits: RequestLimits) -> None:
    if request.operation is Operation.EDIT and not request.edit_images:
        issues.add("images", "required", "edit requests need at least one source image")
    total = len(request.edit_images) + len(request.reference_images)
    total += 1 if request.mask is not None else 0
    if total > limits.max_inputs:
        issues.add(
            "operation", "too_many_inputs", f"at most {limits.max_inputs} input images are allowed"
        )
    for path, item in request.all_inputs()[:MAX_CHECKED_INPUTS]:
        _check_input(issues, path, item, limits)


def validation_issues(request: ImageRequest, limits: RequestLimits) -> list[ValidationIssue]:
    """Every intrinsic issue of ``request``, sorted by ``(field, code)``, at most 64."""
    issues = _Issues()
    _check_prompts(issues, request, limits)
    _check_parameters(issues, request, limits)
    _check_routing_and_session(issues, request, limits)
    _check_output(issues, request)
    _check_inputs(issues, request, limits)
    return issues.sorted()


def validate_request(request: ImageRequest, limits: RequestLimits) -> None:
    """Raise ``invalid_request`` "request validation failed" with ``details.issues``."""
    issues = validation_issues(request, limits)
    if issues:
        raise BridgeError.invalid_request(
            "request validation failed",
            issues=[issue.model_dump(mode="json") for issue in issues],
        )


_MERGED_PROMPT_NOTE = " once the negative prompt was merged into it"


def validate_negotiated_request(
    request: ImageRequest, limits: RequestLimits, *, negative_prompt_merged: bool
) -> None:
    """:func:`validate_request` for what negotiation produced.

    Negotiation can only grow a request by merging the negative prompt into the prompt
    (for a provider without native support). When that merge is what outgrew the prompt
    limit, the issue and the suggestions say so: the caller's own prompt was within it.
    """
    issues = validation_issues(request, limits)
    if not issues:
        return
    dumped = [issue.model_dump(mode="json") for issue in issues]
    merged_too_large = negative_prompt_merged and any(
        issue["field"] == "prompt" and issue["code"] == "too_large" for issue in dumped
    )
    if not merged_too_large:
        raise BridgeError.invalid_request("request validation failed", issues=dumped)
    for issue in dumped:
        if issue["field"] == "prompt" and issue["code"] == "too_large":
            issue["message"] += _MERGED_PROMPT_NOTE
    raise BridgeError(
        ErrorCode.INVALID_REQUEST,
        "request validation failed",
        details={"issues": dumped, "negative_prompt_merged": True},
        suggestions=[
            "Shorten the prompt or the negative prompt: this provider has no native negative "
            "prompt, so the two are sent as one prompt.",
            "Or route to a provider whose capabilities list a native negative prompt.",
        ],
    )


MASK_SIZE_MESSAGE = "the mask must have the same dimensions as the first image"
MASK_ALPHA_MESSAGE = "the mask needs an alpha channel marking the area to edit"


def check_mask(mask: ImageInfo, source: ImageInfo, *, needs_alpha: bool = True) -> None:
    """Refuse a mask that cannot mark a region of the first edit image (400 naming ``mask``).

    The one mask check every surface and route uses, before any upstream call: a mask is
    the first image's size (every mask API, and the bridge's own compositing, reads it
    pixel for pixel), and its alpha channel marks the area to edit (transparent = change).
    ``needs_alpha`` is off only for a native transport that reads masks another way.
    """
    problem = None
    if (mask.width, mask.height) != (source.width, source.height):
        problem = MASK_SIZE_MESSAGE
    elif needs_alpha and not mask.has_alpha:
        problem = MASK_ALPHA_MESSAGE
    if problem is None:
        return
    raise BridgeError(
        ErrorCode.INPUT,
        problem,
        details={
            "field": "mask",
            "mask_size": f"{mask.width}x{mask.height}",
            "image_size": f"{source.width}x{source.height}",
        },
    )
