"""The two sign-in flows codex offers, ending in a stored own login.

* Device code (the default: works over SSH and in containers): the issuer hands out a
  user code, the person enters it at ``<issuer>/codex/device``, the bridge polls until
  the issuer returns an authorization code plus the PKCE verifier it made, then trades
  that for tokens.
* Browser (``--browser``): the bridge makes a PKCE pair and a random ``state``, listens
  on ``127.0.0.1:<callback_port>``, sends the person to ``<issuer>/oauth/authorize``
  and trades the code that arrives at ``/auth/callback`` for tokens. A callback with a
  wrong ``state`` is refused and the flow keeps waiting.

Both are blocking and bounded by the configured sign-in timeout.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Final
from urllib.parse import parse_qs, urlsplit

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.login.issuer import (
    LOGIN_SUGGESTION,
    DeviceCode,
    IssuedTokens,
    Issuer,
)
from imagebridge.providers.codex.login.store import (
    OwnLogin,
    auth_document,
    locked,
    write_auth_atomically,
)

__all__ = ["browser_login", "device_code_login", "pkce_pair", "store_tokens"]

_CALLBACK_PATH: Final = "/auth/callback"
_CLIENT_TIMEOUT_S: Final = 5.0
_SUCCESS_PAGE: Final = (
    b"<!doctype html><title>Signed in</title>"
    b"<p>Signed in. You can close this window and return to imagegen-bridge.</p>"
)


def pkce_pair() -> tuple[str, str]:
    """``(code_verifier, code_challenge)`` for PKCE S256."""
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(64)).rstrip(b"=").decode()
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def store_tokens(login: OwnLogin, tokens: IssuedTokens, lock_timeout_s: float) -> None:
    """Write a fresh sign-in as ``auth.json`` (under the lock: a refresh may be running)."""
    assert tokens.id_token
    assert tokens.access_token
    assert tokens.refresh_token
    document = auth_document(
        id_token=tokens.id_token,
        access_token=tokens.access_token,
        refresh_token=tokens.refresh_token,
        account_id=tokens.account_id(),
    )
    with locked(login, lock_timeout_s):
        write_auth_atomically(login, document)


def _timed_out() -> BridgeError:
    return BridgeError(
        ErrorCode.TIMEOUT,
        "The sign-in was not completed in time.",
        details={"reason": "login_timeout"},
        suggestions=(LOGIN_SUGGESTION,),
    )


def device_code_login(
    issuer: Issuer,
    *,
    timeout_s: float,
    show: Callable[[DeviceCode], None],
    sleep: Callable[[float], None] = time.sleep,
) -> IssuedTokens:
    """Run the device-code flow; ``show`` tells the person where to go and what to type."""
    code = issuer.request_device_code()
    show(code)
    deadline = time.monotonic() + timeout_s
    while True:
        answer = issuer.poll_device_code(code)
        if answer is not None:
            authorization_code, verifier, redirect_uri = answer
            return issuer.exchange_code(
                code=authorization_code, code_verifier=verifier, redirect_uri=redirect_uri
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timed_out()
        sleep(min(code.interval_s, remaining))


@dataclass(slots=True)
class _Callback:
    state: str
    code: str | None = None
    error: str | None = None
    arrived: threading.Event = field(default_factory=threading.Event)


def _handler(callback: _Callback) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = _CLIENT_TIMEOUT_S  # a silent local client cannot stall the sign-in

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path != _CALLBACK_PATH:
                self._answer(404, b"Not Found")
                return
            query = parse_qs(parts.query)
            state = query.get("state", [""])[0]
            if not secrets.compare_digest(state.encode(), callback.state.encode()):
                self._answer(400, b"State mismatch")
                return
            if query.get("error"):
                callback.error = query["error"][0][:64]
            else:
                callback.code = query.get("code", [""])[0] or None
                if callback.code is None:
                    callback.error = "missing_authorization_code"
            self._answer(
                200 if callback.code else 400, _SUCCESS_PAGE if callback.code else b"Sign-in failed"
            )
            callback.arrived.set()

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # the request line carries the code and state: never log it

    return Handler


def browser_login(
    issuer: Issuer,
    *,
    port: int,
    timeout_s: float,
    show: Callable[[str], None],
) -> IssuedTokens:
    """Run the browser flow; ``show`` gets the authorize URL (to open or print)."""
    verifier, challenge = pkce_pair()
    callback = _Callback(state=secrets.token_urlsafe(32))
    try:
        server = HTTPServer(("127.0.0.1", port), _handler(callback))
    except OSError:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            f"The sign-in callback port 127.0.0.1:{port} is in use.",
            details={"reason": "callback_port_in_use", "field": "accounts.login.callback_port"},
        ) from None
    actual_port = server.server_address[1]
    redirect_uri = f"http://localhost:{actual_port}{_CALLBACK_PATH}"
    server.timeout = 0.2
    deadline = time.monotonic() + timeout_s
    try:
        show(
            issuer.authorize_url(
                redirect_uri=redirect_uri, code_challenge=challenge, state=callback.state
            )
        )
        while not callback.arrived.is_set():
            if time.monotonic() >= deadline:
                raise _timed_out()
            server.handle_request()
    finally:
        server.server_close()
    if callback.code is None:
        raise BridgeError(
            ErrorCode.AUTHENTICATION,
            "The sign-in was refused.",
            details={"reason": "login_refused", "issuer_code": callback.error or "unknown"},
            suggestions=(LOGIN_SUGGESTION,),
        )
    return issuer.exchange_code(
        code=callback.code, code_verifier=verifier, redirect_uri=redirect_uri
    )
