"""A loopback mock of the OAuth issuer codex signs in with (``auth.openai.com``).

:class:`MockIssuer` listens on ``127.0.0.1`` (a free port) in a background thread and
serves what the bridge's sign-in and refresh use:

* ``POST /api/accounts/deviceauth/usercode`` → a user code; ``POST …/deviceauth/token``
  → 403 (pending) for the first :attr:`MockIssuer.pending_polls` polls, then an
  authorization code with the PKCE pair the issuer made;
* ``GET /oauth/authorize`` → the "browser": remembers the PKCE challenge and redirects
  (302) to ``redirect_uri`` with a code and the caller's ``state``;
* ``POST /oauth/token`` → ``authorization_code`` (checks the PKCE verifier) or
  ``refresh_token`` (each refresh token works **once**; a reused one gets 401
  ``refresh_token_reused``, as the real issuer does). :attr:`refresh_delay_s` slows
  refreshes so concurrent ones overlap.

Tokens are unsigned JWTs with an ``exp`` :attr:`access_ttl_s` ahead and the ChatGPT
claims codex reads (plan, account id, e-mail). Every call is counted by route.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final
from urllib.parse import parse_qs, urlencode, urlsplit

from imagebridge.providers.codex.login.store import OwnLogin, auth_document, write_auth_atomically
from tests.support.codex_backend import make_jwt

__all__ = ["ISSUED_ACCOUNT_ID", "ISSUED_EMAIL", "MockIssuer"]

ISSUED_ACCOUNT_ID: Final = "acct-SECRET-issued-91d2"
ISSUED_EMAIL: Final = "person-SECRET@example.invalid"
CLIENT_ID: Final = "app_test_client"


class MockIssuer:
    """The mock issuer; use as ``with MockIssuer() as issuer:``."""

    def __init__(self, *, access_ttl_s: float = 3600.0, plan: str = "plus") -> None:
        self.access_ttl_s = access_ttl_s
        self.plan = plan
        self.pending_polls = 1
        self.refresh_delay_s = 0.0
        self.calls: Counter[str] = Counter()
        self.issued_access_tokens: list[str] = []
        self.next_access_tokens: list[str] = []
        """Access tokens to hand out next (in order) instead of generated ones."""
        self._lock = threading.Lock()
        self._refresh_tokens: set[str] = set()
        self._codes: dict[str, str | None] = {}  # authorization code → PKCE challenge
        self._device: dict[str, int] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> MockIssuer:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def origin(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return f"{self.origin}/oauth/token"

    def config_sets(self) -> list[str]:
        """``--set`` strings pointing ``[accounts.login]`` here."""
        return [
            f'accounts.login.issuer="{self.origin}"',
            f'accounts.login.token_url="{self.token_url}"',
            f'accounts.login.client_id="{CLIENT_ID}"',
            "accounts.login.callback_port=0",
            "accounts.login.device_code_timeout_secs=30",
        ]

    # -- tokens -------------------------------------------------------------------------

    def issue(self) -> dict[str, str]:
        """A fresh token set; its refresh token is valid once."""
        with self._lock:
            now = int(time.time())
            auth = {"chatgpt_plan_type": self.plan, "chatgpt_account_id": ISSUED_ACCOUNT_ID}
            if self.next_access_tokens:
                access = self.next_access_tokens.pop(0)
            else:
                access = make_jwt(
                    {
                        "exp": now + int(self.access_ttl_s),
                        "jti": secrets.token_hex(8),
                        "https://api.openai.com/auth": auth,
                    }
                )
            refresh = "rt_SECRET_" + secrets.token_hex(12)
            self._refresh_tokens.add(refresh)
            self.issued_access_tokens.append(access)
            id_token = make_jwt(
                {"exp": now + 3600, "email": ISSUED_EMAIL, "https://api.openai.com/auth": auth}
            )
            return {"id_token": id_token, "access_token": access, "refresh_token": refresh}

    def seed_refresh_token(self, token: str) -> None:
        """Accept ``token`` once (for logins written by a test)."""
        with self._lock:
            self._refresh_tokens.add(token)

    def seed_login(
        self, login: OwnLogin, *, refresh_token: str, expires_in_s: float, label: str = "seeded"
    ) -> str:
        """Store ``login`` as if signed in here: its access token (returned) expires in
        ``expires_in_s`` and ``refresh_token`` is accepted once."""
        access = make_jwt({"exp": int(time.time() + expires_in_s), "jti": label})
        self.seed_refresh_token(refresh_token)
        write_auth_atomically(
            login,
            auth_document(
                id_token=make_jwt({"email": "x@example.invalid"}),
                access_token=access,
                refresh_token=refresh_token,
                account_id="acct-seeded",
            ),
        )
        return access

    def _spend(self, token: str) -> bool:
        with self._lock:
            if token in self._refresh_tokens:
                self._refresh_tokens.remove(token)
                return True
            return False


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _handler(issuer: MockIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if parts.path != "/oauth/authorize":
                self._json(404, {"error": "not_found"})
                return
            issuer.calls["authorize"] += 1
            query = {key: values[0] for key, values in parse_qs(parts.query).items()}
            code = "ac_" + secrets.token_hex(8)
            issuer._codes[code] = query.get("code_challenge")
            target = (
                query["redirect_uri"] + "?" + urlencode({"code": code, "state": query["state"]})
            )
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            raw = self._body()
            if path == "/api/accounts/deviceauth/usercode":
                issuer.calls["usercode"] += 1
                device_id = "dev_" + secrets.token_hex(6)
                issuer._device[device_id] = 0
                self._json(
                    200, {"device_auth_id": device_id, "user_code": "ABCD-1234", "interval": "0"}
                )
            elif path == "/api/accounts/deviceauth/token":
                issuer.calls["device_poll"] += 1
                body = json.loads(raw)
                polls = issuer._device.get(body.get("device_auth_id"), -1)
                if polls < 0:
                    self._json(400, {"error": "unknown_device"})
                    return
                issuer._device[body["device_auth_id"]] = polls + 1
                if polls < issuer.pending_polls:
                    self._json(403, {"error": "authorization_pending"})
                    return
                verifier = secrets.token_urlsafe(48)
                code = "ac_" + secrets.token_hex(8)
                issuer._codes[code] = _challenge(verifier)
                self._json(
                    200,
                    {
                        "authorization_code": code,
                        "code_challenge": _challenge(verifier),
                        "code_verifier": verifier,
                    },
                )
            elif path == "/oauth/token":
                self._token(raw)
            else:
                self._json(404, {"error": "not_found"})

        def _token(self, raw: bytes) -> None:
            if self.headers.get("Content-Type", "").startswith("application/json"):
                body = json.loads(raw)
            else:
                body = {key: values[0] for key, values in parse_qs(raw.decode()).items()}
            if body.get("client_id") != CLIENT_ID:
                self._json(400, {"error": "invalid_client"})
                return
            grant = body.get("grant_type")
            if grant == "authorization_code":
                issuer.calls["exchange"] += 1
                challenge = issuer._codes.pop(body.get("code", ""), "missing")
                if challenge == "missing" or challenge != _challenge(body.get("code_verifier", "")):
                    self._json(400, {"error": "invalid_grant"})
                    return
                self._json(200, issuer.issue())
            elif grant == "refresh_token":
                issuer.calls["refresh"] += 1
                time.sleep(issuer.refresh_delay_s)
                if not issuer._spend(body.get("refresh_token", "")):
                    self._json(401, {"error": {"code": "refresh_token_reused"}})
                    return
                self._json(200, issuer.issue())
            else:
                self._json(400, {"error": "unsupported_grant_type"})

    return Handler
