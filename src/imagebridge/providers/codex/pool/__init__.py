"""The Codex account pool: several ChatGPT logins behind one bridge (docs/accounts.md)."""

from imagebridge.providers.codex.pool.account import AccountSpec, Blocker, PoolAccount
from imagebridge.providers.codex.pool.failover import Refusal, refusal_of
from imagebridge.providers.codex.pool.pool import (
    POLICIES,
    AccountLease,
    AccountPool,
    Policy,
    PoolSettings,
)

__all__ = [
    "POLICIES",
    "AccountLease",
    "AccountPool",
    "AccountSpec",
    "Blocker",
    "Policy",
    "PoolAccount",
    "PoolSettings",
    "Refusal",
    "refusal_of",
]
