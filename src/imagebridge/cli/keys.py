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
    from imagebridge.jobs.keys import KeyService
    from imagebridge.storage.records import KeyRecord

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
            await service.store.close()

    return asyncio.run(main())


async def _find(service: KeyService, key: str) -> KeyRecord:
    """A key by id, else by name (one 404 for neither)."""
    try:
        return await service.get(key)
    except BridgeError:
        return await service.store.find_by_name(key)


def _fields(ctx: CliContext, flags: dict[str, Any]) -> dict[str, Any]:
    if isinstance(flags.get("expires_at"), str):
        zone_name = ctx.config().server.keys.time_zone
        flags = {**flags, "expires_at": _expiry(flags["expires_at"], zone_name)}
    return flags


def _issued(ctx: CliContext, described: dict[str, Any], secret: str) -> None:
    if ctx.output.machine:
        ctx.output.value({"key": described, "secret": secret})
        return
    ctx.output.value(described)
    ctx.output.text(secret)
    ctx.output.status("This secret is shown once; the bridge keeps only its hash.")


def keys_create(ctx: CliContext, name: str, flags: dict[str, Any]) -> int:
    fields = _fields(ctx, flags)

    async def body(service: KeyService) -> tuple[dict[str, Any], str]:
        record, secret = await service.create(name, fields, actor=_actor())
        return service.describe(record), secret

    described, secret = _run(ctx, body)
    _issued(ctx, described, secret)
    return 0


def keys_list(ctx: CliContext) -> int:
    async def body(service: KeyService) -> list[dict[str, Any]]:
        return [service.describe(record) for record in await service.list()]

    ctx.output.value({"items": _run(ctx, body)})
    return 0


def keys_show(ctx: CliContext, key: str) -> int:
    async def body(service: KeyService) -> dict[str, Any]:
        return service.describe(await _find(service, key))

    ctx.output.value(_run(ctx, body))
    return 0


def keys_update(ctx: CliContext, key: str, flags: dict[str, Any]) -> int:
    fields = _fields(ctx, flags)

    async def body(service: KeyService) -> dict[str, Any]:
        record = await _find(service, key)
        return service.describe(await service.update(record.id, fields, actor=_actor()))

    ctx.output.value(_run(ctx, body))
    return 0


def keys_revoke(ctx: CliContext, key: str) -> int:
    async def body(service: KeyService) -> dict[str, Any]:
        record = await _find(service, key)
        return service.describe(await service.revoke(record.id, actor=_actor()))

    ctx.output.value(_run(ctx, body))
    return 0


def keys_rotate(ctx: CliContext, key: str) -> int:
    async def body(service: KeyService) -> tuple[dict[str, Any], str]:
        record = await _find(service, key)
        rotated, secret = await service.rotate(record.id, actor=_actor())
        return service.describe(rotated), secret

    described, secret = _run(ctx, body)
    _issued(ctx, described, secret)
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
        names = {record.id: record.name for record in await service.list()}
        key_id = (await _find(service, key)).id if key is not None else None
        rows = await service.store.usage(
            key_id=key_id, provider=provider, account=account, since=since, until=until
        )
        return [{**row.to_dict(), "key_name": names.get(row.key_id, "")} for row in rows]

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
        key_id = (await _find(service, key)).id if key is not None else None
        return [entry.to_dict() for entry in await service.audit(key_id)]

    ctx.output.value({"items": _run(ctx, body)})
    return 0
