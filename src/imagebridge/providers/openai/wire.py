"""The OpenAI Images wire format: request fields, responses, stream events and errors.

Pure functions over plain data, so every mapping is testable without a server. Nothing
here reads the environment, touches the network or keeps upstream text: error messages
are ours, and only a sanitised upstream ``code``/``param`` and the HTTP status reach
``details`` (an upstream message may echo a prompt or a masked key).
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from imagebridge.contract.enums import Background, Moderation, OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import Usage
from imagebridge.providers.openai.models import ModelProfile

__all__ = [
    "MAX_ERROR_BODY_BYTES",
    "StreamState",
    "WireImage",
    "WireResult",
    "classify_http_error",
    "classify_upstream_error",
    "parse_images_payload",
    "parse_usage",
    "request_fields",
    "retry_after_ms",
]

MAX_ERROR_BODY_BYTES = 64 * 1024
"""Most bytes of an error body that are read (and parsed) at all."""

_MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000
_MAX_COUNT = 2**63 - 1
_MAX_REVISED_PROMPT_CHARS = 64 * 1024
_CODE_DISALLOWED = re.compile(r"[^A-Za-z0-9_.\-\[\]]")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_SAFETY_CODES = frozenset(
    {"moderation_blocked", "content_policy_violation", "content_filter", "safety_violation"}
)
_UNSUPPORTED_CODES = frozenset(
    {
        "unsupported_parameter",
        "unsupported_value",
        "unknown_parameter",
        "unsupported_model",
        "unsupported_capability",
    }
)
_QUOTA_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})
_MODEL_CODES = frozenset({"model_not_found", "invalid_model"})
_PARTIAL_EVENTS = frozenset({"image_generation.partial_image", "image_edit.partial_image"})
_COMPLETED_EVENTS = frozenset({"image_generation.completed", "image_edit.completed"})


# -- requests ------------------------------------------------------------------------------


def request_fields(
    request: ImageRequest, profile: ModelProfile, model: str, *, with_inputs: bool
) -> dict[str, str | int | bool]:
    """The body fields for one call (``with_inputs``: the edits route).

    Values equal to the server's default (``auto``, ``png``) are left out, so plain
    compatible servers only ever see what the caller really asked for; negotiation has
    already made sure every value sent is one the model accepts.
    """
    params = request.parameters
    fields: dict[str, str | int | bool] = {
        "model": model,
        "prompt": request.prompt,
        "n": params.n,
    }
    if params.size != "auto":
        fields["size"] = params.size
    quality = profile.wire_quality(params.quality)
    if quality is not None:
        fields["quality"] = quality
    if params.background is not Background.AUTO:
        fields["background"] = params.background.value
    if params.output_format is not OutputFormat.PNG:
        fields["output_format"] = params.output_format.value
    if params.output_compression is not None:
        fields["output_compression"] = params.output_compression
    if params.moderation is not Moderation.AUTO:
        fields["moderation"] = params.moderation.value
    if with_inputs and params.input_fidelity is not None:
        fields["input_fidelity"] = params.input_fidelity.value
    if params.partial_images > 0:
        fields["stream"] = True
        fields["partial_images"] = params.partial_images
    if request.user is not None:
        fields["user"] = request.user
    if profile.sends_response_format:
        fields["response_format"] = "b64_json"
    return fields


# -- responses -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WireImage:
    """One image as the upstream sent it: base64, or a URL (``data:`` or http(s))."""

    b64_json: str | None = field(default=None, repr=False)
    url: str | None = field(default=None, repr=False)
    revised_prompt: str | None = field(default=None, repr=False)


@dataclass(slots=True)
class WireResult:
    """Everything one call produced."""

    images: list[WireImage]
    usage: Usage | None = None


def _protocol(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.PROTOCOL, message, details=details or None)


def _wire_image(entry: object, max_base64_chars: int) -> WireImage:
    if not isinstance(entry, Mapping):
        raise _protocol("an upstream image entry is not an object")
    b64 = entry.get("b64_json")
    url = entry.get("url")
    revised = entry.get("revised_prompt")
    if not isinstance(revised, str) or not revised or len(revised) > _MAX_REVISED_PROMPT_CHARS:
        revised = None
    if isinstance(b64, str) and b64:
        if len(b64) > max_base64_chars:
            raise _protocol(
                "upstream image exceeds the configured base64 limit",
                maximum_bytes=max_base64_chars,
            )
        return WireImage(b64_json=b64, revised_prompt=revised)
    if isinstance(url, str) and url:
        if len(url) > max_base64_chars:
            raise _protocol(
                "upstream image URL exceeds the configured base64 limit",
                maximum_bytes=max_base64_chars,
            )
        return WireImage(url=url, revised_prompt=revised)
    raise _protocol("an upstream image entry carries neither b64_json nor url")


def parse_images_payload(payload: object, *, max_base64_chars: int) -> WireResult:
    """``{"data": [{"b64_json"|"url", "revised_prompt"?}], "usage"?}`` → images and usage."""
    if not isinstance(payload, Mapping):
        raise _protocol("upstream response is not a JSON object")
    data = payload.get("data")
    if not isinstance(data, list):
        raise _protocol("upstream response has no data list")
    images = [_wire_image(entry, max_base64_chars) for entry in data]
    return WireResult(images=images, usage=parse_usage(payload.get("usage")))


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return min(value, _MAX_COUNT)


def parse_usage(raw: object) -> Usage | None:
    """The upstream ``usage`` block; the image/text split goes to ``usage.provider``."""
    if not isinstance(raw, Mapping):
        return None
    counters: dict[str, int] = {}
    for side in ("input", "output"):
        details = raw.get(f"{side}_tokens_details")
        if isinstance(details, Mapping):
            for kind in ("image", "text"):
                value = _count(details.get(f"{kind}_tokens"))
                if value is not None:
                    counters[f"{side}_{kind}_tokens"] = value
    usage = Usage(
        input_tokens=_count(raw.get("input_tokens")),
        output_tokens=_count(raw.get("output_tokens")),
        total_tokens=_count(raw.get("total_tokens")),
        provider=counters,
    )
    if usage.input_tokens is None and usage.output_tokens is None and usage.total_tokens is None:
        return usage if counters else None
    return usage


def merge_usage(left: Usage | None, right: Usage | None) -> Usage | None:
    """The sum of two usage blocks (either may be absent)."""
    if left is None:
        return right
    if right is None:
        return left

    def add(a: int | None, b: int | None) -> int | None:
        if a is None and b is None:
            return None
        return min((a or 0) + (b or 0), _MAX_COUNT)

    counters = dict(left.provider)
    for key, value in right.provider.items():
        counters[key] = min(counters.get(key, 0) + value, _MAX_COUNT)
    return Usage(
        input_tokens=add(left.input_tokens, right.input_tokens),
        output_tokens=add(left.output_tokens, right.output_tokens),
        total_tokens=add(left.total_tokens, right.total_tokens),
        provider=counters,
    )


@dataclass(frozen=True, slots=True)
class OpenAIPartialImage:
    """A streamed preview, attributed to the output that was in progress."""

    index: int
    partial_index: int
    b64_json: str = field(repr=False)


class StreamState:
    """Folds ``image_generation.*`` / ``image_edit.*`` stream events into a result.

    The upstream does not say which output a partial image belongs to, so partials are
    attributed to the output in progress: the number of images completed so far (the
    last output once all are done, since a final image may overtake its partials).
    """

    def __init__(self, expected: int, *, max_base64_chars: int) -> None:
        self.expected = expected
        self.max_base64_chars = max_base64_chars
        self.images: list[WireImage] = []
        self.usage: Usage | None = None
        self._partials_seen: dict[int, int] = {}

    @property
    def complete(self) -> bool:
        return len(self.images) >= self.expected

    def handle(self, event_name: str | None, data: str) -> OpenAIPartialImage | None:
        """Apply one SSE event; returns a partial image to forward, if it was one."""
        try:
            payload = json.loads(data)
        except (ValueError, RecursionError):
            raise _protocol("upstream stream event is not valid JSON", stage="stream") from None
        if not isinstance(payload, Mapping):
            raise _protocol("upstream stream event is not a JSON object", stage="stream")
        kind = payload.get("type", event_name)
        if kind in _PARTIAL_EVENTS:
            return self._partial(payload)
        if kind in _COMPLETED_EVENTS:
            if len(self.images) >= self.expected:
                raise _protocol("upstream streamed more images than requested", stage="stream")
            self.images.append(_wire_image(payload, self.max_base64_chars))
            self.usage = merge_usage(self.usage, parse_usage(payload.get("usage")))
            return None
        if kind == "error" or "error" in payload:
            raise classify_upstream_error(payload, status=None)
        return None  # unknown event types are ignored, as the API may add some

    def _partial(self, payload: Mapping[str, Any]) -> OpenAIPartialImage | None:
        b64 = payload.get("b64_json")
        if not isinstance(b64, str) or not b64 or len(b64) > self.max_base64_chars:
            return None
        index = min(len(self.images), self.expected - 1)
        raw = payload.get("partial_image_index")
        seen = self._partials_seen.get(index, 0)
        partial_index = raw if isinstance(raw, int) and not isinstance(raw, bool) else seen
        self._partials_seen[index] = seen + 1
        if not 0 <= partial_index <= 255:
            return None
        return OpenAIPartialImage(index=index, partial_index=partial_index, b64_json=b64)


# -- errors --------------------------------------------------------------------------------


def sanitize_code(raw: object, secrets: Sequence[str] = ()) -> str | None:
    """At most 64 characters of ``[A-Za-z0-9_.-[]]``; ``redacted`` if it echoes a secret."""
    if not isinstance(raw, str) or not raw.strip():
        return None
    code = _CODE_DISALLOWED.sub("", raw[:64])
    if not code:
        return None
    for secret in secrets:
        if secret and (secret in raw or (len(code) >= 8 and code in secret)):
            return "redacted"
    return code


def _error_object(body: bytes) -> Mapping[str, Any]:
    try:
        payload = json.loads(body[:MAX_ERROR_BODY_BYTES]) if body else None
    except (ValueError, RecursionError, UnicodeDecodeError):
        return {}
    if not isinstance(payload, Mapping):
        return {}
    inner = payload.get("error")
    return inner if isinstance(inner, Mapping) else payload


def _text(value: object) -> str:
    return value.lower() if isinstance(value, str) else ""


def _request_id(headers: Mapping[str, str]) -> str | None:
    value = headers.get("x-request-id", "").strip()
    return value if _REQUEST_ID.fullmatch(value) else None


def retry_after_ms(headers: Mapping[str, str], now: float | None = None) -> int | None:
    """``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), clamped to a day."""
    raw = headers.get("retry-after-ms", "").strip()
    if raw.isascii() and raw.isdigit() and len(raw) <= 12:
        return min(int(raw), _MAX_RETRY_AFTER_MS)
    raw = headers.get("retry-after", "").strip()
    if not raw or len(raw) > 64:
        return None
    if raw.isascii() and raw.isdigit():
        return min(int(raw) * 1000, _MAX_RETRY_AFTER_MS)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds) and seconds >= 0:
        return min(math.ceil(seconds * 1000), _MAX_RETRY_AFTER_MS)
    try:
        moment = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    clock = time.time() if now is None else now
    return int(min(max(math.ceil((moment.timestamp() - clock) * 1000), 0), _MAX_RETRY_AFTER_MS))


def classify_upstream_error(
    error: Mapping[str, Any],
    *,
    status: int | None,
    headers: Mapping[str, str] | None = None,
    secrets: Sequence[str] = (),
    now: float | None = None,
) -> BridgeError:
    """One upstream failure (an HTTP error body's ``error`` object or a stream ``error``
    event) → the bridge's error. See :func:`classify_http_error` for the table."""
    inner = error.get("error")
    error_obj: Mapping[str, Any] = inner if isinstance(inner, Mapping) else error
    lowered = {str(k).lower(): str(v) for k, v in (headers or {}).items()}
    code = sanitize_code(error_obj.get("code"), secrets)
    kind = sanitize_code(error_obj.get("type"), secrets)
    param = sanitize_code(error_obj.get("param"), secrets)
    message = _text(error_obj.get("message"))
    details: dict[str, Any] = {}
    if status is not None:
        details["http_status"] = status
    else:
        details["stage"] = "stream"
    if code is not None:
        details["upstream_code"] = code
    if kind is not None and kind != code:
        details["upstream_type"] = kind
    if param is not None:
        details["upstream_param"] = param
    codes = {code or "", kind or ""}
    where = f"HTTP {status}" if status is not None else "in the stream"
    native = error_obj.get("imagegen_bridge")
    if isinstance(native, Mapping):
        bridged = _bridged_error(native, details, where)
        if bridged is not None:
            bridged.upstream_request_id = _request_id(lowered)
            return bridged

    if codes & _SAFETY_CODES or "safety system" in message:
        result = BridgeError.safety_rejected(
            f"the upstream refused the request under its content policy ({where})", **details
        )
    elif codes & _QUOTA_CODES:
        details["quota_exhausted"] = True
        result = BridgeError(
            ErrorCode.RATE_LIMITED,
            f"the upstream account has no quota left ({where})",
            details=details,
            suggestions=("Check the API account's billing and usage limits.",),
        )
    elif status == 429 or "rate_limit_exceeded" in codes:
        wait = retry_after_ms(lowered, now)
        if wait is not None:
            details["retry_after_ms"] = wait
        result = BridgeError(
            ErrorCode.RATE_LIMITED,
            f"the upstream is rate limiting requests ({where})",
            retryable=True,
            details=details,
        )
    elif status == 401 or "invalid_api_key" in codes:
        result = BridgeError(
            ErrorCode.AUTHENTICATION,
            f"the upstream rejected the API key ({where})",
            details=details,
        )
    elif status == 403:
        result = BridgeError(
            ErrorCode.PERMISSION_DENIED,
            f"the upstream refused access for this key or organization ({where})",
            details=details,
        )
    elif codes & _MODEL_CODES:
        details["field"] = "routing.model"
        result = BridgeError(
            ErrorCode.UNSUPPORTED_CAPABILITY,
            f"the upstream does not serve the requested model ({where})",
            details=details,
        )
    elif status in (404, 405):
        result = BridgeError(
            ErrorCode.CONFIGURATION,
            f"the upstream does not serve this images route ({where}); check base_url and "
            "the instance's capabilities",
            details=details,
        )
    elif status == 413:
        result = BridgeError(
            ErrorCode.INPUT, "the request is too large for the upstream (HTTP 413)", details=details
        )
    elif status in (400, 415, 422) or (status is None and "invalid_request" in (kind or "")):
        unsupported = bool(codes & _UNSUPPORTED_CODES) or any(
            phrase in message for phrase in ("not supported", "unsupported", "unknown parameter")
        )
        if unsupported:
            if param is not None:
                details["field"] = param
            result = BridgeError(
                ErrorCode.UNSUPPORTED_CAPABILITY,
                f"the upstream does not support a parameter or value of this request ({where})",
                details=details,
            )
        else:
            result = BridgeError(
                ErrorCode.INVALID_REQUEST,
                f"the upstream rejected the request as invalid ({where})",
                details=details,
            )
    elif status == 408:
        result = BridgeError(
            ErrorCode.UPSTREAM,
            "the upstream timed out reading the request (HTTP 408)",
            retryable=True,
            details=details,
        )
    elif status is not None and 500 <= status <= 599:
        wait = retry_after_ms(lowered, now)
        if wait is not None:
            details["retry_after_ms"] = wait
        result = BridgeError(
            ErrorCode.UPSTREAM, f"the upstream failed ({where})", retryable=True, details=details
        )
    else:
        result = BridgeError(
            ErrorCode.UPSTREAM, f"the upstream reported a failure ({where})", details=details
        )
    result.upstream_request_id = _request_id(lowered)
    return result


