"""The Codex account pool: several ChatGPT logins behind one bridge (docs/accounts.md)."""

from imagebridge.providers.codex.pool.account import AccountSpec, Blocker, PoolAccount
from imagebridge.providers.codex.pool.failover import (
    ACCOUNT_FAILOVER_WARNING,
    Refusal,
    Tried,
    record_failover,
    refusal_of,
    tried_details,
)
from imagebridge.providers.codex.pool.pool import (
    POLICIES,
    AccountLease,
    AccountPool,
    Policy,
    PoolSettings,
)

__all__ = [
    "ACCOUNT_FAILOVER_WARNING",
    "POLICIES",
    "AccountLease",
    "AccountPool",
    "AccountSpec",
    "Blocker",
    "Policy",
    "PoolAccount",
    "PoolSettings",
    "Refusal",
    "Tried",
    "record_failover",
    "refusal_of",
    "tried_details",
]
