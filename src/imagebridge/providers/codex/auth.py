"""Read-only borrowing of the Codex CLI's ChatGPT login (``$CODEX_HOME/auth.json``).

The codex CLI owns ``auth.json`` and refreshes it; the bridge only reads it, fresh on
every upstream call, so a refreshed token is picked up at once and no second copy of it
lives in memory longer than one request. Every failure is the same ``authentication``
error with a generic message: neither the path nor any token ever reaches a message,
a detail, a ``repr`` or a log line.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import stat
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "AUTH_FILE_NAME",
    "CODEX_LOGIN_SUGGESTION",
    "JWT_AUTH_CLAIM",
    "MAX_AUTH_FILE_BYTES",
    "CodexCredentials",
    "CredentialsLoader",
    "RefreshingCredentialsLoader",
    "codex_auth_path",
    "codex_home_path",
    "credentials_from_document",
    "jwt_claims",
    "load_codex_credentials",
    "load_codex_credentials_async",
    "read_auth_document",
]

AUTH_FILE_NAME: Final = "auth.json"
MAX_AUTH_FILE_BYTES: Final = 1024 * 1024
CODEX_LOGIN_SUGGESTION: Final = "Run `codex login` to sign in with your ChatGPT account."
JWT_AUTH_CLAIM: Final = "https://api.openai.com/auth"
_MAX_TOKEN_CHARS: Final = 64 * 1024
_MAX_ACCOUNT_ID_CHARS: Final = 256


@dataclass(frozen=True, slots=True)
class CodexCredentials:
    """The bearer token and optional ChatGPT account id for one upstream call.

    ``repr``/``str`` redact both values so the object can be logged or shown in a
    traceback without leaking them.
    """

    access_token: str = field(repr=False)
    account_id: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        account = "None" if self.account_id is None else "'<redacted>'"
        return f"CodexCredentials(access_token='<redacted>', account_id={account})"

    __str__ = __repr__

    def secret_values(self) -> tuple[str, ...]:
        """Values that must never appear in errors or logs (for redaction checks)."""
        return tuple(value for value in (self.access_token, self.account_id) if value)


CredentialsLoader = Callable[[], Awaitable[CodexCredentials]]
"""What HTTP clients take: an async callable that reads the login fresh each time."""


@runtime_checkable
class RefreshingCredentialsLoader(Protocol):
    """A :data:`CredentialsLoader` of a login the bridge owns, so it may refresh it.

    A borrowed home (codex owns it) is a plain loader and is never refreshed by the bridge.
    """

    async def __call__(self) -> CodexCredentials: ...

    async def refresh_rejected(self, rejected: CodexCredentials) -> CodexCredentials:
        """New credentials after the backend refused ``rejected`` with a 401."""
        ...


def codex_home_path(env: Mapping[str, str] | None = None) -> Path:
    """``$CODEX_HOME`` when set and non-blank, else ``~/.codex`` (``~`` from ``HOME``)."""
    environ = os.environ if env is None else env
    configured = environ.get("CODEX_HOME", "").strip()
    if configured:
        return Path(configured)
    home = environ.get("HOME", "").strip()
    return (Path(home) if home else Path.home()) / ".codex"


def codex_auth_path(codex_home: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Where ``auth.json`` lives for ``codex_home`` (or the environment's CODEX home)."""
    return (codex_home if codex_home is not None else codex_home_path(env)) / AUTH_FILE_NAME


def load_codex_credentials(
    codex_home: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    auth_file: Path | None = None,
    max_bytes: int = MAX_AUTH_FILE_BYTES,
) -> CodexCredentials:
    """Read and check ``auth.json`` now (blocking: call it from a worker thread).

    Checks, in order: a regular file (symlinks refused), at most ``max_bytes``, not
    writable by group or others, JSON, ``auth_mode == "chatgpt"``, a non-blank
    ``tokens.access_token``, then the optional ``tokens.account_id``; when that is absent
    the account id is taken from the access token's JWT claims (decoded, not verified).
    The file is never written.
    """
    path = auth_file if auth_file is not None else codex_auth_path(codex_home, env)
    return credentials_from_document(read_auth_document(path, max_bytes))


def read_auth_document(path: Path, max_bytes: int = MAX_AUTH_FILE_BYTES) -> dict[str, Any]:
    """The checked JSON object of one ``auth.json`` (blocking; same checks and errors as
    :func:`load_codex_credentials`)."""
    return _parse_document(_read_auth_file(path, max_bytes))