_BRIDGED_DETAILS = frozenset(
    {
        "field",
        "outcome",
        "retry_after_ms",
        "quota_exhausted",
        "circuit_state",
        "retry_scope",
        "safety_category",
        "recovery",
        "retry_same_request",
        "safety_controls_relaxed",
        "moderation_stage",
        "moderation_categories",
    }
)


def _bridged_error(
    native: Mapping[str, Any], details: dict[str, Any], where: str
) -> BridgeError | None:
    """An upstream imagebridge's own error (``error.imagegen_bridge``), kept precise.

    Its code, retryability and safe details survive, so chained bridges agree: above all,
    an upstream ``outcome: unknown`` stays unknown here and is never retried or rerouted.
    """
    try:
        code = ErrorCode(str(native.get("code")))
    except ValueError:
        return None
    raw = native.get("details")
    upstream_details = raw if isinstance(raw, Mapping) else {}
    merged = dict(details)
    merged["upstream_code"] = code.value
    for key in _BRIDGED_DETAILS:
        value = upstream_details.get(key)
        if isinstance(value, bool | int | str) and len(str(value)) <= 128:
            merged[key] = value
        elif isinstance(value, list) and all(isinstance(v, str) for v in value[:16]):
            merged[key] = [v[:64] for v in value[:16]]
    if code is ErrorCode.SAFETY_REJECTED:
        error = BridgeError.safety_rejected(
            f"the upstream bridge refused the request under its content policy ({where})",
            **merged,
        )
    else:
        error = BridgeError(
            code,
            f"the upstream bridge reported {code.value} ({where})",
            retryable=native.get("retryable") is True,
            details=merged,
        )
    if merged.get("outcome") == "unknown":
        error.mark_unknown_outcome()
    return error


def classify_http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    secrets: Sequence[str] = (),
    now: float | None = None,
) -> BridgeError:
    """A non-2xx answer → :class:`BridgeError`.

    Content-policy codes (``moderation_blocked``, ``content_policy_violation``) →
    ``safety_rejected``; ``insufficient_quota`` → ``rate_limited`` (not retryable,
    ``quota_exhausted``); 429 → ``rate_limited`` (retryable, ``retry_after_ms`` from
    ``Retry-After``); 401 ``authentication``; 403 ``permission_denied``; an unknown model
    → ``unsupported_capability``; 404/405 ``configuration``; 413 ``input``; 400/415/422
    ``invalid_request``, or ``unsupported_capability`` when the body says a parameter or
    value is unsupported; 408 and 5xx ``upstream`` (retryable); anything else ``upstream``.
    Only the first :data:`MAX_ERROR_BODY_BYTES` of ``body`` are looked at.
    """
    return classify_upstream_error(
        _error_object(body), status=status, headers=headers, secrets=secrets, now=now
    )
