"""Error classification: HTTP statuses, in-stream failure codes, transport failures."""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import httpx

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import CODEX_LOGIN_SUGGESTION
from imagebridge.providers.codex.wire._constants import (
    _CODE_DISALLOWED,
    _MAX_RETRY_AFTER_MS,
    _REQUEST_ID_HEADERS,
    _REQUEST_ID_PATTERN,
    _UPSTREAM_FAILURE,
    _USAGE_LIMIT_REACHED,
    MAX_ERROR_BODY_BYTES,
)
from imagebridge.providers.codex.wire._payload import _number
from imagebridge.providers.shared import upstream_message

_PLAN_MODEL_REFUSAL: Final = re.compile(
    r"model is not supported when using codex with a chatgpt account", re.IGNORECASE
)
_MODERATION_STAGES: Final = frozenset({"input", "output", "unknown"})
_MODERATION_CATEGORIES: Final = frozenset({"harassment", "self-harm", "sexual", "violence"})


def sanitize_upstream_code(raw: object) -> str:
    """First 64 characters, then only ``[A-Za-z0-9_-]`` kept; empty → default."""
    if not isinstance(raw, str):
        return _UPSTREAM_FAILURE
    return _CODE_DISALLOWED.sub("", raw[:64]) or _UPSTREAM_FAILURE


def classify_upstream_code(code: str) -> tuple[ErrorCode, bool]:
    """An upstream failure code → (native code, retryable), first matching rule wins.

    Matching is case-insensitive on substrings, except that ``rate`` and ``token`` must be
    whole words (``failed_to_generate`` is no rate limit, ``max_output_tokens`` no auth
    failure); ``usage_limit`` means an exhausted plan quota, ``not_included`` a plan
    without the feature, and ``content_filter`` a safety stop.
    """
    lowered = code.lower()
    words = set(re.split(r"[_\-\s.]+", lowered))
    if "usage_limit" in lowered or "usage-limit" in lowered:
        return ErrorCode.RATE_LIMITED, True
    if "auth" in lowered or "token" in words:
        return ErrorCode.AUTHENTICATION, False
    if any(word in lowered for word in ("permission", "entitlement", "forbidden", "not_included")):
        return ErrorCode.PERMISSION_DENIED, False
    if any(
        word in lowered for word in ("safety", "content_policy", "moderation", "content_filter")
    ):
        return ErrorCode.SAFETY_REJECTED, False
    if "rate" in words or "ratelimit" in lowered or "quota" in lowered or "too_many" in lowered:
        return ErrorCode.RATE_LIMITED, True
    if any(word in lowered for word in ("unsupported", "capability", "invalid_model")):
        return ErrorCode.UNSUPPORTED_CAPABILITY, False
    if "schema" in lowered or "protocol" in lowered:
        return ErrorCode.PROTOCOL, False
    if any(word in lowered for word in ("unavailable", "overloaded", "server_error")):
        return ErrorCode.UPSTREAM, True
    return ErrorCode.UPSTREAM, False


def stream_failure_error(
    payload: Mapping[str, Any], *, now: float | None = None, secrets: Sequence[str] = ()
) -> BridgeError:
    """A ``response.failed`` / ``response.incomplete`` / ``error`` event → :class:`BridgeError`.

    The code is ``error.code``, ``response.error.code`` or the top-level ``code``;
    when none is given, the error object's ``type`` (where the backend puts
    ``usage_limit_reached``) or an incomplete response's reason; else ``upstream_failure``.
    """
    kind = str(payload.get("type", "error"))[:64]
    response = payload.get("response")
    response_map: Mapping[str, Any] = response if isinstance(response, Mapping) else {}
    error_obj = _first_mapping(payload.get("error"), response_map.get("error"))
    error_type = error_obj.get("type")
    raw_code = _first_text(
        error_obj.get("code"),
        payload.get("code"),
        error_type if error_type != "error" else None,
        _incomplete_reason(response_map) if kind == "response.incomplete" else None,
    )
    upstream_code = _safe_code(raw_code, secrets) or _UPSTREAM_FAILURE
    details: dict[str, Any] = {"upstream_code": upstream_code, "event_type": kind}
    message = upstream_message(error_obj.get("message"), secrets=secrets)
    if message is not None:
        details["upstream_message"] = message
    return _coded_error(
        upstream_code,
        error_obj,
        {},
        now=time.time() if now is None else now,
        where="in-stream",
        details=details,
    )


