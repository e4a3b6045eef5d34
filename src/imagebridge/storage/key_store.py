"""The API-key store's logic, shared by both backends: its SQL, rows and audit trail.

Each backend supplies one primitive, :meth:`KeyStoreBase._script`: run a list of statements
(named ``:param`` placeholders) in one transaction and return the first one's rows as dicts;
the later statements (the audit entry) run only when the first one returned a row, so a
refused change leaves no trace.
Everything else — the statements, the checks, turning rows into records — is here, so SQLite
and PostgreSQL give the same answers.

The quota reservation is one conditional ``UPDATE … RETURNING`` on the key's row: it checks
the key is live and that every window has room *and* adds the images, atomically in the
database, so reservations are exact under concurrency and across instances (PostgreSQL
re-checks the ``WHERE`` on the newest row version; SQLite has one writer).

A key's ``max_concurrent`` is held the same way: the key's row counts the requests in
flight on every instance (``in_flight``), and a slot is taken by one conditional
``UPDATE … WHERE in_flight < max_concurrent``, in the transaction that records the slot as
a lease row (``api_key_slots``: its holder and expiry). A running instance renews its
leases; a killed one's expire, and the next request finding the key full reclaims them
(each lease deleted and the count lowered in one transaction, so a slot is never given
back twice).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping, Sequence
from typing import Any

from imagebridge.contract.errors import BridgeError
from imagebridge.storage.records import KeyAuditEntry, KeyLimits, KeyRecord, KeyUsage
from imagebridge.storage.rules.keys import (
    WINDOWS,
    Windows,
    check_key_id,
    check_key_limits,
    check_key_name,
    check_usage_counts,
    dump_providers,
    key_not_found,
    load_providers,
    mint_key_id,
    now_or,
)
from imagebridge.storage.rules.values import valid_identifier

__all__ = ["MAX_LISTED_ROWS", "MAX_RECLAIMED_SLOTS", "KeyStoreBase", "Statement"]

Statement = tuple[str, Mapping[str, Any]]

MAX_LISTED_ROWS = 10_000
"""Most rows one usage or audit listing returns."""

MAX_RECLAIMED_SLOTS = 100
"""Most expired slot leases one reclaim gives back (the next one takes the rest)."""

_RENEW_BATCH = 100

_KEY_COLUMNS = (
    "id, name, prefix, created_at, updated_at, revoked_at, expires_at, images_per_day, "
    "images_per_week, images_per_month, max_concurrent, providers, day_start, day_used, "
    "week_start, week_used, month_start, month_used"
)


def _room(window: str) -> str:
    """SQL: the window still has room for ``:n`` more images in the current period."""
    used = f"(CASE WHEN {window}_start >= :{window} THEN {window}_used ELSE 0 END)"
    return f"(images_per_{window} IS NULL OR {used} + :n <= images_per_{window})"


def _take(window: str) -> str:
    """SQL assignments: add ``:n`` to the current period, resetting a past one."""
    return (
        f"{window}_used = (CASE WHEN {window}_start >= :{window} THEN {window}_used ELSE 0 END)"
        f" + :n, {window}_start = (CASE WHEN {window}_start > :{window} THEN {window}_start"
        f" ELSE :{window} END)"
    )


def _give(window: str) -> str:
    """SQL assignment: take ``:n`` back from the period it was reserved in, never below 0."""
    return (
        f"{window}_used = (CASE WHEN {window}_start = :{window} THEN "
        f"(CASE WHEN {window}_used > :n THEN {window}_used - :n ELSE 0 END) "
        f"ELSE {window}_used END)"
    )


def _record(row: Mapping[str, Any]) -> KeyRecord:
    limits = KeyLimits(
        images_per_day=row["images_per_day"],
        images_per_week=row["images_per_week"],
        images_per_month=row["images_per_month"],
        max_concurrent=row["max_concurrent"],
        providers=load_providers(row["providers"]),
        expires_at=row["expires_at"],
    )
    return KeyRecord(
        id=str(row["id"]),
        name=str(row["name"]),
        prefix=str(row["prefix"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        revoked_at=row["revoked_at"],
        limits=limits,
        used={w: (int(row[f"{w}_start"]), int(row[f"{w}_used"])) for w in WINDOWS},
    )


def _limit_params(limits: KeyLimits) -> dict[str, Any]:
    return {
        "expires_at": limits.expires_at,
        "images_per_day": limits.images_per_day,
        "images_per_week": limits.images_per_week,
        "images_per_month": limits.images_per_month,
        "max_concurrent": limits.max_concurrent,
        "providers": dump_providers(limits.providers),
    }


class KeyStoreBase:
    """:class:`~imagebridge.storage.interfaces.KeyStore` over a backend's ``_script``."""

    _keys = "api_keys"
    _usage = "api_key_usage"
    _audit = "api_key_audit"
    _slots = "api_key_slots"

    async def _script(self, statements: Sequence[Statement]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _audit_step(
        self, key_id: str, actor: str, action: str, now: int, details: Mapping[str, Any]
    ) -> Statement:
        return (
            f"INSERT INTO {self._audit} (at, actor, action, key_id, key_name, details) "  # noqa: S608
            f"SELECT :at, :actor, :action, id, name, :details FROM {self._keys} WHERE id = :id",
            {
                "at": now,
                "actor": actor[:128],
                "action": action,
                "id": key_id,
                "details": json.dumps(dict(details), sort_keys=True),
            },
        )

    async def create(
        self,
        name: str,
        limits: KeyLimits,
        *,
        secret_hash: str,
        prefix: str,
        actor: str,
        now: int | None = None,
    ) -> KeyRecord:
        """Add a key; a taken name is refused (``invalid_request`` on ``name``)."""
        check_key_name(name)
        stamp = now_or(now)
        key_id = mint_key_id()
        params = {
            "id": key_id,
            "name": name,
            "prefix": prefix,
            "hash": secret_hash,
            "now": stamp,
            **_limit_params(limits),
        }
        rows = await self._script(
            [
                (
                    f"INSERT INTO {self._keys} (id, name, prefix, secret_hash, created_at, "  # noqa: S608
                    "updated_at, expires_at, images_per_day, images_per_week, "
                    "images_per_month, max_concurrent, providers) VALUES (:id, :name, :prefix, "
                    ":hash, :now, :now, :expires_at, :images_per_day, :images_per_week, "
                    ":images_per_month, :max_concurrent, :providers) ON CONFLICT DO NOTHING "
                    f"RETURNING {_KEY_COLUMNS}",
                    params,
                ),
                self._audit_step(key_id, actor, "create", stamp, limits.to_dict()),
            ]
        )
        if not rows:
            raise BridgeError.invalid_request("a key with this name already exists", field="name")
        return _record(rows[0])

    async def get(self, key_id: str) -> KeyRecord:
        check_key_id(key_id)
        rows = await self._script(
            [(f"SELECT {_KEY_COLUMNS} FROM {self._keys} WHERE id = :id", {"id": key_id})]  # noqa: S608
        )
        if not rows:
            raise key_not_found()
        return _record(rows[0])

    async def find_by_name(self, name: str) -> KeyRecord:
        if not isinstance(name, str) or not valid_identifier(name, 64):
            raise key_not_found()
        rows = await self._script(
            [(f"SELECT {_KEY_COLUMNS} FROM {self._keys} WHERE name = :name", {"name": name})]  # noqa: S608
        )
        if not rows:
            raise key_not_found()
        return _record(rows[0])

    async def find(self, secret_hash: str) -> tuple[KeyRecord, str] | None:
        """The key whose hash is ``secret_hash`` and that stored hash, or ``None``."""
        rows = await self._script(
            [
                (
                    f"SELECT {_KEY_COLUMNS}, secret_hash FROM {self._keys} "  # noqa: S608
                    "WHERE secret_hash = :hash",
                    {"hash": secret_hash},
                )
            ]
        )
        if not rows:
            return None
        return _record(rows[0]), str(rows[0]["secret_hash"])

    async def list(self) -> builtins.list[KeyRecord]:
        rows = await self._script(
            [(f"SELECT {_KEY_COLUMNS} FROM {self._keys} ORDER BY name", {})]  # noqa: S608
        )
        return [_record(row) for row in rows]

    async def update(
        self, key_id: str, values: Mapping[str, Any], *, actor: str, now: int | None = None
    ) -> KeyRecord:
        """Change limits (``None`` clears one); the change is audited with its new values."""
        current = await self.get(key_id)
        limits = check_key_limits(values, current.limits)
        stamp = now_or(now)
        params = {"id": key_id, "now": stamp, **_limit_params(limits)}
        rows = await self._script(
            [
                (
                    f"UPDATE {self._keys} SET updated_at = :now, expires_at = :expires_at, "  # noqa: S608
                    "images_per_day = :images_per_day, images_per_week = :images_per_week, "
                    "images_per_month = :images_per_month, max_concurrent = :max_concurrent, "
                    f"providers = :providers WHERE id = :id RETURNING {_KEY_COLUMNS}",
                    params,
                ),
                self._audit_step(
                    key_id,
                    actor,
                    "update",
                    stamp,
                    {k: limits.to_dict()[k] for k in sorted(values)},
                ),
            ]
        )
        if not rows:
            raise key_not_found()
        return _record(rows[0])

    async def revoke(self, key_id: str, *, actor: str, now: int | None = None) -> KeyRecord:
        """Refuse the key from now on, on every instance (the next lookup sees it)."""
        check_key_id(key_id)
        stamp = now_or(now)
        rows = await self._script(
            [
                (
                    f"UPDATE {self._keys} SET revoked_at = COALESCE(revoked_at, :now), "  # noqa: S608
                    f"updated_at = :now WHERE id = :id RETURNING {_KEY_COLUMNS}",
                    {"id": key_id, "now": stamp},
                ),
                self._audit_step(key_id, actor, "revoke", stamp, {}),
            ]
        )
        if not rows:
            raise key_not_found()
        return _record(rows[0])

    async def rotate(
        self, key_id: str, *, secret_hash: str, prefix: str, actor: str, now: int | None = None
    ) -> KeyRecord:
        """Replace the secret; the old one stops working at once, usage stays with the key."""
        check_key_id(key_id)
        stamp = now_or(now)
        rows = await self._script(
            [
                (
                    f"UPDATE {self._keys} SET secret_hash = :hash, prefix = :prefix, "  # noqa: S608
                    "updated_at = :now WHERE id = :id AND revoked_at IS NULL "
                    f"RETURNING {_KEY_COLUMNS}",
                    {"id": key_id, "hash": secret_hash, "prefix": prefix, "now": stamp},
                ),
                self._audit_step(key_id, actor, "rotate", stamp, {"prefix": prefix}),
            ]
        )
        if not rows:
            await self.get(key_id)  # 404 for a missing key
            raise BridgeError.invalid_request("a revoked key cannot be rotated", field="id")
        return _record(rows[0])

    async def reserve(self, key_id: str, n: int, windows: Windows) -> KeyRecord | None:
        """Reserve ``n`` images on every window in ONE statement; ``None`` when refused
        (revoked, expired, missing, or a window without room)."""
        check_usage_counts(n)
        sql = (
            f"UPDATE {self._keys} SET {_take('day')}, {_take('week')}, {_take('month')} "  # noqa: S608
            "WHERE id = :id AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > :now)"
            f" AND {_room('day')} AND {_room('week')} AND {_room('month')} "
            f"RETURNING {_KEY_COLUMNS}"
        )
        rows = await self._script(
            [(sql, {"id": key_id, "n": n, "now": windows.now, **windows.params()})]
        )
        return _record(rows[0]) if rows else None

    async def release(self, key_id: str, n: int, windows: Windows) -> KeyRecord | None:
        """Give back ``n`` images reserved at ``windows`` (a period since ended keeps them)."""
        check_usage_counts(n)
        sql = (
            f"UPDATE {self._keys} SET {_give('day')}, {_give('week')}, {_give('month')} "  # noqa: S608
            f"WHERE id = :id RETURNING {_KEY_COLUMNS}"
        )
        rows = await self._script([(sql, {"id": key_id, "n": n, **windows.params()})])
        return _record(rows[0]) if rows else None

    async def acquire_slot(
        self, key_id: str, slot_id: str, *, holder: str, now_ms: int, expires_ms: int
    ) -> bool:
        """Take one of the key's ``max_concurrent`` slots (ONE conditional statement on the
        key's row) and record its lease; ``False`` when every slot is taken."""
        check_key_id(key_id)
        rows = await self._script(
            [
                (
                    f"UPDATE {self._keys} SET in_flight = in_flight + 1 WHERE id = :id "  # noqa: S608
                    "AND max_concurrent IS NOT NULL AND in_flight < max_concurrent "
                    "RETURNING in_flight",
                    {"id": key_id},
                ),
                (
                    f"INSERT INTO {self._slots} (id, key_id, holder, acquired_at, expires_at) "  # noqa: S608
                    "VALUES (:slot, :id, :holder, :now, :expires)",
                    {
                        "slot": slot_id,
                        "id": key_id,
                        "holder": holder[:128],
                        "now": now_ms,
                        "expires": expires_ms,
                    },
                ),
            ]
        )
        return bool(rows)

    async def release_slot(self, key_id: str, slot_id: str) -> bool:
        """Give a slot back; ``False`` when its lease was already gone (reclaimed)."""
        rows = await self._script(self._drop_slot(key_id, slot_id, None))
        return bool(rows)

    async def renew_slots(self, slot_ids: Sequence[str], *, expires_ms: int) -> int:
        """Move the expiry of these leases (an instance's heartbeat); how many were renewed."""
        renewed = 0
        for start in range(0, len(slot_ids), _RENEW_BATCH):
            batch = slot_ids[start : start + _RENEW_BATCH]
            names = {f"s{i}": slot for i, slot in enumerate(batch)}
            placeholders = ", ".join(f":{name}" for name in names)
            rows = await self._script(
                [
                    (
                        f"UPDATE {self._slots} SET expires_at = :expires "  # noqa: S608
                        f"WHERE id IN ({placeholders}) RETURNING id",
                        {"expires": expires_ms, **names},
                    )
                ]
            )
            renewed += len(rows)
        return renewed

    async def reclaim_slots(self, key_id: str, *, now_ms: int) -> int:
        """Give back the key's slots whose lease expired (their instance stopped renewing);
        how many came back."""
        check_key_id(key_id)
        rows = await self._script(
            [
                (
                    f"SELECT id FROM {self._slots} WHERE key_id = :id "  # noqa: S608
                    "AND expires_at <= :now ORDER BY expires_at LIMIT :limit",
                    {"id": key_id, "now": now_ms, "limit": MAX_RECLAIMED_SLOTS},
                )
            ]
        )
        reclaimed = 0
        for row in rows:
            if await self._script(self._drop_slot(key_id, str(row["id"]), now_ms)):
                reclaimed += 1
        return reclaimed

    def _drop_slot(
        self, key_id: str, slot_id: str, expired_by: int | None
    ) -> builtins.list[Statement]:
        """Delete a lease (only an expired one with ``expired_by``) and, in the same
        transaction and only if it was there, lower the key's count."""
        condition = " AND expires_at <= :now" if expired_by is not None else ""
        return [
            (
                f"DELETE FROM {self._slots} WHERE id = :slot{condition} RETURNING id",  # noqa: S608
                {"slot": slot_id, "now": expired_by},
            ),
            (
                f"UPDATE {self._keys} SET in_flight = CASE WHEN in_flight > 0 "  # noqa: S608
                "THEN in_flight - 1 ELSE 0 END WHERE id = :id",
                {"id": key_id},
            ),
        ]

    async def record_usage(self, usage: KeyUsage) -> None:
        """Add one outcome's counts to the key's row for that day, provider and account."""
        check_usage_counts(
            usage.requested,
            usage.delivered,
            usage.failed,
            usage.unknown,
            usage.total_tokens,
            usage.kept,
            usage.replayed,
        )
        await self._script(
            [
                (
                    f"INSERT INTO {self._usage} AS u (key_id, day, provider, account, "  # noqa: S608
                    "requested, delivered, failed, unknown, total_tokens, kept, replayed) "
                    "VALUES (:key_id, :day, :provider, :account, :requested, :delivered, "
                    ":failed, :unknown, :total_tokens, :kept, :replayed) "
                    "ON CONFLICT (key_id, day, provider, account) DO UPDATE SET "
                    "requested = u.requested + excluded.requested, "
                    "delivered = u.delivered + excluded.delivered, "
                    "failed = u.failed + excluded.failed, unknown = u.unknown + excluded.unknown, "
                    "total_tokens = u.total_tokens + excluded.total_tokens, "
                    "kept = u.kept + excluded.kept, replayed = u.replayed + excluded.replayed",
                    usage.to_dict(),
                )
            ]
        )

    async def usage(
        self,
        *,
        key_id: str | None = None,
        provider: str | None = None,
        account: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = MAX_LISTED_ROWS,
    ) -> builtins.list[KeyUsage]:
        """Usage rows, oldest day first; ``since``/``until`` are inclusive local dates."""
        conditions = []
        params: dict[str, Any] = {"limit": min(max(limit, 1), MAX_LISTED_ROWS)}
        for column, value in (
            ("key_id", key_id),
            ("provider", provider),
            ("account", account),
        ):
            if value is not None:
                conditions.append(f"{column} = :{column}")
                params[column] = value
        if since is not None:
            conditions.append("day >= :since")
            params["since"] = since
        if until is not None:
            conditions.append("day <= :until")
            params["until"] = until
        where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
        rows = await self._script(
            [
                (
                    "SELECT key_id, day, provider, account, requested, delivered, failed, "  # noqa: S608
                    f"unknown, total_tokens, kept, replayed FROM {self._usage} {where}"
                    "ORDER BY day, key_id, provider, account LIMIT :limit",
                    params,
                )
            ]
        )
        return [KeyUsage(**row) for row in rows]

    async def audit(
        self, *, key_id: str | None = None, limit: int = MAX_LISTED_ROWS
    ) -> builtins.list[KeyAuditEntry]:
        """Administration actions, oldest first."""
        where = "WHERE key_id = :key_id " if key_id is not None else ""
        rows = await self._script(
            [
                (
                    "SELECT seq, at, actor, action, key_id, key_name, details "  # noqa: S608
                    f"FROM {self._audit} {where}ORDER BY seq LIMIT :limit",
                    {"key_id": key_id, "limit": min(max(limit, 1), MAX_LISTED_ROWS)},
                )
            ]
        )
        return [KeyAuditEntry(**{**row, "details": json.loads(row["details"])}) for row in rows]
