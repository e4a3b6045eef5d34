"""Plan usage windows from ``x-codex-*`` headers and ``wham/usage`` answers."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.wire._constants import (
    _PLAN_TYPE_PATTERN,
    _WINDOW_NAME_PATTERN,
)
from imagebridge.providers.codex.wire._payload import _number

TEXT_LIMIT: Final = "codex"
IMAGE_LIMIT: Final = "image_gen"


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """One usage window: how full it is, how long it is, when it resets (epoch seconds).

    ``name`` is where the backend put it (``primary``, ``image_gen.secondary`` …); that
    position says nothing about its length (team plans put the 7-day window first), so
    :attr:`label` names it by its duration instead. ``limit`` is the limit it belongs to:
    ``codex`` (text) or another id such as ``image_gen``, the separate image quota.
    """

    name: str
    used_percent: float
    window_minutes: int | None = None
    resets_at: int | None = None
    limit: str = TEXT_LIMIT

    @property
    def label(self) -> str | None:
        """``5h``, ``7d``, ``90m`` … from the window length; ``None`` when unknown."""
        minutes = self.window_minutes
        if minutes is None or minutes <= 0:
            return None
        if minutes % 1440 == 0:
            return f"{minutes // 1440}d"
        if minutes % 60 == 0:
            return f"{minutes // 60}h"
        return f"{minutes}m"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "limit": self.limit,
            "label": self.label,
            "used_percent": self.used_percent,
            "window_minutes": self.window_minutes,
            "resets_at": self.resets_at,
        }


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    """The plan's usage windows at one moment. Never holds account ids or emails."""

    windows: tuple[QuotaWindow, ...]
    plan_type: str | None = None
    limit_reached: bool | None = None
    source: Literal["usage_endpoint", "headers"] = "usage_endpoint"
    observed_at: float = 0.0

    def window(self, name: str) -> QuotaWindow | None:
        return next((window for window in self.windows if window.name == name), None)

    @property
    def exhausted(self) -> bool:
        """The backend says the limit is reached, or a window is full."""
        return self.limit_reached is True or any(w.used_percent >= 100 for w in self.windows)

    def merged_with(self, newer: QuotaSnapshot) -> QuotaSnapshot:
        """``newer``'s windows and fields over this snapshot's (by window name)."""
        names = {window.name for window in newer.windows}
        kept = tuple(window for window in self.windows if window.name not in names)
        return QuotaSnapshot(
            windows=tuple(sorted((*kept, *newer.windows), key=_window_order)),
            plan_type=newer.plan_type if newer.plan_type is not None else self.plan_type,
            limit_reached=(
                newer.limit_reached if newer.limit_reached is not None else self.limit_reached
            ),
            source=newer.source,
            observed_at=max(self.observed_at, newer.observed_at),
        )

    @property
    def image_limit_exhausted(self) -> bool | None:
        """Whether the separate image quota is full; ``None`` when it was not reported."""
        image = [window for window in self.windows if window.limit == IMAGE_LIMIT]
        if not image:
            return None
        return any(window.used_percent >= 100 for window in image)

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_type": self.plan_type,
            "limit_reached": self.limit_reached,
            "exhausted": self.exhausted,
            "image_limit_exhausted": self.image_limit_exhausted,
            "source": self.source,
            "observed_at": self.observed_at,
            "windows": [window.to_dict() for window in self.windows],
        }


def _window_order(window: QuotaWindow) -> tuple[int, str, int, str]:
    """Text limit first, then other limits by id; inside one, shortest window first."""
    first = 0 if window.limit == TEXT_LIMIT else 1
    minutes = window.window_minutes
    if minutes is None:  # unknown length: keep the backend's own order
        minutes = 0 if window.name.endswith("primary") else 1
    return first, window.limit, minutes, window.name


_HEADER_WINDOW: Final = re.compile(r"x-([a-z0-9-]{1,48}?)-(primary|secondary)-used-percent")
_MAX_WINDOWS: Final = 16


