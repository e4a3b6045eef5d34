"""Token usage one call reports, and its sum over calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts one call reported; absent counts stay ``None``."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None

    @classmethod
    def parse(cls, raw: object) -> TokenUsage | None:
        if not isinstance(raw, Mapping):
            return None
        values = {
            name: value
            for name in ("input_tokens", "output_tokens", "total_tokens")
            if (value := _count(raw.get(name))) is not None
        }
        return cls(**values) if values else None

    def plus(self, other: TokenUsage | None) -> TokenUsage:
        """Sum with another call's usage (a count known on either side is kept)."""
        if other is None:
            return self

        def add(left: int | None, right: int | None) -> int | None:
            if left is None:
                return right
            return left if right is None else left + right

        return TokenUsage(
            add(self.input_tokens, other.input_tokens),
            add(self.output_tokens, other.output_tokens),
            add(self.total_tokens, other.total_tokens),
        )

    def to_dict(self) -> dict[str, int]:
        """Only the known counts (``{}`` when none, as the original reports it)."""
        return {
            name: value
            for name in ("input_tokens", "output_tokens", "total_tokens")
            if (value := getattr(self, name)) is not None
        }


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        return None
    return value
