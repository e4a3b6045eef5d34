"""A histogram kept as plain numbers, with the original's buckets and ``le`` spelling."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

__all__ = ["BUCKETS_SECONDS", "Histogram"]

BUCKETS_SECONDS: Final[tuple[float, ...]] = (
    0.1,
    0.5,
    1,
    5,
    10,
    30,
    60,
    120,
    180,
    300,
    600,
    1800,
)
"""The original's buckets (seconds); ``le`` is printed with three decimals."""


@dataclass(slots=True)
class Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS_SECONDS))
    total: int = 0
    sum_seconds: float = 0.0

    def observe(self, seconds: float) -> None:
        for index, bound in enumerate(BUCKETS_SECONDS):
            if seconds <= bound:
                self.counts[index] += 1
                break
        self.total += 1
        self.sum_seconds += seconds

    def copy(self) -> Histogram:
        return Histogram(list(self.counts), self.total, self.sum_seconds)

    def buckets(self) -> list[tuple[str, float]]:
        cumulative = 0
        out: list[tuple[str, float]] = []
        for bound, count in zip(BUCKETS_SECONDS, self.counts, strict=True):
            cumulative += count
            out.append((f"{bound:.3f}", float(cumulative)))
        out.append(("+Inf", float(self.total)))
        return out
