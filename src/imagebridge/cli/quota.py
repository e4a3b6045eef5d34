"""Provider quota for ``providers quota`` and ``doctor``: plan windows, never identities.

A provider that knows its plan's usage (the Codex transports read ``wham/usage``) exposes
an ``async def diagnostics() -> dict`` hook; the fan-out decorator wraps it, so the hook is
looked for on the provider and then down its ``inner`` chain. The same hook feeds
``GET /v1/diagnostics/extended`` (``providers_detail``), which is what ``--remote`` reads.

Whatever the source, a reading is reduced to an allow-list of fields (plan type, window
names, used percent, window length, reset time, an error's code and message), so a token,
an account id or an e-mail address can never reach the terminal, even from a provider or
a bridge that put one in its diagnostics. A quota that cannot be read is a warning entry,
never an exception. With an account pool, each account is listed too (``accounts``: ready
or why not, image windows with resets, breaker state, calls and failures over 24 hours),
through an allow-list of its own; its login shows only as a short hash.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from imagebridge.contract.errors import BridgeError
from imagebridge.engine.provider import diagnostics_owner

if TYPE_CHECKING:
    from imagebridge.engine.provider import Provider

__all__ = [
    "QUOTA_TIMEOUT_S",
    "QuotaReading",
    "read_quota",
    "reading_from_detail",
]

QUOTA_TIMEOUT_S = 10.0
"""One provider's quota read (including a ``--refresh``), at most."""
MAX_WINDOWS = 16
MAX_TEXT_CHARS = 300
QuotaState = Literal["available", "unavailable", "not_reported"]
_QUOTA_FIELDS = (
    "plan_type",
    "limit_reached",
    "exhausted",
    "image_limit_exhausted",
    "source",
    "observed_at",
)
_WINDOW_FIELDS = ("name", "limit", "label", "used_percent", "window_minutes", "resets_at")
_POOL_FIELDS = ("policy", "min_remaining_percent", "ready")
_ACCOUNT_FIELDS = (
    "name",
    "login",
    "ready",
    "reason",
    "ready_at",
    "weight",
    "in_flight",
    "max_concurrent",
    "calls_24h",
    "failures_24h",
    "last_error",
)
_ACCOUNT_QUOTA_FIELDS = ("plan_type", "image_remaining_percent", "source", "observed_at")
_BREAKER_FIELDS = ("state", "consecutive_failures", "retry_after_ms")
MAX_ACCOUNTS = 64
_SHORT_HASH_CHARS = len("sha256:") + 12
_HOOK_FAILURES = {
    "timeout": ("timeout", "the provider did not report its quota in time"),
    "error": ("internal", "the provider's quota could not be read"),
}


@dataclass(frozen=True, slots=True)
class QuotaReading:
    """One provider's quota as ``providers quota`` prints it."""

    provider: str
    status: QuotaState
    quota: dict[str, Any] | None = None
    warning: dict[str, str] | None = None
    accounts: dict[str, Any] | None = None
    """The account pool, when the provider draws from one."""

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"provider": self.provider, "status": self.status}
        if self.status == "not_reported":
            body["message"] = f"{self.provider} does not report quota"
        if self.quota is not None:
            body["quota"] = self.quota
        if self.warning is not None:
            body["warning"] = self.warning
        if self.accounts is not None:
            body["accounts"] = self.accounts
        return body


async def read_quota(
    provider: Provider, *, refresh: bool = False, timeout_s: float = QUOTA_TIMEOUT_S
) -> QuotaReading:
    """Read one provider's quota through its hook; never raises.

    ``refresh`` first asks the provider's quota client for a new reading, bypassing its
    cache, when the client supports it (``quota.get(force=True)``). When that fails, the
    reading is ``unavailable`` with the refresh's error and the last reading, if any.
    """
    name = provider.name
    owner = diagnostics_owner(provider)
    if owner is None:
        return QuotaReading(name, "not_reported")
    try:
        async with asyncio.timeout(timeout_s):
            failed = await _force_refresh(owner) if refresh else None
            detail = await owner.diagnostics()
    except BridgeError as error:
        return _warning(name, error.code.value, error.message)
    except TimeoutError:
        return _warning(name, *_HOOK_FAILURES["timeout"])
    except Exception:  # a diagnostics hook must never break the command
        return _warning(name, *_HOOK_FAILURES["error"])
    reading = reading_from_detail(name, detail)
    if failed is None:
        return reading
    return QuotaReading(
        name,
        "unavailable",
        reading.quota,
        _warning_body(failed.code.value, failed.message),
        reading.accounts,
    )


