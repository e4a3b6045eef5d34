"""Named API keys: one bridge for a team (docs/keys.md).

A service of its own, below the job services (a key's job is charged when it runs) and
above the key store it sits on (``storage/``): authentication by the hash of a secret,
calendar quotas reserved before anything goes upstream, ``max_concurrent`` slots counted in
the database, usage per key, day, provider and pool account, and the administration the
admin API and the CLI share.

- ``service.py``: :class:`KeyService`, the one entry point.
- ``charge.py``: :class:`QuotaCharge`, a request's quota steps as one ``async with``.
- ``slots.py``: the ``max_concurrent`` slot leases and their heartbeat.
- ``quota.py``: readings, reservations, refusals, usage shares per pool account.
- ``scope.py``: a key's ownership scope and its own session names.
- ``wire.py``: the admin API's shapes (``contract/keys.py``) from records; bodies read with
  the key rules.
"""

from imagebridge.keys.charge import QuotaCharge
from imagebridge.keys.quota import Reservation, account_shares
from imagebridge.keys.scope import (
    KEY_SCOPE_PREFIX,
    key_id_of_scope,
    key_scope,
    named_key_scope,
    scope_request_session,
    scope_session_key,
    unscope_response_session,
)
from imagebridge.keys.service import KeyService, KeyServiceSettings
from imagebridge.keys.slots import KeySlot
from imagebridge.keys.wire import read_create, read_update

__all__ = [
    "KEY_SCOPE_PREFIX",
    "KeyService",
    "KeyServiceSettings",
    "KeySlot",
    "QuotaCharge",
    "Reservation",
    "account_shares",
    "key_id_of_scope",
    "key_scope",
    "named_key_scope",
    "read_create",
    "read_update",
    "scope_request_session",
    "scope_session_key",
    "unscope_response_session",
]
