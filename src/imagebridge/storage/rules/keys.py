"""API-key rules: secrets and their hashes, names and limits, calendar quota windows.

A key's secret is ``ibk_`` followed by 43 URL-safe characters (32 random bytes); the store
keeps its SHA-256 only, plus a short prefix (``ibk_`` and the first 8 characters) to show
people which key is which. 32 random bytes make a slow password hash pointless: nobody can
guess such a secret from its SHA-256, so one fast indexed lookup per request is safe.

Quota windows are calendar periods in one configured time zone (day from midnight, week
from Monday midnight, month from the 1st), not rolling windows: "10 images a day" then
means what people expect, the reset a refused caller is told (``Retry-After``) is one fixed
instant, and each window is one counter and its period start in the key's row, so a
reservation is one conditional ``UPDATE`` — a rolling window would need a row per image and
a sum over them.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.keys import KEY_LIMIT_FIELDS, KEY_WINDOWS
from imagebridge.storage.records import KeyLimits
from imagebridge.storage.rules.values import (
    MAX_INTEGER,
    bounded_int,
    check_timestamp,
    valid_identifier,
)

__all__ = [
    "KEY_FIELDS",
    "KEY_PREFIX",
    "MAX_KEY_NAME_BYTES",
    "MAX_KEY_PROVIDERS",
    "WINDOWS",
    "KeyLimits",
    "Windows",
    "check_key_id",
    "check_key_limits",
    "check_key_name",
    "check_usage_counts",
    "display_prefix",
    "dump_providers",
    "hash_secret",
    "key_not_found",
    "load_providers",
    "looks_like_key",
    "mint_key_id",
    "mint_secret",
    "now_or",
    "windows_at",
    "zone",
]

KEY_PREFIX = "ibk_"
"""Every key secret starts with this, so it is recognisable in a config file or a leak."""
_SECRET_BYTES = 32
_SECRET_CHARS = 43  # base64url of 32 bytes, unpadded
_PREFIX_CHARS = len(KEY_PREFIX) + 8
MAX_KEY_NAME_BYTES = 64
MAX_KEY_PROVIDERS = 32
_MAX_PROVIDER_BYTES = 64
WINDOWS = KEY_WINDOWS
"""The quota windows, in order (the contract's names)."""
KEY_FIELDS = KEY_LIMIT_FIELDS
"""The fields a key's creation or update may set (``None`` clears one)."""


def mint_secret() -> str:
    """A new secret: the recognisable prefix plus 32 random bytes (printed once)."""
    return KEY_PREFIX + secrets.token_urlsafe(_SECRET_BYTES)


def looks_like_key(value: str) -> bool:
    """Whether ``value`` has a key secret's shape (cheap, before any lookup)."""
    return (
        value.startswith(KEY_PREFIX)
        and len(value) == len(KEY_PREFIX) + _SECRET_CHARS
        and value.isascii()
    )


def hash_secret(secret: str) -> str:
    """The stored form of a secret: SHA-256 hex of its UTF-8 bytes."""
    return hashlib.sha256(secret.encode()).hexdigest()


def display_prefix(secret: str) -> str:
    """What logs, listings and diagnostics may show of a secret."""
    return secret[:_PREFIX_CHARS]


def mint_key_id() -> str:
    return "key_" + secrets.token_hex(8)


def now_or(now: int | None) -> int:
    stamp = int(time.time()) if now is None else now
    check_timestamp(stamp)
    return stamp


def key_not_found() -> BridgeError:
    """A missing key (also another store's or a malformed id): one 404 for all."""
    return BridgeError(
        ErrorCode.INVALID_REQUEST, "API key was not found", details={"resource": "key"}
    )


def check_key_id(value: object) -> str:
    if not isinstance(value, str) or not valid_identifier(value, 64):
        raise key_not_found()
    return value


def check_key_name(value: object) -> str:
    """1–64 bytes of letters, digits, ``.``, ``_``, ``-`` (it labels metrics and files)."""
    if (
        not isinstance(value, str)
        or not valid_identifier(value, MAX_KEY_NAME_BYTES)
        or not all(c.isascii() and (c.isalnum() or c in "._-") for c in value)
    ):
        raise BridgeError.invalid_request(
            "key name must be 1 to 64 letters, digits, '.', '_' or '-'", field="name"
        )
    return value


def _limit(value: object, field: str, *, minimum: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= 2**31:
        raise BridgeError.invalid_request(
            f"{field} must be an integer from {minimum} to {2**31}", field=field
        )
    return value


def _providers(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or not 1 <= len(value) <= MAX_KEY_PROVIDERS
        or not all(isinstance(v, str) and valid_identifier(v, _MAX_PROVIDER_BYTES) for v in value)
    ):
        raise BridgeError.invalid_request(
            f"providers must be a list of 1 to {MAX_KEY_PROVIDERS} provider names",
            field="providers",
        )
    return tuple(dict.fromkeys(value))


def check_key_limits(values: Mapping[str, Any], base: KeyLimits | None = None) -> KeyLimits:
    """``base`` with ``values`` applied; unknown fields and bad values are refused."""
    unknown = sorted(set(values) - set(KEY_FIELDS))
    if unknown:
        raise BridgeError.invalid_request(f"unknown key field: {unknown[0]}", field=unknown[0])
    current = base or KeyLimits()
    merged = {name: getattr(current, name) for name in KEY_FIELDS}
    merged.update(values)
    expires = merged["expires_at"]
    if expires is not None and bounded_int(expires, 0, MAX_INTEGER) is None:
        raise BridgeError.invalid_request(
            f"expires_at must be a Unix time from 0 to {MAX_INTEGER}", field="expires_at"
        )
    return KeyLimits(
        images_per_day=_limit(merged["images_per_day"], "images_per_day", minimum=0),
        images_per_week=_limit(merged["images_per_week"], "images_per_week", minimum=0),
        images_per_month=_limit(merged["images_per_month"], "images_per_month", minimum=0),
        max_concurrent=_limit(merged["max_concurrent"], "max_concurrent", minimum=1),
        providers=_providers(merged["providers"]),
        expires_at=expires,
    )


def dump_providers(providers: tuple[str, ...] | None) -> str | None:
    return None if providers is None else json.dumps(list(providers))


def load_providers(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    value = json.loads(text)
    return tuple(str(v) for v in value) if isinstance(value, list) else None


def check_usage_counts(*counts: int) -> None:
    for count in counts:
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_INTEGER:
            raise BridgeError(ErrorCode.INTERNAL, "usage count is out of range")


def zone(name: str) -> ZoneInfo:
    """The quota time zone, or a ``configuration`` error naming the key."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "unknown quota time zone",
            details={"field": "server.keys.time_zone"},
        ) from None


@dataclass(frozen=True, slots=True)
class Windows:
    """The current calendar periods at one instant: each window's start and next reset."""

    now: int
    day: int
    week: int
    month: int
    day_end: int
    week_end: int
    month_end: int
    date: str
    """The local calendar date (``YYYY-MM-DD``): the day usage is counted under."""

    def start(self, window: str) -> int:
        value: int = getattr(self, window)
        return value

    def end(self, window: str) -> int:
        value: int = getattr(self, f"{window}_end")
        return value

    def params(self) -> dict[str, int]:
        return {"day": self.day, "week": self.week, "month": self.month}


def _midnight(day: datetime, tz: ZoneInfo) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp())


def windows_at(now: int, tz: ZoneInfo) -> Windows:
    """The day, week (from Monday) and month periods containing ``now`` in ``tz``."""
    local = datetime.fromtimestamp(now, tz)
    today = local.date()
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    next_first = (first + timedelta(days=32)).replace(day=1)

    def at(day: Any) -> int:
        return _midnight(datetime(day.year, day.month, day.day), tz)

    return Windows(
        now=now,
        day=at(today),
        week=at(monday),
        month=at(first),
        day_end=at(today + timedelta(days=1)),
        week_end=at(monday + timedelta(days=7)),
        month_end=at(next_first),
        date=today.isoformat(),
    )
