"""How the SQLite stores run statements: write transactions and statements over many ids."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping, Sequence

__all__ = ["immediate", "run_for_ids"]


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``: the write lock is taken up front, so a transaction
    never fails half-way on a lock upgrade; any exception rolls everything back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def run_for_ids(
    conn: sqlite3.Connection,
    sql: str,
    ids: Sequence[str],
    params: Mapping[str, object] | None = None,
    *,
    chunk: int = 500,
) -> int:
    """Run ``sql`` (holding ``{ids}``) over bounded chunks of ``ids``; return rows changed.

    Ids are bound as named parameters, so ``sql`` may use other ``:name`` parameters too.
    """
    changed = 0
    for start in range(0, len(ids), chunk):
        named = {f"id{i}": value for i, value in enumerate(ids[start : start + chunk])}
        placeholders = ", ".join(f":{name}" for name in named)
        cursor = conn.execute(sql.format(ids=placeholders), {**(params or {}), **named})
        changed += max(cursor.rowcount, 0)
    return changed