def credentials_from_document(document: Mapping[str, Any]) -> CodexCredentials:
    """The bearer token and account id an ``auth.json`` document holds (checked)."""
    if document.get("auth_mode") != "chatgpt":
        raise _auth_error("not_chatgpt", "Codex is not signed in with a ChatGPT account.")
    tokens = document.get("tokens")
    if not isinstance(tokens, dict):
        raise _auth_error("missing_tokens", "Codex credentials hold no tokens.")
    access_token = _clean_token(tokens.get("access_token"))
    account_id = _clean_account_id(tokens.get("account_id"), required_valid=True)
    if account_id is None:
        account_id = _account_id_from_jwt(access_token)
    return CodexCredentials(access_token=access_token, account_id=account_id)


async def load_codex_credentials_async(
    codex_home: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    auth_file: Path | None = None,
    max_bytes: int = MAX_AUTH_FILE_BYTES,
) -> CodexCredentials:
    """:func:`load_codex_credentials` in a worker thread, so the event loop never waits on disk."""
    return await asyncio.to_thread(
        load_codex_credentials, codex_home, env, auth_file=auth_file, max_bytes=max_bytes
    )


# -- file checks ------------------------------------------------------------------------


def _read_auth_file(path: Path, max_bytes: int) -> bytes:
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise _auth_error("missing", "Codex credentials were not found.") from None
    except OSError:
        raise _auth_error("unreadable", "Codex credentials could not be read.") from None
    _check_file_info(info, max_bytes)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        raise _auth_error("unreadable", "Codex credentials could not be read.") from None
    try:
        # Re-check the opened file: it may have been swapped since lstat.
        _check_file_info(os.fstat(fd), max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError:
        raise _auth_error("unreadable", "Codex credentials could not be read.") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise _auth_error("too_large", "Codex credentials file is too large.")
    return data


def _check_file_info(info: os.stat_result, max_bytes: int) -> None:
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
        raise _auth_error("not_regular_file", "Codex credentials are not a regular file.")
    if info.st_size > max_bytes:
        raise _auth_error("too_large", "Codex credentials file is too large.")
    if os.name == "posix" and info.st_mode & 0o022:
        raise _auth_error(
            "insecure_permissions",
            "Codex credentials file is writable by group or others; run `chmod 600` on it.",
        )


def _parse_document(data: bytes) -> dict[str, Any]:
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _auth_error("invalid_json", "Codex credentials are not valid JSON.") from None
    if not isinstance(document, dict):
        raise _auth_error("invalid_json", "Codex credentials are not a JSON object.")
    return document


# -- token checks -----------------------------------------------------------------------


def _is_header_safe(value: str) -> bool:
    """Visible ASCII only: anything else could not be sent as a header (or split one)."""
    return all("!" <= char <= "~" for char in value)


def _clean_token(raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise _auth_error("missing_access_token", "Codex credentials hold no access token.")
    token = raw.strip()
    if len(token) > _MAX_TOKEN_CHARS or not _is_header_safe(token):
        raise _auth_error("malformed_access_token", "Codex access token is malformed.")
    return token


def _clean_account_id(raw: object, *, required_valid: bool) -> str | None:
    """Blank or missing → ``None``; an unusable id is an error (file) or ignored (JWT)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if (
        isinstance(raw, str)
        and len(raw.strip()) <= _MAX_ACCOUNT_ID_CHARS
        and _is_header_safe(raw.strip())
    ):
        return raw.strip()
    if required_valid:
        raise _auth_error("malformed_account_id", "Codex account id is malformed.")
    return None


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The payload of a JWT, decoded and **not** verified; ``None`` if ``token`` is no JWT.

    Only for reading what the issuer says about the token (expiry, plan, account):
    nothing here is trusted for access decisions.
    """
    parts = token.split(".")
    if len(parts) < 2 or not parts[1] or len(parts[1]) > _MAX_TOKEN_CHARS:
        return None
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (binascii.Error, ValueError, UnicodeError, RecursionError):
        return None
    return claims if isinstance(claims, dict) else None


def _account_id_from_jwt(token: str) -> str | None:
    """``chatgpt_account_id`` from the token's claims; ``None`` if the token is no JWT."""
    claims = jwt_claims(token)
    if claims is None:
        return None
    auth_claim = claims.get(JWT_AUTH_CLAIM)
    if not isinstance(auth_claim, dict):
        return None
    return _clean_account_id(auth_claim.get("chatgpt_account_id"), required_valid=False)


def _auth_error(reason: str, message: str) -> BridgeError:
    return BridgeError(
        ErrorCode.AUTHENTICATION,
        message,
        details={"reason": reason},
        suggestions=(CODEX_LOGIN_SUGGESTION,),
    )
