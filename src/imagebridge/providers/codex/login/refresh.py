"""Credentials of an own login, refreshed before expiry and once after a 401.

Refresh tokens are single use: two processes that both spend the same one log the
person out. So every refresh happens under the login's ``flock``, and the file is read
again *after* the lock is taken: if another process refreshed meanwhile (the access
token changed, or is no longer close to expiry) its result is used and no second
issuer call is made. The new document is written atomically (temp + fsync + rename).

Only logins the bridge created (:class:`~imagebridge.providers.codex.login.store.OwnLogin`)
come here; a borrowed ``$CODEX_HOME`` belongs to codex and is only ever read
(:func:`imagebridge.providers.codex.auth.load_codex_credentials_async`).
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import (
    CodexCredentials,
    credentials_from_document,
    jwt_claims,
    read_auth_document,
)
from imagebridge.providers.codex.login.issuer import LOGIN_SUGGESTION, IssuedTokens, Issuer
from imagebridge.providers.codex.login.store import (
    OwnLogin,
    locked,
    utc_stamp,
    write_auth_atomically,
)

__all__ = ["OwnLoginCredentials", "RefreshPolicy", "access_token_expiry", "refresh_now"]


@dataclass(frozen=True, slots=True)
class RefreshPolicy:
    """When to refresh and how long to wait for another process's refresh."""

    margin_s: float = 300.0
    lock_timeout_s: float = 30.0


def access_token_expiry(document: dict[str, Any]) -> float | None:
    """The access token's ``exp`` (epoch seconds), ``None`` when it carries none."""
    tokens = document.get("tokens")
    token = tokens.get("access_token") if isinstance(tokens, dict) else None
    claims = jwt_claims(token) if isinstance(token, str) else None
    exp = claims.get("exp") if claims else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def _due(document: dict[str, Any], margin_s: float, now: float) -> bool:
    expiry = access_token_expiry(document)
    return expiry is not None and expiry - margin_s <= now


def _access_token(document: dict[str, Any]) -> str | None:
    tokens = document.get("tokens")
    token = tokens.get("access_token") if isinstance(tokens, dict) else None
    return token if isinstance(token, str) else None


def refresh_now(
    login: OwnLogin,
    issuer: Issuer,
    policy: RefreshPolicy,
    *,
    rejected_token: str | None = None,
    clock: Callable[[], float] = time.time,
) -> CodexCredentials:
    """The login's credentials, refreshed first when due (blocking: run it in a thread).

    Without ``rejected_token`` a refresh happens when the access token expires within
    the margin. With it (the backend answered 401 to that token) a refresh happens unless
    the file already holds a different access token, which means another process has
    refreshed since that token was read.
    """
    document = _read(login)
    if rejected_token is None and not _due(document, policy.margin_s, clock()):
        return credentials_from_document(document)
    with locked(login, policy.lock_timeout_s):
        document = _read(login)
        if rejected_token is not None:
            if _access_token(document) != rejected_token:
                return credentials_from_document(document)
        elif not _due(document, policy.margin_s, clock()):
            return credentials_from_document(document)
        updated = _merged(document, issuer.refresh(_refresh_token(document)), clock())
        write_auth_atomically(login, updated)
    return credentials_from_document(updated)


def _read(login: OwnLogin) -> dict[str, Any]:
    """The login's document; a missing one says which ``login`` command creates it."""
    try:
        return read_auth_document(login.auth_file)
    except BridgeError as error:
        if error.details.get("reason") != "missing":
            raise
        raise BridgeError(
            ErrorCode.AUTHENTICATION,
            f"The login '{login.name}' is not stored.",
            details={"reason": "missing", "account": login.name},
            suggestions=(f"Run `imagegen-bridge login --account {login.name}`.",),
        ) from None


def _refresh_token(document: dict[str, Any]) -> str:
    tokens = document.get("tokens")
    token = tokens.get("refresh_token") if isinstance(tokens, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise BridgeError(
            ErrorCode.AUTHENTICATION,
            "The login holds no refresh token.",
            details={"reason": "missing_refresh_token"},
            suggestions=(LOGIN_SUGGESTION,),
        )
    return token.strip()


def _merged(document: dict[str, Any], issued: IssuedTokens, now: float) -> dict[str, Any]:
    """The document with what the issuer returned; a token it did not return is kept."""
    updated = copy.deepcopy(document)
    tokens = updated.setdefault("tokens", {})
    for key in ("id_token", "access_token", "refresh_token"):
        value = getattr(issued, key)
        if value:
            tokens[key] = value
    account_id = issued.account_id()
    if account_id:
        tokens["account_id"] = account_id
    updated["last_refresh"] = utc_stamp(now)
    return updated


class OwnLoginCredentials:
    """The :data:`~imagebridge.providers.codex.auth.CredentialsLoader` of an own login.

    Calling it reads the file fresh (as for a borrowed home) and refreshes first when the
    access token is about to expire. :meth:`refresh_rejected` is the one refresh after a
    401 (see :func:`imagebridge.providers.codex.guarded_call.refreshable`).
    """

    def __init__(
        self,
        login: OwnLogin,
        issuer: Issuer,
        policy: RefreshPolicy,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.login = login
        self._issuer = issuer
        self._policy = policy
        self._clock = clock

    def __repr__(self) -> str:
        return f"OwnLoginCredentials(name={self.login.name!r})"

    async def __call__(self) -> CodexCredentials:
        return await asyncio.to_thread(
            refresh_now, self.login, self._issuer, self._policy, clock=self._clock
        )

    async def refresh_rejected(self, rejected: CodexCredentials) -> CodexCredentials:
        """New credentials after the backend refused ``rejected`` with a 401."""
        return await asyncio.to_thread(
            refresh_now,
            self.login,
            self._issuer,
            self._policy,
            rejected_token=rejected.access_token,
            clock=self._clock,
        )