def classify_http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes = b"",
    now: float | None = None,
    *,
    secrets: Sequence[str] = (),
    max_body_bytes: int = MAX_ERROR_BODY_BYTES,
) -> BridgeError:
    """A non-2xx answer → :class:`BridgeError` (with usage-limit handling).

    401 ``authentication`` · 403 ``permission_denied`` · 408 ``timeout`` · 413 ``input`` ·
    429 ``rate_limited`` (retryable) · 5xx ``upstream`` (retryable) · other statuses by the
    body's error code, else ``upstream``. A usage-limit answer (``usage_limit_reached``) is
    ``rate_limited`` with ``details.quota_exhausted = true``. ``retry_after_ms`` comes from
    the body's ``resets_at`` (epoch seconds), ``resets_in_seconds``, or ``Retry-After``.
    Only the first ``max_body_bytes`` (64 KiB) of ``body`` are looked at; what reaches
    the error from it is a sanitised code (one that echoes one of ``secrets`` — pass
    :meth:`CodexCredentials.secret_values` — becomes ``redacted``) and the upstream's own
    words, cleaned by :func:`upstream_message`, as ``details.upstream_message``.
    """
    clock = time.time() if now is None else now
    lowered = {str(key).lower(): str(value) for key, value in headers.items()}
    error_obj, raw_code = _error_body(body[:max_body_bytes])
    upstream_code = _safe_code(raw_code, secrets)
    details: dict[str, Any] = {"http_status": status}
    if upstream_code is not None:
        details["upstream_code"] = upstream_code
    message = upstream_message(error_message(error_obj), secrets=secrets)
    if message is not None:
        details["upstream_message"] = message
    request_id = _request_id(lowered)
    usage_limit = upstream_code is not None and _USAGE_LIMIT_REACHED in upstream_code.lower()
    if status == 401:
        error = BridgeError(
            ErrorCode.AUTHENTICATION,
            "The Codex backend rejected the ChatGPT login (HTTP 401).",
            details=details,
            suggestions=(CODEX_LOGIN_SUGGESTION,),
        )
    elif status == 403 and not usage_limit:
        error = BridgeError(
            ErrorCode.PERMISSION_DENIED,
            "The Codex backend refused this account (HTTP 403).",
            details=details,
        )
    elif status == 408:
        error = BridgeError(
            ErrorCode.TIMEOUT, "The Codex backend timed out (HTTP 408).", details=details
        )
    elif status == 413:
        error = BridgeError(
            ErrorCode.INPUT,
            "The request is too large for the Codex backend (HTTP 413).",
            details=details,
        )
    elif status == 429 or usage_limit:
        error = _rate_limited(
            f"HTTP {status}", usage_limit, error_obj, lowered, now=clock, details=details
        )
    elif 500 <= status <= 599:
        error = BridgeError(
            ErrorCode.UPSTREAM,
            f"The Codex backend failed (HTTP {status}).",
            retryable=True,
            details=details,
        )
    elif upstream_code is not None:
        error = _coded_error(
            upstream_code, error_obj, lowered, now=clock, where=f"HTTP {status}", details=details
        )
    else:
        error = BridgeError(
            ErrorCode.UPSTREAM,
            f"The Codex backend rejected the request (HTTP {status}).",
            details=details,
        )
    error.upstream_request_id = request_id
    return error


