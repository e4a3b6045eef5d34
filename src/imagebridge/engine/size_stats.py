"""Per-transport size-match statistics: which transport delivers the size it is asked for.

Every call with a size ask (an explicit ``size`` or a ``resolution`` tier) records, per
provider, model and tier, whether the transport's own output matched; the last ``window``
outcomes of each count. Diagnostics, ``providers capabilities`` and ``doctor`` show them,
and ``routing.prefer: honour_size`` routes by them. In memory, per process: a restart
measures afresh.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from imagebridge.contract.enums import Resolution

__all__ = ["DEFAULT_WINDOW", "MatchRate", "SizeMatchStats"]

DEFAULT_WINDOW = 50


@dataclass(frozen=True, slots=True)
class MatchRate:
    calls: int
    matched: int

    @property
    def rate(self) -> float:
        return self.matched / self.calls if self.calls else 0.0

    def to_dict(self) -> dict[str, int | float]:
        return {"calls": self.calls, "matched": self.matched, "rate": round(self.rate, 4)}


class SizeMatchStats:
    """The last ``window`` outcomes per (provider, model, tier)."""

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        if window < 1:
            raise ValueError("size-match window must be at least 1")
        self.window = window
        self._outcomes: dict[tuple[str, str, Resolution], deque[bool]] = {}

    def record(self, provider: str, model: str, tier: Resolution, matched: bool) -> None:
        key = (provider, model, tier)
        outcomes = self._outcomes.get(key)
        if outcomes is None:
            outcomes = self._outcomes[key] = deque(maxlen=self.window)
        outcomes.append(matched)

    def rate(self, provider: str, tier: Resolution, model: str | None = None) -> MatchRate | None:
        """The provider's measured rate for ``tier`` (all its models unless one is named)."""
        calls = matched = 0
        for (name, served, measured_tier), outcomes in self._outcomes.items():
            if name == provider and measured_tier is tier and model in (None, served):
                calls += len(outcomes)
                matched += sum(outcomes)
        return MatchRate(calls, matched) if calls else None

    def best(
        self, candidates: Iterable[str], tier: Resolution, model: str | None = None
    ) -> str | None:
        """The measured candidate with the best rate for ``tier`` (the earlier on ties),
        or ``None`` when none of them has been measured."""
        chosen: tuple[str, float] | None = None
        for name in candidates:
            measured = self.rate(name, tier, model)
            if measured is None:
                continue
            if chosen is None or measured.rate > chosen[1]:
                chosen = (name, measured.rate)
        return None if chosen is None else chosen[0]

    def snapshot(self) -> dict[str, dict[str, dict[str, dict[str, int | float]]]]:
        """``{provider: {model: {tier: {calls, matched, rate}}}}``, sorted by name."""
        result: dict[str, dict[str, dict[str, dict[str, int | float]]]] = {}
        for provider, model, tier in sorted(self._outcomes, key=lambda k: (k[0], k[1], k[2])):
            outcomes = self._outcomes[(provider, model, tier)]
            rate = MatchRate(len(outcomes), sum(outcomes))
            result.setdefault(provider, {}).setdefault(model, {})[tier.value] = rate.to_dict()
        return result
