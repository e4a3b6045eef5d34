"""Schema rules both backends' migration machinery follows.

Migrations are numbered 1..n, a database a newer bridge migrated is refused, and only plain
identifiers are ever put into SQL text unquoted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["check_migration_numbers", "check_not_newer", "is_plain_identifier"]

_PLAIN_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


def is_plain_identifier(name: str) -> bool:
    """Whether ``name`` may be put into SQL text unquoted (table, column, component)."""
    return _PLAIN_IDENTIFIER.fullmatch(name) is not None


def check_migration_numbers(versions: Sequence[int]) -> None:
    """A schema's migrations are numbered 1..n in order, so its version is their count."""
    if list(versions) != list(range(1, len(versions) + 1)):
        raise ValueError("migrations must be numbered 1..n in order")


def check_not_newer(
    recorded: Iterable[int], current_version: int, code: ErrorCode, label: str
) -> None:
    """Refuse a database a newer bridge has migrated: this one would misread it."""
    newest = max(recorded, default=0)
    if newest > current_version:
        raise BridgeError(
            code,
            f"{label} schema version {newest} is newer than this bridge supports",
            details={"version": newest, "current_version": current_version},
        )
