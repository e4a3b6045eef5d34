"""Run the REAL codex CLI (``@openai/codex`` 0.169.0 and 0.171.0) offline against a loopback mock.

Both versions are installed by ``scripts/install-test-deps``, each under its own prefix
``.cache/codex-cli/<version>/``; the real-codex tests run once per version
(:data:`CODEX_VERSIONS`).

How it fits together:

* :class:`RealCodexHarness` prepares a throw-away ``CODEX_HOME`` with a fake ChatGPT
  ``auth.json`` (unsigned JWTs, plan ``plus``) and a self-signed certificate for
  ``127.0.0.1``, and writes a small wrapper script to use as the app-server
  ``executable``.
* The wrapper runs this file as a *launcher* (``real_codex.py launch …``) — inside
  ``scripts/loopback-only`` (a network namespace with nothing but loopback) when
  that works, so neither codex nor the mock can reach any other address. The launcher
  starts :class:`MockCodexBackend` (HTTPS, in a thread), writes ``config.toml`` with the
  mock's port (``chatgpt_base_url`` and the provider ``base_url`` point at it), then runs
  ``codex app-server`` with stdin/stdout passed straight through and
  ``CODEX_CA_CERTIFICATE`` trusting the mock. Without the namespace, dead HTTP(S) proxy
  settings catch any request that is not for 127.0.0.1.
* With ``--home-from-env`` the launcher uses the ``CODEX_HOME`` the bridge gave the child
  (one home per pool account, each prepared by :meth:`RealCodexHarness.add_home`), so
  several accounts can run their own codex; every logged request names its home.
* The mock's behaviour for ``/responses`` is read from ``<state>/mode`` at each request
  (``auto``: the ``image_gen.imagegen`` function-call flow plus the images API;
  ``policy``: ``response.failed`` with a content-policy error; ``http429``), so a test can
  switch it between turns. Every request is logged (secrets redacted) to
  ``<state>/requests.jsonl``.

Imports only the standard library at module level (``cryptography`` is used for the
certificate when installed, else the ``openssl`` CLI), so the launcher starts fast.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
CODEX_CACHE = REPO_ROOT / ".cache" / "codex-cli"
CODEX_VERSIONS = ("0.169.0", "0.171.0")
"""The codex releases the tier runs against: the one the port's Codex behaviour was first
measured on, and the current one (late 2026)."""
LOOPBACK_ONLY = REPO_ROOT / "scripts" / "loopback-only"
ACCOUNT_ID = "acct-imagebridge-test"
USER_ID = "user-imagebridge-test"
MOCK_PROMPT = "a small blue square (mock backend)"
SECRET_HEADERS = {"authorization", "chatgpt-account-id", "cookie", "x-api-key"}

if __name__ == "__main__" and str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.fake_codex.fake_codex import make_png  # noqa: E402

MOCK_PNG = make_png(8, 8, (20, 120, 220, 255))

# -- locating codex --------------------------------------------------------------------------


def codex_prefix(version: str) -> Path:
    """Where ``scripts/install-test-deps`` installs ``@openai/codex@<version>``."""
    return CODEX_CACHE / version


def find_codex_binary(version: str) -> Path | None:
    """The native codex ``version`` from ``scripts/install-test-deps``.

    ``$IMAGEBRIDGE_CODEX_BIN`` names one binary to use for every version instead (for a
    machine with its own codex; its version is then not checked).
    """
    configured = os.environ.get("IMAGEBRIDGE_CODEX_BIN")
    if configured:
        path = Path(configured)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    modules = codex_prefix(version) / "node_modules"
    for candidate in sorted(modules.glob("@openai/codex-*/vendor/*/bin/codex")):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    launcher = modules / ".bin" / "codex"
    return launcher if launcher.exists() else None


def skip_reason() -> str | None:
    """Why the real-codex tests are skipped here: only when ``node`` is absent.

    With node present, a missing or wrong codex CLI is a failure (see
    :func:`missing_codex_reason`), not a skip: ``scripts/install-test-deps`` installs it.
    """
    if shutil.which("node") is None:
        return "node is not installed (the real codex CLI tier needs node and npm)"
    return None


def installed_codex_version(version: str) -> str | None:
    """The version of ``@openai/codex`` installed under ``version``'s prefix, if any."""
    manifest = codex_prefix(version) / "node_modules" / "@openai" / "codex" / "package.json"
    try:
        found = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return found if isinstance(found, str) else None


