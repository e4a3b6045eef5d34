"""A PostgreSQL store's schema version, read without creating or changing anything.

One read-only connection reads the store's rows of ``schema_migrations``; a schema, or a
table, that does not exist yet is a store not initialized yet.
"""

from __future__ import annotations

from imagebridge.contract.errors import ErrorCode
from imagebridge.storage.lifecycle import DEFAULT_BUSY_TIMEOUT_MS
from imagebridge.storage.postgres.connection import check_options, connect, connection_settings
from imagebridge.storage.postgres.errors import translate_error
from imagebridge.storage.postgres.migrations import Step, recorded_versions
from imagebridge.storage.postgres.url import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SCHEMA,
    check_schema_name,
)
from imagebridge.storage.records import SchemaStatus
from imagebridge.storage.rules.schema import StoreSchema

__all__ = ["inspect_schema"]


async def inspect_schema(
    url: str,
    store_schema: StoreSchema[Step],
    *,
    schema: str = DEFAULT_SCHEMA,
    code: ErrorCode,
    label: str,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> SchemaStatus:
    """Report a store's schema version without creating or changing anything."""
    check_schema_name(schema, code)
    check_options(code, DEFAULT_BUSY_TIMEOUT_MS, connect_timeout_s, 0, 1)
    settings = connection_settings(
        url,
        busy_timeout_ms=DEFAULT_BUSY_TIMEOUT_MS,
        connect_timeout_s=float(connect_timeout_s),
        code=code,
        label=label,
    )
    current = store_schema.current_version
    conn = await connect(settings, code, label)
    try:
        await conn.set_read_only(True)
        async with conn.transaction():
            versions = await recorded_versions(conn, schema, store_schema.recorded_as)
    except Exception as exc:
        raise translate_error(exc, code, label) from None
    finally:
        await conn.close()
    version = max(versions) if versions else None
    return SchemaStatus(initialized=version is not None, version=version, current_version=current)
