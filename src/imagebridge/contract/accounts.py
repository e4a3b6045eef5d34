"""Account (login) names: they become directory names and diagnostics labels, so only a safe,
short alphabet is allowed. Shared by the config checks, the own-login store and the CLI."""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["ACCOUNT_NAME_RULE", "DEFAULT_ACCOUNT", "is_account_name", "short_hash"]

DEFAULT_ACCOUNT: Final = "default"
ACCOUNT_NAME_RULE: Final = "1-64 characters: a-z, 0-9, '-' and '_', starting with a letter or digit"
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def is_account_name(value: str) -> bool:
    """True when ``value`` can name a login (and its directory) safely."""
    return _NAME.fullmatch(value) is not None


def short_hash(value: str) -> str:
    """``sha256:`` plus 12 hex digits of ``value``: how an account id is shown, never whole."""
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:12]