def missing_codex_reason(version: str | None = None) -> str | None:
    """Why codex ``version`` (each of :data:`CODEX_VERSIONS` when ``None``) cannot be used
    although node is here, or ``None``."""
    for wanted in CODEX_VERSIONS if version is None else (version,):
        reason = _missing(wanted)
        if reason is not None:
            return reason
    return None


def _missing(version: str) -> str | None:
    where = f".cache/codex-cli/{version}"
    if find_codex_binary(version) is None:
        if os.environ.get("IMAGEBRIDGE_CODEX_BIN"):
            return "IMAGEBRIDGE_CODEX_BIN does not name an executable codex binary"
        return (
            f"node is installed but the codex CLI is not in {where} "
            f"(run scripts/install-test-deps to install @openai/codex@{version})"
        )
    if not os.environ.get("IMAGEBRIDGE_CODEX_BIN"):
        found = installed_codex_version(version)
        if found != version:
            return (
                f"the codex CLI in {where} is {found}, the tests want {version} "
                f"(remove {where} and run scripts/install-test-deps)"
            )
    return None


def require_codex_binary(version: str) -> Path:
    """Codex ``version``; fails the test (never skips it) when it is not there."""
    import pytest

    reason = missing_codex_reason(version)
    if reason is not None:
        pytest.fail(reason)
    binary = find_codex_binary(version)
    assert binary is not None
    return binary


