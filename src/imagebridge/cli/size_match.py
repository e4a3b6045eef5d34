"""Size-match rates as the CLI shows them (``providers capabilities --size-match``,
``doctor``): read from a running bridge's ``/v1/diagnostics/extended``, where they are
measured (docs/providers.md, "What you asked, what you got")."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["provider_rates", "size_match_check"]

Rates = dict[str, dict[str, dict[str, Any]]]
CheckStatus = Literal["pass", "warn", "skip"]


def all_rates(diagnostics: dict[str, Any]) -> dict[str, Rates]:
    """``runtime.size_match`` of an extended diagnostics body (``{}`` when absent)."""
    runtime = diagnostics.get("runtime")
    rates = runtime.get("size_match") if isinstance(runtime, dict) else None
    return rates if isinstance(rates, dict) else {}


def provider_rates(diagnostics: dict[str, Any], provider: str) -> Rates:
    """One provider's ``{model: {tier: {calls, matched, rate}}}``."""
    rates = all_rates(diagnostics).get(provider)
    return rates if isinstance(rates, dict) else {}


def size_match_check(
    diagnostics: dict[str, Any],
) -> tuple[CheckStatus, str, dict[str, Rates]]:
    """``(status, message, rates)`` for doctor: ``skip`` with nothing measured, ``pass``
    when every measured transport delivered every size asked, else ``warn`` naming the
    transport, model and tier with the lowest rate."""
    rates = all_rates(diagnostics)
    worst: tuple[float, str, int, int] | None = None
    for provider, models in sorted(rates.items()):
        for model, tiers in sorted(models.items()):
            for tier, entry in sorted(tiers.items()):
                calls, matched = int(entry.get("calls", 0)), int(entry.get("matched", 0))
                rate = matched / calls if calls else 1.0
                if worst is None or rate < worst[0]:
                    worst = (rate, f"{provider} ({model}, {tier})", matched, calls)
    if worst is None:
        return "skip", "no call with a size ask measured yet", rates
    if worst[0] >= 1.0:
        return "pass", "every measured transport delivered the sizes asked", rates
    _, where, matched, calls = worst
    return "warn", f"{where} delivered the size asked in {matched} of {calls} calls", rates
