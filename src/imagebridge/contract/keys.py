"""Named API keys: the admin API's shapes (``/v1/keys``, ``/v1/usage``, docs/keys.md).

An addition: the original has one shared bearer token and no such routes, so nothing here
is read by the original's strict clients. The schemas are named ``BridgeKey…`` like the
operations, so they never collide with the original's names.

The field order of each model is its order on the wire. Absent and ``null`` differ in the
bodies: in :class:`BridgeKeyUpdate` a field left out stays as it is and ``null`` clears it
(``model_fields_set`` tells them apart). The value rules (ranges, names, the provider list)
are the key service's, which gives each its own error (``imagebridge.keys.wire``).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

from imagebridge.contract._base import U32, U64, ContractModel, StrictStr, omit_none

__all__ = [
    "KEY_LIMIT_FIELDS",
    "KEY_WINDOWS",
    "BridgeKey",
    "BridgeKeyAuditEntry",
    "BridgeKeyCreate",
    "BridgeKeyIssued",
    "BridgeKeyList",
    "BridgeKeyQuota",
    "BridgeKeyUpdate",
    "BridgeKeyUsageReport",
    "BridgeKeyUsageRow",
    "KeyAction",
    "KeyState",
    "KeyWindow",
]

KeyWindow = Literal["day", "week", "month"]
"""A quota window: a calendar period in ``server.keys.time_zone``."""

KEY_WINDOWS: tuple[KeyWindow, ...] = get_args(KeyWindow)

KeyState = Literal["active", "expired", "revoked"]

KeyAction = Literal["create", "update", "revoke", "rotate"]
"""An administration action the audit trail records."""


class BridgeKeyQuota(ContractModel):
    """One window's quota reading: its limit, the images left, when the period ends."""

    limit: U32
    remaining: U32
    reset_at: U64
    """Unix time the period ends (the counter starts again)."""


class BridgeKeyUpdate(ContractModel):
    """``PATCH /v1/keys/{id}``: the limits to change; ``null`` clears one (unlimited)."""

    images_per_day: U32 | None = None
    images_per_week: U32 | None = None
    images_per_month: U32 | None = None
    max_concurrent: U32 | None = None
    providers: list[StrictStr] | None = None
    """Allow-list of provider names; ``null``: every provider."""
    expires_at: U64 | None = None
    """Unix time after which the key is refused."""

    def changes(self) -> dict[str, Any]:
        """The fields the body named (``None`` for the ones it cleared)."""
        return {
            name: value
            for name, value in self.model_dump(mode="json").items()
            if name in self.model_fields_set and name in KEY_LIMIT_FIELDS
        }


KEY_LIMIT_FIELDS: tuple[str, ...] = tuple(BridgeKeyUpdate.model_fields)
"""The fields a key's creation or update may set."""


class BridgeKeyCreate(BridgeKeyUpdate):
    """``POST /v1/keys``: a name and the key's limits (absent or ``null``: unlimited)."""

    name: StrictStr


class BridgeKey(ContractModel):
    """A key as the admin sees it: never its secret, only a display prefix."""

    id: StrictStr
    name: StrictStr
    prefix: StrictStr
    """``ibk_`` and the secret's first 8 characters: which key this is, in lists and logs."""
    state: KeyState
    created_at: U64
    updated_at: U64
    revoked_at: U64 | None
    images_per_day: U32 | None
    images_per_week: U32 | None
    images_per_month: U32 | None
    max_concurrent: U32 | None
    providers: list[StrictStr] | None
    expires_at: U64 | None
    remaining: dict[KeyWindow, BridgeKeyQuota]
    """A reading for each window the key has a limit on."""


class BridgeKeyList(ContractModel):
    """``GET /v1/keys``: every key, in name order."""

    data: list[BridgeKey]


class BridgeKeyIssued(ContractModel):
    """A created or rotated key and its secret: the one answer that shows the secret."""

    key: BridgeKey
    secret: StrictStr


class BridgeKeyUsageRow(ContractModel):
    """Images one key asked for on one local day, on one provider and pool account."""

    key_id: StrictStr
    day: StrictStr
    """The local date (``YYYY-MM-DD``) in ``server.keys.time_zone``."""
    provider: StrictStr
    account: StrictStr
    """The pool account the images ran on; ``""`` when none is known."""
    requested: U64
    delivered: U64
    failed: U64
    unknown: U64
    """Images of calls whose outcome is unknown (they kept their reservation)."""
    total_tokens: U64
    """The providers' own usage numbers, summed."""
    kept: U64 = 0
    """Of ``delivered``: images finished and kept in the history after their caller had
    gone (docs/api-decisions.md, "Paid work is kept")."""
    replayed: U64 = 0
    """Images answered again to a retry that joined an earlier generation: nothing new was
    generated, so they are in neither ``requested`` nor ``delivered``."""
    key_name: StrictStr | None


class BridgeKeyUsageReport(ContractModel):
    """``GET /v1/usage``: usage rows per key and local day, oldest first.

    ``time_zone`` is absent when the ``key`` filter names no key (an empty answer).
    """

    group_by: Literal["day"] = "day"
    time_zone: StrictStr | None = Field(default=None, exclude_if=omit_none)
    data: list[BridgeKeyUsageRow]


class BridgeKeyAuditEntry(ContractModel):
    """One administration action: who, what, when (never a secret)."""

    seq: U64
    at: U64
    actor: StrictStr
    """``admin-api`` or ``cli:<user>``."""
    action: KeyAction
    key_id: StrictStr
    key_name: StrictStr
    details: dict[str, Any]
    """The values the action set (limits, or the new display prefix)."""