def loopback_only_available() -> bool:
    """True when ``scripts/loopback-only`` can create a network namespace here."""
    if not LOOPBACK_ONLY.exists():
        return False
    try:
        done = subprocess.run([str(LOOPBACK_ONLY), "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


# -- credentials and TLS ---------------------------------------------------------------------


def _b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def fake_jwt(now: int | None = None) -> str:
    """An unsigned (``alg: none``) ChatGPT token whose claims enable the image tool."""
    issued = int(time.time()) if now is None else now
    claims = {
        "https://api.openai.com/auth": {
            "chatgpt_plan_type": "plus",
            "chatgpt_account_id": ACCOUNT_ID,
            "chatgpt_user_id": USER_ID,
            "user_id": USER_ID,
        },
        "https://api.openai.com/profile": {
            "email": "tester@example.invalid",
            "email_verified": True,
        },
        "email": "tester@example.invalid",
        "exp": issued + 30 * 86400,
        "iat": issued,
        "sub": USER_ID,
        "iss": "https://auth.openai.com",
    }
    return f"{_b64url({'alg': 'none', 'typ': 'JWT'})}.{_b64url(claims)}.c2ln"


def write_auth(home: Path) -> None:
    token = fake_jwt()
    auth = {
        "auth_mode": "chatgpt",
        "OPENAI_API_KEY": None,
        "tokens": {
            "id_token": token,
            "access_token": token,
            "refresh_token": "rt_imagebridge_fake",
            "account_id": ACCOUNT_ID,
        },
        "last_refresh": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    path = home / "auth.json"
    path.write_text(json.dumps(auth, indent=1), encoding="utf-8")
    path.chmod(0o600)


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for IP 127.0.0.1 (``cryptography``, else ``openssl``)."""
    cert, key = directory / "tls.crt", directory / "tls.key"
    try:
        _certificate_with_cryptography(cert, key)
    except ImportError:
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                "-keyout", str(key), "-out", str(cert), "-days", "2",
                "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-addext", "basicConstraints=critical,CA:FALSE",
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
    key.chmod(0o600)
    return cert, key


def _certificate_with_cryptography(cert_path: Path, key_path: Path) -> None:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def write_config(home: Path, origin: str) -> None:
    """``config.toml``: a ChatGPT-auth provider on the mock, every other origin on it too."""
    (home / "config.toml").write_text(
        f"""model = "gpt-5.5"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "read-only"
cli_auth_credentials_store = "file"
chatgpt_base_url = "{origin}/backend-api/"

[model_providers.mock]
name = "imagebridge mock Codex backend"
base_url = "{origin}/backend-api/codex"
wire_api = "responses"
requires_openai_auth = true
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 15000

[analytics]
enabled = false

[features]
apps = false
remote_plugin = false
tool_suggest = false
""",
        encoding="utf-8",
    )


# -- the mock backend ------------------------------------------------------------------------


def _sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events
    ).encode()


def _redact_headers(headers: Any) -> dict[str, str]:
    return {
        key.lower(): ("<redacted>" if key.lower() in SECRET_HEADERS else value)
        for key, value in headers.items()
    }


def _tool_names(body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            names.extend(f"{tool.get('name')}.{inner.get('name')}" for inner in tool["tools"])
        else:
            names.append(str(tool.get("name") or tool.get("type")))
    return names


def _input_images(body: dict[str, Any]) -> int:
    """How many images the request's messages carry (``input_image`` content parts)."""
    return sum(
        1
        for item in body.get("input") or []
        if isinstance(item, dict) and isinstance(item.get("content"), list)
        for part in item["content"]
        if isinstance(part, dict) and part.get("type") == "input_image"
    )


def _after_tool_output(body: dict[str, Any]) -> bool:
    items = [item for item in body.get("input") or [] if isinstance(item, dict)]
    last_user = max((n for n, item in enumerate(items) if item.get("role") == "user"), default=-1)
    return any(item.get("type") == "function_call_output" for item in items[last_user + 1 :])


class MockCodexBackend:
    """A loopback HTTPS stand-in for ``chatgpt.com/backend-api`` as codex 0.169 uses it."""

    def __init__(self, state: Path, cert: Path, key: Path, home: str = "") -> None:
        self.state = state
        self.home = home
        self._counter = 0
        self._lock = threading.Lock()
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                backend.handle(self, None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                backend.handle(self, body if isinstance(body, dict) else {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        self.origin = f"https://127.0.0.1:{self.port}"

    def serve_in_background(self) -> None:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def mode(self) -> str:
        try:
            return (self.state / "mode").read_text(encoding="utf-8").strip() or "auto"
        except OSError:
            return "auto"

    def _next(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}_{self._counter}"

    def _record(self, handler: BaseHTTPRequestHandler, body: dict[str, Any] | None) -> None:
        entry: dict[str, Any] = {
            "method": handler.command,
            "path": handler.path,
            "headers": _redact_headers(handler.headers),
            "mode": self.mode(),
            "home": self.home,
        }
        if body is not None:
            entry["tools"] = _tool_names(body)
            entry["follow_up"] = _after_tool_output(body)
            entry["keys"] = sorted(body)
            entry["input_items"] = len(body.get("input") or [])
            entry["input_images"] = _input_images(body)
        with self._lock, (self.state / "requests.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: bytes, kind: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def handle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any] | None) -> None:
        self._record(handler, body)
        path = handler.path.split("?")[0]
        if handler.command == "GET" and path.endswith("/wham/accounts/check"):
            account = {
                "id": ACCOUNT_ID,
                "account_user_id": USER_ID,
                "account_user_role": "standard-user",
                "structure": "personal",
                "plan_type": "plus",
                "is_zdr": False,
                "is_openai_internal": False,
                "workspace_backend_origin": "NO_CONSTRAINT",
                "account_routing_override": "NO_CONSTRAINT",
            }
            payload: dict[str, Any] = {
                "accounts": [account],
                "default_account_id": ACCOUNT_ID,
                "account_ordering": [ACCOUNT_ID],
            }
            self._send(handler, 200, json.dumps(payload).encode(), "application/json")
        elif handler.command == "GET" and path.endswith("/codex/models"):
            self._send(handler, 200, b'{"models": []}', "application/json")
        elif handler.command == "POST" and path.endswith("/codex/responses"):
            self._responses(handler, body or {})
        elif handler.command == "POST" and path.endswith(("/images/generations", "/images/edits")):
            payload = {
                "created": int(time.time()),
                "data": [{"b64_json": base64.b64encode(MOCK_PNG).decode()}],
            }
            self._send(handler, 200, json.dumps(payload).encode(), "application/json")
        else:
            self._send(handler, 404, b'{"error": {"message": "not found"}}', "application/json")

    def _responses(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        mode = self.mode()
        if mode == "http429":
            error = b'{"error": {"message": "slow down", "type": "rate_limit_exceeded"}}'
            self._send(handler, 429, error, "application/json")
            return
        response_id = self._next("resp")
        created: dict[str, Any] = {"type": "response.created", "response": {"id": response_id}}
        events: list[dict[str, Any]]
        if mode == "policy":
            failure = {
                "code": "content_policy_violation",
                "message": "Your request was rejected as a result of our safety system.",
            }
            failed = {"id": response_id, "status": "failed", "error": failure}
            events = [created, {"type": "response.failed", "response": failed}]
        elif _after_tool_output(body) or "image_gen.imagegen" not in _tool_names(body):
            events = [created, *self._message(response_id, "Image generated.")]
        else:
            call = {
                "type": "function_call",
                "id": self._next("fc"),
                "call_id": self._next("call"),
                "namespace": "image_gen",
                "name": "imagegen",
                "status": "completed",
                "arguments": json.dumps({"prompt": MOCK_PROMPT}),
            }
            events = [
                created,
                {"type": "response.output_item.added", "output_index": 0,
                 "item": {**call, "arguments": "", "status": "in_progress"}},
                {"type": "response.output_item.done", "output_index": 0, "item": call},
                self._completed(response_id, [call]),
            ]  # fmt: skip
        self._send(handler, 200, _sse(events), "text/event-stream")

    def _message(self, response_id: str, text: str) -> list[dict[str, Any]]:
        item = {
            "type": "message",
            "id": self._next("msg"),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        return [
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            self._completed(response_id, [item]),
        ]

    @staticmethod
    def _completed(response_id: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        return {
            "type": "response.completed",
            "response": {
                "id": response_id,
                "status": "completed",
                "output": output,
                "usage": usage,
            },
        }


# -- processes: which ones a test started, and proof that none is left ------------------------


def record_pids(state: Path, **pids: int) -> None:
    """Append ``{role: pid}`` to ``<state>/pids.jsonl`` so the test can check them later."""
    with (state / "pids.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps(pids) + "\n")


def _unreaped(pid: int) -> bool:
    """Running or a zombie not yet reaped: either way, it outlived whoever should end it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def processes_with_home(home: Path) -> list[int]:
    """Every live process whose environment names ``CODEX_HOME=<home>`` (codex and
    anything it started inherit it), found by scanning ``/proc``."""
    marker = f"CODEX_HOME={home}".encode()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


# -- the launcher (runs in place of `codex`, inside the namespace) -----------------------------


def _die_with_parent() -> None:
    import ctypes

    with_libc = ctypes.CDLL(None, use_errno=True)
    with_libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def launch(home: Path, state: Path, codex: Path, args: list[str]) -> int:
    """Start the mock, write the config for its port, run codex with our stdio."""
    backend = MockCodexBackend(state, home / "tls.crt", home / "tls.key", home.name)
    write_config(home, backend.origin)
    (state / "origin").write_text(backend.origin, encoding="utf-8")
    env = dict(os.environ)
    env.update(
        CODEX_HOME=str(home),
        CODEX_CA_CERTIFICATE=str(home / "tls.crt"),
        # Belt and braces: anything not for loopback goes to a proxy that does not exist.
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        ALL_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
    )
    child = subprocess.Popen(
        [str(codex), *args], env=env, preexec_fn=_die_with_parent
    )  # stdin/stdout/stderr inherited: the bridge talks to codex directly
    record_pids(state, launcher=os.getpid(), codex=child.pid)
    backend.serve_in_background()

    def forward(signum: int, _frame: Any) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    backend.server.shutdown()
    return code if code >= 0 else 128 - code


# -- what tests use --------------------------------------------------------------------------


@dataclass
class RealCodexHarness:
    """A throw-away CODEX_HOME, state folder and wrapper script for one test."""

    root: Path
    binary: Path
    isolated_network: bool

    def __post_init__(self) -> None:
        self.home = self.root / "codex-home"
        self.state = self.root / "mock-state"
        self.workdir = self.root / "work"
        self.homes: list[Path] = [self.home]
        for folder in (self.home, self.state, self.workdir):
            folder.mkdir(parents=True, exist_ok=True)
        write_auth(self.home)
        make_certificate(self.home)
        self.set_mode("auto")
        self.wrapper = self._wrapper("codex-wrapper", "--home", str(self.home))
        self.pool_wrapper = self._wrapper("codex-pool-wrapper", "--home-from-env")
        """For pool accounts: runs codex in the ``CODEX_HOME`` the bridge sets."""

    def _wrapper(self, name: str, *home: str) -> Path:
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "launch",
            *home,
            "--state", str(self.state),
            "--codex", str(self.binary),
            "--",
        ]  # fmt: skip
        if self.isolated_network:
            command.insert(0, str(LOOPBACK_ONLY))
        quoted = " ".join(_shell_quote(part) for part in command)
        wrapper = self.root / name
        wrapper.write_text(f'#!/bin/sh\nexec {quoted} "$@"\n', encoding="utf-8")
        wrapper.chmod(0o755)
        return wrapper

    def add_home(self, name: str) -> Path:
        """Another codex home (a pool account's): a login and the mock's certificate."""
        home = self.root / name
        home.mkdir(parents=True, exist_ok=True)
        write_auth(home)
        make_certificate(home)
        self.homes.append(home)
        return home

    def set_mode(self, mode: str) -> None:
        """``auto`` | ``policy`` | ``http429`` — read by the mock at each /responses call."""
        (self.state / "mode").write_text(mode, encoding="utf-8")

    def requests(self) -> list[dict[str, Any]]:
        path = self.state / "requests.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def origin(self) -> str | None:
        path = self.state / "origin"
        return path.read_text(encoding="utf-8") if path.exists() else None

    def started_pids(self) -> dict[str, list[int]]:
        """PIDs of every launcher and real codex process started for this test, by role."""
        path = self.state / "pids.jsonl"
        roles: dict[str, list[int]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                for role, pid in json.loads(line).items():
                    roles.setdefault(role, []).append(int(pid))
        return roles

    def codex_network_namespaces(self) -> set[str]:
        """The network namespaces the running codex processes live in (``/proc/<pid>/ns/net``)."""
        spaces: set[str] = set()
        for pid in self.started_pids().get("codex", []):
            with contextlib.suppress(OSError):
                spaces.add(os.readlink(f"/proc/{pid}/ns/net"))
        return spaces

    def assert_codex_is_confined(self) -> None:
        """With ``loopback-only``, codex must run in a network namespace other than ours."""
        if not self.isolated_network:
            return
        spaces = self.codex_network_namespaces()
        assert spaces, "no running codex process was recorded"
        assert os.readlink("/proc/self/ns/net") not in spaces, "codex shares our network"

    def leftovers(self) -> list[int]:
        """Started PIDs still alive, plus any process still carrying this CODEX_HOME."""
        started = {pid for pids in self.started_pids().values() for pid in pids}
        alive = {pid for pid in started if _unreaped(pid)}
        carrying = {pid for home in self.homes for pid in processes_with_home(home)}
        return sorted(alive | carrying)

    async def assert_no_process_left(self, timeout: float = 5.0) -> None:
        """Fail (after killing them) if any process this test started outlives it.

        A codex killed with its launcher is re-parented and reaped by init a moment later,
        so the check polls for up to ``timeout`` seconds before it decides.
        """
        codex = self.started_pids().get("codex", [])
        assert codex, "the launcher never recorded a codex PID"
        left = self.leftovers()
        for _ in range(max(1, round(timeout / 0.05))):  # bounded: reaping takes moments
            if not left:
                break
            await asyncio.sleep(0.05)
            left = self.leftovers()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"processes started by the test outlived it: {left}"


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("launch", help="run codex behind the mock backend (stdio passthrough)")
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--home", type=Path)
    where.add_argument("--home-from-env", action="store_true", help="use $CODEX_HOME")
    run.add_argument("--state", type=Path, required=True)
    run.add_argument("--codex", type=Path, required=True)
    run.add_argument("args", nargs=argparse.REMAINDER)
    parsed = parser.parse_args(argv)
    args = parsed.args[1:] if parsed.args[:1] == ["--"] else parsed.args
    home = Path(os.environ["CODEX_HOME"]) if parsed.home_from_env else parsed.home
    return launch(home, parsed.state, parsed.codex, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