def is_plan_model_refusal(error: BridgeError) -> bool:
    """A 400 saying the carrier model is not available to this ChatGPT plan.

    The backend answers ``{"detail": "The 'gpt-5.5' model is not supported when using
    Codex with a ChatGPT account."}`` before any work runs, so trying another carrier
    model is safe. Nothing else counts: every other 400 stays a plain error.
    """
    message = error.details.get("upstream_message")
    return (
        error.details.get("http_status") == 400
        and isinstance(message, str)
        and _PLAN_MODEL_REFUSAL.search(message) is not None
    )


def transport_error(exc: BaseException, *, timed_out: bool | None = None) -> BridgeError:
    """A transport failure → :class:`BridgeError`; after dispatch the outcome is unknown.

    Connection failures (nothing was sent) stay retryable ``upstream``. Anything later —
    a read failure, a stall, a broken stream — may have generated and billed an image, so
    it is never retried (``outcome=unknown``). ``timeout`` if it timed out, else
    ``upstream``. The exception text is not kept (it may echo a URL or header).
    """
    if isinstance(exc, BridgeError):
        return exc
    if timed_out is None:
        is_timeout = isinstance(exc, httpx.TimeoutException | TimeoutError)
    else:
        is_timeout = timed_out
    kind = type(exc).__name__[:64]
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        code = ErrorCode.TIMEOUT if is_timeout else ErrorCode.UPSTREAM
        return BridgeError(
            code,
            "Could not connect to the Codex backend.",
            retryable=not is_timeout,
            details={"transport_error": kind, "stage": "connect"},
        )
    error = BridgeError(
        ErrorCode.TIMEOUT if is_timeout else ErrorCode.UPSTREAM,
        "The Codex backend timed out mid-request; the image may have been generated."
        if is_timeout
        else "The connection to the Codex backend failed mid-request; "
        "the image may have been generated.",
        details={"transport_error": kind, "stage": "stream"},
    )
    return error.mark_unknown_outcome()


def _coded_error(
    upstream_code: str,
    error_obj: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    now: float,
    where: str,
    details: dict[str, Any],
) -> BridgeError:
    code, retryable = classify_upstream_code(upstream_code)
    if code is ErrorCode.RATE_LIMITED:
        quota = "usage_limit" in upstream_code.lower()
        return _rate_limited(where, quota, error_obj, headers, now=now, details=details)
    if code is ErrorCode.SAFETY_REJECTED:
        return BridgeError.safety_rejected(
            f"The Codex backend rejected the request under its content policy ({where}).",
            **details,
            **_moderation_details(error_obj),
        )
    suggestions = (CODEX_LOGIN_SUGGESTION,) if code is ErrorCode.AUTHENTICATION else None
    return BridgeError(
        code,
        f"The Codex backend reported a failure ({where}): {upstream_code}.",
        retryable=retryable,
        details=details,
        suggestions=suggestions,
    )


def _rate_limited(
    where: str,
    quota_exhausted: bool,
    error_obj: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    now: float,
    details: dict[str, Any],
) -> BridgeError:
    resets_at = _epoch_seconds(error_obj.get("resets_at"))
    retry_after_ms: int | None = None
    if resets_at is not None:
        retry_after_ms = _clamp_ms((resets_at - now) * 1000)
    else:
        seconds = _number(error_obj.get("resets_in_seconds"))
        if seconds is not None:
            retry_after_ms = _clamp_ms(seconds * 1000)
            resets_at = int(now + seconds)
        else:
            retry_after_ms = _retry_after_header(headers, now)
    merged = dict(details)
    if quota_exhausted:
        merged["quota_exhausted"] = True
    if retry_after_ms is not None:
        merged["retry_after_ms"] = retry_after_ms
    if resets_at is not None:
        merged["resets_at"] = int(resets_at)
    message = (
        f"The ChatGPT plan's Codex usage limit is reached ({where})."
        if quota_exhausted
        else f"The Codex backend is rate limiting requests ({where})."
    )
    return BridgeError(ErrorCode.RATE_LIMITED, message, retryable=True, details=merged)


