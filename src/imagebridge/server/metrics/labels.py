"""Bounded label values: a name gets its own series until a configured number of names
have one; every later name shares one ``(other)`` series.

Prometheus keeps one time series per label combination, so a label fed from data the
bridge does not configure (API key names, model names a caller sends) needs a ceiling. The
first names seen keep their series for the life of the process; the ceiling is a config
value (``server.metrics.max_key_labels``, ``max_model_labels``). The markers below are
never a key, account or model name (those have no parentheses), so a query can tell them
apart from a real name.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT", "NONE", "OTHER", "LabelBudget"]

NONE: Final = "(none)"
"""No such thing: no API key, no pool account, no model asked for."""
DEFAULT: Final = "(default)"
"""The provider's default model: a failure of a request that named none."""
OTHER: Final = "(other)"
"""A name past the budget."""


class LabelBudget:
    """At most ``limit`` distinct values keep their own label; the rest are ``(other)``."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self._admitted: set[str] = set()

    def label(self, value: str | None) -> str:
        if value is None:
            return NONE
        if value in self._admitted:
            return value
        if len(self._admitted) < self.limit:
            self._admitted.add(value)
            return value
        return OTHER

    @property
    def admitted(self) -> int:
        return len(self._admitted)
