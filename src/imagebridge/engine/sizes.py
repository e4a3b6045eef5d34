"""Honest sizes: what the caller asked for against what the transport delivered.

The caller's ask is an explicit ``size`` (``WxH``) or, with ``size: auto``, the tier of
``resolution`` (1k, 2k, 4k by the longer edge). Whatever negotiation sent, the delivered
pixels are compared with that ask: a difference is a normalization and the warning
``provider_output_size_differed`` (never an error, in any compatibility mode), unless the
request's ``policies.size_mismatch`` is ``fail``: then it is a non-retryable error after
the call (which was billed). The outcome also feeds the per-transport size-match
statistics (:mod:`imagebridge.engine.size_stats`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from imagebridge.contract.enums import Resolution, SizeMismatchPolicy
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import GenerationParameters, parse_size, resolution_tier
from imagebridge.contract.response import Normalization

__all__ = [
    "SIZE_WARNING",
    "SizeAsk",
    "SizeReport",
    "size_ask",
    "size_mismatch_error",
    "size_report",
]

SIZE_WARNING = "provider_output_size_differed"


@dataclass(frozen=True, slots=True)
class SizeAsk:
    """What the caller asked for: an exact size, or only a tier."""

    tier: Resolution
    size: tuple[int, int] | None = None

    @property
    def text(self) -> str:
        if self.size is not None:
            return f"{self.size[0]}x{self.size[1]}"
        return self.tier.value

    def matches(self, width: int, height: int) -> bool:
        if self.size is not None:
            return (width, height) == self.size
        return resolution_tier(width, height) is self.tier


def size_ask(requested: GenerationParameters) -> SizeAsk | None:
    """The caller's size ask, or ``None`` when it left the size to the transport."""
    dims = parse_size(requested.size)
    if dims is not None:
        return SizeAsk(resolution_tier(*dims), dims)
    if requested.resolution is not None:
        return SizeAsk(requested.resolution)
    return None


@dataclass(slots=True)
class SizeReport:
    ask: SizeAsk
    delivered: list[tuple[int, int, int]]
    """``(index, width, height)`` of each delivered image."""
    normalizations: list[Normalization] = field(default_factory=list)

    @property
    def matched(self) -> bool:
        return all(self.ask.matches(width, height) for _, width, height in self.delivered)


def _delivered_text(ask: SizeAsk, width: int, height: int) -> str:
    if ask.size is not None:
        return f"{width}x{height}"
    return resolution_tier(width, height).value


def size_report(
    requested: GenerationParameters,
    effective_size: str,
    delivered: list[tuple[int, int, int]],
) -> SizeReport | None:
    """Compare ``delivered`` with the caller's ask (``None`` when nothing was asked).

    The original's own reconciliation already records ``parameters.size`` when the size
    negotiation sent is the size asked for; then only the warning is added here, so one
    fact is one normalization.
    """
    ask = size_ask(requested)
    if ask is None or not delivered:
        return None
    report = SizeReport(ask, delivered)
    if report.matched:
        return report
    covered = ask.size is not None and effective_size == ask.text
    if covered:
        return report
    field_name = "parameters.size" if ask.size is not None else "parameters.resolution"
    common = {_delivered_text(ask, w, h) for _, w, h in delivered}
    if len(common) == 1:
        report.normalizations.append(
            Normalization(
                field=field_name,
                requested=ask.text,
                effective=common.pop(),
                reason=SIZE_WARNING,
            )
        )
        return report
    suffix = "size" if ask.size is not None else "resolution"
    for index, width, height in delivered:
        if not ask.matches(width, height):
            report.normalizations.append(
                Normalization(
                    field=f"data[{index}].{suffix}",
                    requested=ask.text,
                    effective=_delivered_text(ask, width, height),
                    reason=SIZE_WARNING,
                )
            )
    return report


def size_mismatch_error(
    report: SizeReport, policy: SizeMismatchPolicy | None
) -> BridgeError | None:
    """The refusal ``policies.size_mismatch: fail`` asks for, or ``None``."""
    if policy is not SizeMismatchPolicy.FAIL or report.matched:
        return None
    delivered = sorted({f"{width}x{height}" for _, width, height in report.delivered})
    return BridgeError(
        ErrorCode.UNSUPPORTED_CAPABILITY,
        "the provider delivered another size than requested and policies.size_mismatch is "
        "fail; the upstream call was made (and billed)",
        details={
            "field": "parameters.size" if report.ask.size is not None else "parameters.resolution",
            "requested": report.ask.text,
            "delivered": delivered,
            "policy": "size_mismatch",
            "billed": True,
        },
        suggestions=[
            "Accept the delivered size (policies.size_mismatch: accept), route to a transport "
            "that honours this size (routing.prefer: honour_size), or ask for a size the "
            "transport delivers.",
        ],
    )
