"""``keys`` command bodies: the key service over ``server.jobs.database``, opened directly.

The CLI is the admin on the machine that holds the database (or can reach the PostgreSQL
server); it needs no running bridge and no admin token. Every change is audited as
``cli:<user>``. Secrets are printed once, by ``create`` and ``rotate``.
"""

from __future__ import annotations

import asyncio
import csv
import getpass
import io
from collections.abc import Awaitable, Callable
from datetime import datetime, time, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from imagebridge.cli.context import CliContext
from imagebridge.contract.errors import BridgeError

if TYPE_CHECKING:
    from imagebridge.contract.keys import BridgeKeyIssued
    from imagebridge.keys import KeyService

__all__ = [
    "keys_audit",
    "keys_create",
    "keys_list",
    "keys_revoke",
    "keys_rotate",
    "keys_show",
    "keys_update",
    "keys_usage",
    "limit_flags",
]

T = TypeVar("T")
_NONE = "none"
_USAGE_COLUMNS = (
    "day",
    "key_name",
    "key_id",
    "provider",
    "account",
    "requested",
    "delivered",
    "failed",
    "unknown",
    "total_tokens",
)


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _count(value: str, field: str) -> int | None:
    if value.strip().lower() == _NONE:
        return None
    try:
        return int(value)
    except ValueError:
        raise BridgeError.invalid_request(
            f"--{field.replace('_', '-')} must be a number or 'none'", field=field
        ) from None


def limit_flags(
    images_per_day: str | None,
    images_per_week: str | None,
    images_per_month: str | None,
    max_concurrent: str | None,
    providers: str | None,
    expires: str | None,
) -> dict[str, Any]:
    """The flags given, as key fields (``expires`` stays text until the zone is known)."""
    flags: dict[str, Any] = {}
    for field, value in (
        ("images_per_day", images_per_day),
        ("images_per_week", images_per_week),
        ("images_per_month", images_per_month),
        ("max_concurrent", max_concurrent),
    ):
        if value is not None:
            flags[field] = _count(value, field)
    if providers is not None:
        names = [p.strip() for p in providers.split(",") if p.strip()]
        flags["providers"] = None if providers.strip().lower() == _NONE else names
    if expires is not None:
        flags["expires_at"] = expires
    return flags


def _expiry(text: str, zone_name: str) -> int | None:
    """``YYYY-MM-DD`` → the end of that day; an ISO time as given; both in the key zone."""
    from imagebridge.storage.rules.keys import zone

    if text.strip().lower() == _NONE:
        return None
    tz = zone(zone_name)
    try:
        if len(text) == 10:
            day = datetime.fromisoformat(text).date()
            return int(datetime.combine(day + timedelta(days=1), time(), tz).timestamp())
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BridgeError.invalid_request(
            "--expires must be YYYY-MM-DD or an ISO time", field="expires_at"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return int(moment.timestamp())


def _run(ctx: CliContext, body: Callable[[KeyService], Awaitable[T]]) -> T:
    from imagebridge.application.keys import open_key_service

    config = ctx.config()

    async def main() -> T:
        service = await open_key_service(config, ctx.env)
        try:
            return await body(service)
        finally:
            await service.aclose()

    return asyncio.run(main())


def _fields(ctx: CliContext, flags: dict[str, Any]) -> dict[str, Any]:
    if isinstance(flags.get("expires_at"), str):
        zone_name = ctx.config().server.keys.time_zone
        flags = {**flags, "expires_at": _expiry(flags["expires_at"], zone_name)}
    return flags


def _issued(ctx: CliContext, issued: BridgeKeyIssued) -> None:
    if ctx.output.machine:
        ctx.output.value(issued.to_wire())
        return
    ctx.output.value(issued.key.to_wire())
    ctx.output.text(issued.secret)
    ctx.output.status("This secret is shown once; the bridge keeps only its hash.")


def keys_create(ctx: CliContext, name: str, flags: dict[str, Any]) -> int:
    fields = _fields(ctx, flags)

    async def body(service: KeyService) -> BridgeKeyIssued:
        from imagebridge.keys import read_create

        return await service.create(read_create({**fields, "name": name}), actor=_actor())

    _issued(ctx, _run(ctx, body))
    return 0


def keys_list(ctx: CliContext) -> int:
    async def body(service: KeyService) -> list[dict[str, Any]]:
        return [key.to_wire() for key in (await service.listing()).data]

    ctx.output.value({"items": _run(ctx, body)})
    return 0


def keys_show(ctx: CliContext, key: str) -> int:
    async def body(service: KeyService) -> dict[str, Any]:
        return service.view(await service.find(key)).to_wire()

    ctx.output.value(_run(ctx, body))
    return 0


def keys_update(ctx: CliContext, key: str, flags: dict[str, Any]) -> int:
    fields = _fields(ctx, flags)

    async def body(service: KeyService) -> dict[str, Any]:
        from imagebridge.keys import read_update

        record = await service.find(key)
        changes = read_update(fields)
        return (await service.update(record.id, changes, actor=_actor())).to_wire()

    ctx.output.value(_run(ctx, body))
    return 0


def keys_revoke(ctx: CliContext, key: str) -> int:
    async def body(service: KeyService) -> dict[str, Any]:
        record = await service.find(key)
        return (await service.revoke(record.id, actor=_actor())).to_wire()

    ctx.output.value(_run(ctx, body))
    return 0


def keys_rotate(ctx: CliContext, key: str) -> int:
    async def body(service: KeyService) -> BridgeKeyIssued:
        record = await service.find(key)
        return await service.rotate(record.id, actor=_actor())

    _issued(ctx, _run(ctx, body))
    return 0


def keys_usage(
    ctx: CliContext,
    *,
    key: str | None,
    provider: str | None,
    account: str | None,
    since: str | None,
    until: str | None,
    csv: bool,
) -> int:
    async def body(service: KeyService) -> list[dict[str, Any]]:
        key_id = (await service.find(key)).id if key is not None else None
        rows = await service.usage(
            key=key_id, provider=provider, account=account, since=since, until=until
        )
        # A row of a key no longer listed shows an empty name.
        return [{**row.to_wire(), "key_name": row.key_name or ""} for row in rows or []]

    rows = _run(ctx, body)
    if csv:
        ctx.output.text(_csv(rows))
    else:
        ctx.output.value({"group_by": "day", "items": rows})
    return 0


def _csv(rows: list[dict[str, Any]]) -> str:
    from imagebridge.cli.output import escape_text

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_USAGE_COLUMNS)
    for row in rows:
        writer.writerow([escape_text(str(row[column])) for column in _USAGE_COLUMNS])
    return buffer.getvalue().rstrip("\n")


def keys_audit(ctx: CliContext, key: str | None) -> int:
    async def body(service: KeyService) -> list[dict[str, Any]]:
        key_id = (await service.find(key)).id if key is not None else None
        return [entry.to_wire() for entry in await service.audit(key_id)]

    ctx.output.value({"items": _run(ctx, body)})
    return 0
