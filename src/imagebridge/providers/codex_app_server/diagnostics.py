"""Content-safe counters describing what a turn emitted, for "no image" errors and logs.

Only item *types* and *statuses* (bounded, sanitised identifiers) and counts are kept —
never text, prompts, paths or image data.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TurnDiagnostics"]

_MAX_KEYS = 16
_SAFE = re.compile(r"[^A-Za-z0-9_/-]")


def _label(value: Any) -> str:
    if not isinstance(value, str):
        return "<none>"
    return _SAFE.sub("", value[:64]) or "<other>"


@dataclass(slots=True)
class TurnDiagnostics:
    notifications: int = 0
    completed_items: int = 0
    image_items: int = 0
    completed_image_items: int = 0
    failed_image_items: int = 0
    extra_image_items: int = 0
    error_notifications: int = 0
    terminal_item_count: int | None = None
    turn_status: str | None = None
    item_types: Counter[str] = field(default_factory=Counter)
    item_statuses: Counter[str] = field(default_factory=Counter)

    def count_item(self, item_type: Any, status: Any) -> None:
        _bounded_add(self.item_types, _label(item_type))
        if status is not None:
            _bounded_add(self.item_statuses, _label(status))

    def set_turn_status(self, status: Any) -> None:
        self.turn_status = _label(status)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "notifications": self.notifications,
            "completed_items": self.completed_items,
            "image_items": self.image_items,
            "completed_image_items": self.completed_image_items,
            "failed_image_items": self.failed_image_items,
            "item_types": dict(sorted(self.item_types.items())),
            "item_statuses": dict(sorted(self.item_statuses.items())),
        }
        if self.extra_image_items:
            data["extra_image_items"] = self.extra_image_items
        if self.error_notifications:
            data["error_notifications"] = self.error_notifications
        if self.terminal_item_count is not None:
            data["terminal_item_count"] = self.terminal_item_count
        if self.turn_status is not None:
            data["turn_status"] = self.turn_status
        return data


def _bounded_add(counter: Counter[str], key: str) -> None:
    if key in counter or len(counter) < _MAX_KEYS - 1:
        counter[key] += 1
    else:
        counter["<other>"] += 1
