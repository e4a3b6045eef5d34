"""Which pool accounts served a response, carried in process only.

The original's response names no upstream account and its strict clients refuse unknown
keys, so the account a success ran on travels as a private attribute of the
:class:`ImageResponse` (never serialized): ``{account: images it produced}``. The pool
transports mark it; the fan-out sums its chunks'; API-key usage reads it (docs/keys.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from imagebridge.contract.response import ImageResponse

__all__ = ["mark_served", "merge_served", "served_by"]


def mark_served(response: ImageResponse, account: str) -> None:
    """``response``'s images were all produced on ``account``."""
    response._served_by = {account: len(response.data)}


def served_by(response: ImageResponse) -> dict[str, int]:
    """``{account: images}`` of ``response``; empty when no pool account is known."""
    value = response._served_by
    if not isinstance(value, Mapping):
        return {}
    return {str(name): int(count) for name, count in value.items()}


def merge_served(target: ImageResponse, parts: Iterable[ImageResponse]) -> None:
    """``target`` (a merged response) was served by what ``parts`` were, summed."""
    merged: dict[str, int] = {}
    for part in parts:
        for name, count in served_by(part).items():
            merged[name] = merged.get(name, 0) + count
    if merged:
        target._served_by = merged
