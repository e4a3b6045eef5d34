"""The OAuth issuer codex signs in with: its endpoints and the calls the bridge makes.

Every call is synchronous (the CLI runs them directly; the bridge runs refreshes in a
worker thread under a file lock). No token ever reaches a message, a detail or a log
line: failures carry the HTTP status and, at most, the issuer's short error *code*.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

import httpx

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import JWT_AUTH_CLAIM, jwt_claims

__all__ = [
    "LOGIN_SUGGESTION",
    "DeviceCode",
    "IssuedTokens",
    "Issuer",
]

LOGIN_SUGGESTION: Final = "Run `imagegen-bridge login` to sign in again."
_SCOPE: Final = "openid profile email offline_access"
_MAX_ANSWER_BYTES: Final = 256 * 1024
_MAX_CODE_CHARS: Final = 64
_PERMANENT_REFRESH_CODES: Final = frozenset(
    {"refresh_token_expired", "refresh_token_reused", "refresh_token_invalidated"}
)


@dataclass(frozen=True, slots=True)
class IssuedTokens:
    """What the token endpoint returned (``repr`` redacts every token)."""

    id_token: str | None
    access_token: str | None
    refresh_token: str | None

    def __repr__(self) -> str:
        return "IssuedTokens(<redacted>)"

    __str__ = __repr__

    def account_id(self) -> str | None:
        """``chatgpt_account_id`` from the id token's claims, as codex stores it."""
        claims = jwt_claims(self.id_token or "") or {}
        auth = claims.get(JWT_AUTH_CLAIM)
        value = auth.get("chatgpt_account_id") if isinstance(auth, dict) else None
        return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class DeviceCode:
    """A pending device-code sign-in: what the person types, and where."""

    verification_url: str
    user_code: str
    device_auth_id: str
    interval_s: float

    def __repr__(self) -> str:
        return f"DeviceCode(verification_url={self.verification_url!r}, <redacted>)"