async def _force_refresh(owner: object) -> BridgeError | None:
    """Ask the owner for new readings (every account's, with a pool); the error if that
    failed."""
    refresh = getattr(owner, "refresh_quota", None)
    if callable(refresh):
        failed = await refresh()
        return failed if isinstance(failed, BridgeError) else None
    client = getattr(owner, "quota", None)
    get = getattr(client, "get", None)
    if not callable(get):
        return None
    try:
        await get(force=True)
    except BridgeError as error:
        return error
    return None


def reading_from_detail(name: str, detail: object) -> QuotaReading:
    """A reading from a ``diagnostics()`` answer (or a ``providers_detail`` entry).

    ``{"quota": {"status": …, windows…, "error"?}}`` is a quota; the server's
    ``{"status": "unavailable", "reason": …}`` (its hook failed) is a warning; anything
    else (no detail, or extras that are not a quota) means the provider reports none.
    """
    if not isinstance(detail, Mapping):
        return QuotaReading(name, "not_reported")
    reading = _reading(name, detail)
    pool = detail.get("accounts")
    if not isinstance(pool, Mapping):
        return reading
    return QuotaReading(
        reading.provider, reading.status, reading.quota, reading.warning, _clean_pool(pool)
    )


def _reading(name: str, detail: Mapping[str, Any]) -> QuotaReading:
    quota = detail.get("quota")
    if not isinstance(quota, Mapping):
        reason = detail.get("reason")
        if detail.get("status") == "unavailable" and isinstance(reason, str):
            return _warning(name, *_HOOK_FAILURES.get(reason, _HOOK_FAILURES["error"]))
        return QuotaReading(name, "not_reported")
    cleaned = _clean_quota(quota)
    if quota.get("status") == "available":
        return QuotaReading(name, "available", cleaned)
    error = quota.get("error")
    code, message = "upstream", "the quota could not be read"
    if isinstance(error, Mapping):
        code = _text(error.get("code")) or code
        message = _text(error.get("message")) or message
    last = cleaned if "windows" in quota else None  # the latest reading, however old
    return QuotaReading(name, "unavailable", last, _warning_body(code, message))


def _warning(name: str, code: str, message: str) -> QuotaReading:
    return QuotaReading(name, "unavailable", None, _warning_body(code, message))


def _warning_body(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": _text(message) or ""}


def _clean_pool(raw: Mapping[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {key: _scalar(raw[key]) for key in _POOL_FIELDS if key in raw}
    accounts = raw.get("accounts")
    cleaned["accounts"] = [
        _clean_account(account)
        for account in (accounts if isinstance(accounts, list) else [])[:MAX_ACCOUNTS]
        if isinstance(account, Mapping)
    ]
    return cleaned


def _clean_account(raw: Mapping[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {key: _scalar(raw[key]) for key in _ACCOUNT_FIELDS if key in raw}
    login_id = raw.get("login_id")
    if isinstance(login_id, str) and login_id.startswith("sha256:"):
        cleaned["login_id"] = login_id[:_SHORT_HASH_CHARS]  # a short hash, never more
    breaker = raw.get("breaker")
    if isinstance(breaker, Mapping):
        cleaned["breaker"] = {k: _scalar(breaker[k]) for k in _BREAKER_FIELDS if k in breaker}
    quota = raw.get("quota")
    if isinstance(quota, Mapping):
        kept: dict[str, Any] = {k: _scalar(quota[k]) for k in _ACCOUNT_QUOTA_FIELDS if k in quota}
        windows = quota.get("image_windows")
        if isinstance(windows, list):
            kept["image_windows"] = _clean_windows(windows)
        cleaned["quota"] = kept
    return cleaned


def _clean_quota(raw: Mapping[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {key: _scalar(raw[key]) for key in _QUOTA_FIELDS if key in raw}
    windows = raw.get("windows")
    if isinstance(windows, list):
        cleaned["windows"] = _clean_windows(windows)
    return cleaned


def _clean_windows(windows: list[Any]) -> list[dict[str, Any]]:
    return [
        {key: _scalar(window[key]) for key in _WINDOW_FIELDS if key in window}
        for window in windows[:MAX_WINDOWS]
        if isinstance(window, Mapping)
    ]


def _scalar(value: object) -> str | int | float | bool | None:
    """A bounded JSON scalar; anything else (objects, lists, NaN) becomes ``None``."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return _text(value)


def _text(value: object) -> str | None:
    return value[:MAX_TEXT_CHARS] if isinstance(value, str) else None
