"""What a store's schema is, and the rules both backends' migration machinery follows.

A store's schema (:class:`StoreSchema`) is its migrations numbered 1..n and the name they are
recorded under; a database a newer bridge migrated is refused, and only plain identifiers are
ever put into SQL text unquoted. How a step runs (a function on a ``sqlite3`` connection, a
coroutine on a psycopg one) is each backend's own ``Step`` type in its ``migrations.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "Migration",
    "StoreSchema",
    "check_migration_numbers",
    "check_not_newer",
    "is_plain_identifier",
]

_PLAIN_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")

StepT = TypeVar("StepT", covariant=True)


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


@dataclass(frozen=True, slots=True)
class Migration(Generic[StepT]):
    """One schema step: its number and how to apply it. ``apply`` must be idempotent.

    It is told whether the step's marker row exists (``recorded``): structural checks run
    every time, while costly data back-fills may run only when the marker is missing.
    """

    version: int
    apply: StepT


@dataclass(frozen=True, slots=True)
class StoreSchema(Generic[StepT]):
    """A store's migrations and the name its applied steps are recorded under.

    ``recorded_as`` is a plain identifier: SQLite keeps each store's steps in a table of that
    name (so stores sharing a file never share a table), PostgreSQL in the rows of the
    schema's one ``schema_migrations`` table whose ``component`` it is.
    """

    recorded_as: str
    migrations: tuple[Migration[StepT], ...]

    def __post_init__(self) -> None:
        if not is_plain_identifier(self.recorded_as):
            raise ValueError("recorded_as must be a plain SQL identifier")
        check_migration_numbers([m.version for m in self.migrations])

    @property
    def current_version(self) -> int:
        return len(self.migrations)