def parse_rate_limit_headers(
    headers: Mapping[str, str], *, now: float | None = None
) -> QuotaSnapshot | None:
    """``x-codex-{primary,secondary}-*`` (and ``x-image-gen-*``) headers → snapshot, if any."""
    clock = time.time() if now is None else now
    lowered = {str(key).lower(): str(value) for key, value in headers.items()}
    windows: list[QuotaWindow] = []
    for header in sorted(lowered):
        match = _HEADER_WINDOW.fullmatch(header)
        if match is None:
            continue
        limit_prefix, which = match.groups()
        used = _header_number(lowered[header])
        if used is None:
            continue
        base = f"x-{limit_prefix}-{which}-"
        minutes = _header_number(lowered.get(f"{base}window-minutes"))
        resets_at = _header_number(lowered.get(f"{base}reset-at"))
        if resets_at is None:
            after = _header_number(lowered.get(f"{base}reset-after-seconds"))
            resets_at = None if after is None else clock + after
        limit = limit_prefix.replace("-", "_")
        windows.append(
            QuotaWindow(
                name=which if limit == TEXT_LIMIT else f"{limit}.{which}",
                used_percent=_percent(used),
                window_minutes=None if minutes is None else int(minutes),
                resets_at=None if resets_at is None else int(resets_at),
                limit=limit,
            )
        )
        if len(windows) >= _MAX_WINDOWS:
            break
    if not windows:
        return None
    return QuotaSnapshot(
        windows=tuple(sorted(windows, key=_window_order)),
        plan_type=_plan_type(lowered.get("x-codex-plan-type")),
        source="headers",
        observed_at=clock,
    )


def parse_usage_payload(payload: object, *, now: float | None = None) -> QuotaSnapshot:
    """A ``GET wham/usage`` body → snapshot; only whitelisted, non-identifying fields are read."""
    clock = time.time() if now is None else now
    if not isinstance(payload, Mapping):
        raise BridgeError(ErrorCode.PROTOCOL, "The Codex usage response is not a JSON object.")
    windows: list[QuotaWindow] = []
    rate_limit = payload.get("rate_limit")
    limit_reached: bool | None = None
    if isinstance(rate_limit, Mapping):
        windows.extend(_usage_windows(rate_limit, TEXT_LIMIT, clock))
        if isinstance(rate_limit.get("limit_reached"), bool):
            limit_reached = bool(rate_limit["limit_reached"])
    extra = payload.get("additional_rate_limits")
    if isinstance(extra, list):
        for entry in extra[:_MAX_WINDOWS]:
            if not isinstance(entry, Mapping):
                continue
            name = entry.get("limit_name", entry.get("metered_feature"))
            inner = entry.get("rate_limit")
            if (
                isinstance(name, str)
                and isinstance(inner, Mapping)
                and _WINDOW_NAME_PATTERN.fullmatch(name.lower())
            ):
                windows.extend(_usage_windows(inner, name.lower(), clock))
    return QuotaSnapshot(
        windows=tuple(sorted(windows[:_MAX_WINDOWS], key=_window_order)),
        plan_type=_plan_type(payload.get("plan_type")),
        limit_reached=limit_reached,
        source="usage_endpoint",
        observed_at=clock,
    )


def _usage_windows(rate_limit: Mapping[str, Any], limit: str, now: float) -> list[QuotaWindow]:
    prefix = "" if limit == TEXT_LIMIT else f"{limit}."
    windows: list[QuotaWindow] = []
    for which in ("primary", "secondary"):
        raw = rate_limit.get(f"{which}_window")
        if not isinstance(raw, Mapping):
            continue
        used = _number(raw.get("used_percent"))
        if used is None:
            continue
        seconds = _number(raw.get("limit_window_seconds"))
        resets_at = _number(raw.get("reset_at"))
        if resets_at is None:
            after = _number(raw.get("reset_after_seconds"))
            resets_at = None if after is None else now + after
        windows.append(
            QuotaWindow(
                name=f"{prefix}{which}",
                used_percent=_percent(used),
                window_minutes=None if seconds is None else int(seconds // 60),
                resets_at=None if resets_at is None else int(resets_at),
                limit=limit,
            )
        )
    return windows


def _header_number(raw: str | None) -> float | None:
    if raw is None or len(raw) > 32:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _percent(value: float) -> float:
    return round(min(max(value, 0.0), 100.0), 3)


def _plan_type(raw: object) -> str | None:
    """A plan name like ``plus`` — only a short lowercase token, so nothing identifying."""
    if not isinstance(raw, str):
        return None
    value = raw.strip().lower()
    return value if _PLAN_TYPE_PATTERN.fullmatch(value) else None
