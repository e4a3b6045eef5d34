"""The admin API's shapes (``contract/keys.py``) from the store's records, and bodies read
with the key rules.

A body is checked by the rules of ``storage/rules/keys.py`` before it becomes a model, so
each fault keeps its own answer (``images_per_day must be an integer from 0 to …`` on
``images_per_day``, ``unknown key field: colour`` …) and the API, the CLI and the store
agree on what a valid key is. A creation's name is checked when the key is stored, after
its limits and the store's room.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.keys import (
    BridgeKey,
    BridgeKeyAuditEntry,
    BridgeKeyCreate,
    BridgeKeyUpdate,
    BridgeKeyUsageRow,
    KeyState,
)
from imagebridge.keys.quota import quota_readings
from imagebridge.storage.records import KeyAuditEntry, KeyRecord, KeyUsage
from imagebridge.storage.rules.keys import Windows, check_key_limits

__all__ = ["audit_entry", "key_view", "read_create", "read_update", "usage_row"]

M = TypeVar("M", bound=BridgeKeyUpdate)


def _checked(model: type[M], values: Mapping[str, Any]) -> M:
    try:
        return model.model_validate(values)
    except ValidationError:  # the rules passed: only a shape they do not know is left
        raise BridgeError.invalid_request("key request body is invalid") from None


def read_update(values: Mapping[str, Any]) -> BridgeKeyUpdate:
    """A ``PATCH /v1/keys/{id}`` body (or the CLI's flags), checked by the key rules."""
    check_key_limits(values)
    return _checked(BridgeKeyUpdate, values)


def read_create(values: Mapping[str, Any]) -> BridgeKeyCreate:
    """A ``POST /v1/keys`` body (or the CLI's name and flags), checked by the key rules.

    A name that is not text reads as ``""``, which the store refuses with the name's own
    error once the limits and the store's room were checked."""
    limits = {field: value for field, value in values.items() if field != "name"}
    check_key_limits(limits)
    name = values.get("name")
    return _checked(BridgeKeyCreate, {**limits, "name": name if isinstance(name, str) else ""})


def key_view(record: KeyRecord, windows: Windows) -> BridgeKey:
    """A key as the admin API and the CLI show it (the prefix only, never the secret)."""
    limits = record.limits
    return BridgeKey(
        id=record.id,
        name=record.name,
        prefix=record.prefix,
        state=cast(KeyState, record.state(windows.now)),
        created_at=record.created_at,
        updated_at=record.updated_at,
        revoked_at=record.revoked_at,
        images_per_day=limits.images_per_day,
        images_per_week=limits.images_per_week,
        images_per_month=limits.images_per_month,
        max_concurrent=limits.max_concurrent,
        providers=None if limits.providers is None else list(limits.providers),
        expires_at=limits.expires_at,
        remaining=quota_readings(record, windows),
    )


def usage_row(usage: KeyUsage, key_name: str | None) -> BridgeKeyUsageRow:
    return BridgeKeyUsageRow(**usage.to_dict(), key_name=key_name)


def audit_entry(entry: KeyAuditEntry) -> BridgeKeyAuditEntry:
    return BridgeKeyAuditEntry.model_validate(entry.to_dict())
