"""Opening and closing a store, whatever its backend.

Which kind of store it is (:class:`StoreKind`: its name in errors and the code every one of its
failures carries, one value per kind so both backends and the factories fail alike), how long
it waits for a lock by default, and ``close`` / ``async with`` (:class:`StoreLifecycle`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, Self, TypeVar

from imagebridge.contract.errors import ErrorCode

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "JOB_STORE",
    "KEY_STORE",
    "PRESET_STORE",
    "SESSION_STORE",
    "WEBHOOK_STORE",
    "StoreKind",
    "StoreLifecycle",
]

DEFAULT_BUSY_TIMEOUT_MS = 5_000
"""How long a store waits for a database lock before failing, unless configured."""


@dataclass(frozen=True, slots=True)
class StoreKind:
    """How a store names itself in errors, and the code every one of its failures carries.

    One value per kind of store, so both backends (and the factories) fail alike.
    """

    label: str
    code: ErrorCode


JOB_STORE = StoreKind("durable job database", ErrorCode.INTERNAL)
PRESET_STORE = StoreKind("preset database", ErrorCode.INTERNAL)
SESSION_STORE = StoreKind("session database", ErrorCode.SESSION)
KEY_STORE = StoreKind("key database", ErrorCode.INTERNAL)
WEBHOOK_STORE = StoreKind("webhook database", ErrorCode.INTERNAL)


class _Closable(Protocol):
    async def close(self) -> None: ...


DatabaseT = TypeVar("DatabaseT", bound=_Closable)


class StoreLifecycle(Generic[DatabaseT]):
    """``close`` and ``async with`` for a store that owns one database handle, ``_db``."""

    _db: DatabaseT

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
