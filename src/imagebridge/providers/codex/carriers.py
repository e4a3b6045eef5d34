"""Which carrier chat model a ChatGPT login accepts, learnt once and then reused.

The Responses path needs a chat model to call the image tool. Some plans refuse the
preferred one with a 400 before any work runs (docs/providers.md, "Codex backend, as
measured"), so the next model in the configured order is tried; the accepted one is
remembered for that login, and its later requests go straight to it (one upstream call,
not a refusal first every time).
Logins are keyed by a hash of the account id (or token): nothing identifying is kept.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from imagebridge.providers.codex.auth import CodexCredentials

__all__ = ["CarrierMemory", "login_key"]

MAX_REMEMBERED_LOGINS: Final = 256


def login_key(credentials: CodexCredentials) -> str:
    """A stable, non-reversible key for the login behind ``credentials``."""
    identity = credentials.account_id or credentials.access_token
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()


class CarrierMemory:
    """The carrier order and, per login, the index of the carrier the plan accepted."""

    def __init__(self, order: Sequence[str], *, max_logins: int = MAX_REMEMBERED_LOGINS) -> None:
        unique = tuple(dict.fromkeys(name for name in order if name))
        if not unique:
            raise ValueError("at least one carrier model is needed")
        self.order = unique
        self._max_logins = max(max_logins, 1)
        self._accepted: OrderedDict[str, int] = OrderedDict()

    def start(self, login: str) -> int:
        """Where to begin for ``login``: its accepted carrier, else the first."""
        return self._accepted.get(login, 0)

    def accept(self, login: str, index: int) -> None:
        """``login`` was served by carrier ``index``; the oldest login is forgotten first."""
        self._accepted[login] = index
        self._accepted.move_to_end(login)
        while len(self._accepted) > self._max_logins:
            self._accepted.popitem(last=False)

    def remembered(self, login: str) -> str | None:
        index = self._accepted.get(login)
        return None if index is None else self.order[index]

    def snapshot(self, login: str | None) -> dict[str, Any]:
        """For diagnostics: the order, the current login's carrier, how many are known."""
        return {
            "order": list(self.order),
            "current_login": None if login is None else self.remembered(login),
            "remembered_logins": len(self._accepted),
        }