def _moderation_details(error_obj: Mapping[str, Any]) -> dict[str, Any]:
    raw = error_obj.get("moderation_details", error_obj.get("moderationDetails"))
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, Any] = {}
    stage = raw.get("stage", raw.get("moderation_stage"))
    if isinstance(stage, str) and stage.lower() in _MODERATION_STAGES:
        out["moderation_stage"] = stage.lower()
    categories = raw.get("categories", raw.get("moderation_categories"))
    names: list[str] = []
    if isinstance(categories, Mapping):
        categories = [key for key, flagged in categories.items() if flagged is True]
    if isinstance(categories, list):
        for entry in categories:
            name = entry.get("category") if isinstance(entry, Mapping) else entry
            if not isinstance(name, str):
                continue
            normalised = name.lower().replace("_", "-")
            if normalised in _MODERATION_CATEGORIES and normalised not in names:
                names.append(normalised)
    if names:
        out["moderation_categories"] = sorted(names)[:8]
    return out


def error_message(error_obj: Mapping[str, Any]) -> str | None:
    """The human text of an error object: ``message``, else FastAPI-style ``detail``."""
    for key in ("message", "detail"):
        value = error_obj.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _error_body(body: bytes) -> tuple[Mapping[str, Any], str | None]:
    """The error object of a JSON error body and its code (``code``, else ``type``)."""
    try:
        payload = json.loads(body) if body else None
    except (ValueError, RecursionError):
        payload = None
    if not isinstance(payload, Mapping):
        return {}, None
    inner = payload.get("error")
    if isinstance(inner, Mapping):
        return inner, _first_text(inner.get("code"), inner.get("type"), payload.get("code"))
    return payload, _first_text(payload.get("code"), payload.get("type"))


def _safe_code(raw: str | None, secrets: Sequence[str]) -> str | None:
    """The sanitised code, or ``redacted`` when it carries (part of) a credential."""
    if not raw:
        return None
    code = sanitize_upstream_code(raw)
    for secret in secrets:
        if not secret:
            continue
        if secret in raw or (len(code) >= 8 and code in _CODE_DISALLOWED.sub("", secret)):
            return "redacted"
    return code


def _first_mapping(*candidates: object) -> Mapping[str, Any]:
    for candidate in candidates:
        if isinstance(candidate, Mapping):
            return candidate
    return {}


def _first_text(*candidates: object) -> str | None:
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate
    return None


def _incomplete_reason(response: Mapping[str, Any]) -> str | None:
    details = response.get("incomplete_details")
    if isinstance(details, Mapping) and isinstance(details.get("reason"), str):
        return str(details["reason"])
    return None


def upstream_request_id(headers: Mapping[str, str]) -> str | None:
    """The backend's request id from an answer's headers, if it has a safe shape."""
    lowered = {str(key).lower(): str(value) for key, value in headers.items()}
    return _request_id(lowered)


def _request_id(headers: Mapping[str, str]) -> str | None:
    for name in _REQUEST_ID_HEADERS:
        value = headers.get(name, "").strip()
        if value and _REQUEST_ID_PATTERN.fullmatch(value):
            return value
    return None


def _epoch_seconds(value: object) -> float | None:
    """Epoch seconds from a number or an ISO-8601 string; ``None`` if unusable."""
    number = _number(value)
    if number is not None:
        return number
    if isinstance(value, str) and 0 < len(value) <= 64:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            return None
        return moment.timestamp()
    return None


def _retry_after_header(headers: Mapping[str, str], now: float) -> int | None:
    raw = headers.get("retry-after-ms", "").strip()
    if raw.isdigit() and len(raw) <= 12:
        return _clamp_ms(int(raw))
    raw = headers.get("retry-after", "").strip()
    if not raw or len(raw) > 64:
        return None
    if raw.isdigit():
        return _clamp_ms(int(raw) * 1000)
    try:
        moment = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return _clamp_ms((moment.timestamp() - now) * 1000)


def _clamp_ms(value: float) -> int:
    return int(min(max(math.ceil(value), 0), _MAX_RETRY_AFTER_MS))