@dataclass(frozen=True, slots=True)
class Issuer:
    """The issuer's addresses and the public client id (all config values)."""

    issuer: str
    token_url: str
    client_id: str
    timeout_s: float

    @property
    def base(self) -> str:
        return self.issuer.rstrip("/")

    def authorize_url(self, *, redirect_uri: str, code_challenge: str, state: str) -> str:
        """The browser sign-in page, with the parameters codex sends (PKCE S256)."""
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": redirect_uri,
            "scope": _SCOPE,
            "code_challenge": code_challenge,
            "code_challenge_method": "S256",
            "id_token_add_organizations": "true",
            "codex_cli_simplified_flow": "true",
            "state": state,
            "originator": "codex_cli_rs",
        }
        return f"{self.base}/oauth/authorize?{urlencode(query)}"

    # -- device code ------------------------------------------------------------------

    def request_device_code(self) -> DeviceCode:
        """Ask for a user code (``/api/accounts/deviceauth/usercode``)."""
        status, body = self._post_json(
            f"{self.base}/api/accounts/deviceauth/usercode", {"client_id": self.client_id}
        )
        if status == 404:
            raise _login_error(
                "device_code_unsupported",
                "The issuer does not offer device-code sign-in; use `login --browser`.",
            )
        if status != 200:
            raise _issuer_error("device_code_request_failed", status, body)
        user_code = body.get("user_code") or body.get("usercode")
        device_auth_id = body.get("device_auth_id")
        if not _short_text(user_code) or not _short_text(device_auth_id, 4096):
            raise _login_error("device_code_malformed", "The issuer's device code is malformed.")
        assert isinstance(user_code, str)
        assert isinstance(device_auth_id, str)
        return DeviceCode(
            verification_url=f"{self.base}/codex/device",
            user_code=user_code,
            device_auth_id=device_auth_id,
            interval_s=_interval(body.get("interval")),
        )

    def poll_device_code(self, code: DeviceCode) -> tuple[str, str, str] | None:
        """One poll: ``(authorization_code, code_verifier, redirect_uri)`` or ``None`` (pending)."""
        status, body = self._post_json(
            f"{self.base}/api/accounts/deviceauth/token",
            {"device_auth_id": code.device_auth_id, "user_code": code.user_code},
        )
        if status in (403, 404):
            return None
        if status != 200:
            raise _issuer_error("device_code_failed", status, body)
        authorization_code = body.get("authorization_code")
        verifier = body.get("code_verifier")
        if not _short_text(authorization_code, 8192) or not _short_text(verifier, 1024):
            raise _login_error("device_code_malformed", "The issuer's answer is malformed.")
        assert isinstance(authorization_code, str)
        assert isinstance(verifier, str)
        return authorization_code, verifier, f"{self.base}/deviceauth/callback"

    # -- tokens -----------------------------------------------------------------------

    def exchange_code(self, *, code: str, code_verifier: str, redirect_uri: str) -> IssuedTokens:
        """Trade an authorization code for the three tokens (form-encoded, as OAuth says)."""
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": self.client_id,
            "code_verifier": code_verifier,
        }
        status, body = self._send(
            self.token_url,
            content=urlencode(form).encode("ascii"),
            content_type="application/x-www-form-urlencoded",
        )
        if status != 200:
            raise _issuer_error("token_exchange_failed", status, body)
        tokens = _tokens(body)
        if not (tokens.id_token and tokens.access_token and tokens.refresh_token):
            raise _login_error("token_exchange_malformed", "The issuer returned no tokens.")
        return tokens

    def refresh(self, refresh_token: str) -> IssuedTokens:
        """Spend ``refresh_token`` (single use) for new tokens.

        A 401, or one of the issuer's ``refresh_token_*`` codes, means the login is gone
        (expired, reused, revoked): ``authentication``, not retryable. Anything else is a
        retryable ``upstream`` failure: the refresh token may not have been spent.
        """
        status, body = self._post_json(
            self.token_url,
            {
                "client_id": self.client_id,
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
            },
        )
        if status == 200:
            tokens = _tokens(body)
            if not tokens.access_token:
                raise _login_error("refresh_malformed", "The issuer's refresh answer is malformed.")
            return tokens
        code = _error_code(body)
        if status == 401 or code in _PERMANENT_REFRESH_CODES:
            raise BridgeError(
                ErrorCode.AUTHENTICATION,
                "The login could not be refreshed: it expired, was revoked or was already used.",
                details={"reason": "refresh_rejected", **({"issuer_code": code} if code else {})},
                suggestions=(LOGIN_SUGGESTION,),
            )
        raise _issuer_error("refresh_failed", status, body)

    # -- HTTP -------------------------------------------------------------------------

    def _post_json(self, url: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return self._send(
            url, content=json.dumps(payload).encode(), content_type="application/json"
        )

    def _send(self, url: str, *, content: bytes, content_type: str) -> tuple[int, dict[str, Any]]:
        try:
            with (
                httpx.Client(timeout=self.timeout_s, follow_redirects=False) as client,
                client.stream(
                    "POST", url, content=content, headers={"Content-Type": content_type}
                ) as response,
            ):
                data = b""
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > _MAX_ANSWER_BYTES:
                        raise _login_error("answer_too_large", "The issuer's answer is too large.")
                status = response.status_code
        except httpx.HTTPError as exc:
            raise BridgeError(
                ErrorCode.UPSTREAM,
                "The sign-in service could not be reached.",
                retryable=True,
                details={"reason": "issuer_unreachable", "exception": type(exc).__name__},
            ) from None
        try:
            body = json.loads(data) if data else {}
        except (ValueError, RecursionError):
            body = {}
        return status, body if isinstance(body, dict) else {}


def _tokens(body: dict[str, Any]) -> IssuedTokens:
    def text(key: str) -> str | None:
        value = body.get(key)
        return value if _short_text(value, 64 * 1024) and isinstance(value, str) else None

    return IssuedTokens(text("id_token"), text("access_token"), text("refresh_token"))


def _short_text(value: object, limit: int = _MAX_CODE_CHARS) -> bool:
    return (
        isinstance(value, str) and 0 < len(value) <= limit and all("!" <= c <= "~" for c in value)
    )


def _interval(raw: object) -> float:
    try:
        value = float(str(raw).strip()) if raw is not None else 5.0
    except ValueError:
        value = 5.0
    return min(max(value, 0.0), 60.0)


def _error_code(body: dict[str, Any]) -> str | None:
    raw = body.get("error")
    if isinstance(raw, dict):
        raw = raw.get("code")
    if isinstance(raw, str) and _short_text(raw):
        return raw.lower()
    return None


def _login_error(reason: str, message: str) -> BridgeError:
    return BridgeError(
        ErrorCode.AUTHENTICATION,
        message,
        details={"reason": reason},
        suggestions=(LOGIN_SUGGESTION,),
    )


def _issuer_error(reason: str, status: int, body: dict[str, Any]) -> BridgeError:
    code = _error_code(body)
    details: dict[str, Any] = {"reason": reason, "http_status": status}
    if code:
        details["issuer_code"] = code
    return BridgeError(
        ErrorCode.UPSTREAM,
        f"The sign-in service answered HTTP {status}.",
        retryable=status >= 500 or status == 429,
        details=details,
    )
