"""A real loopback HTTP mock of the Codex backend (``chatgpt.com/backend-api``) for tests.

:class:`CodexBackend` listens on ``127.0.0.1`` (a free port) in a background thread and
serves the routes the bridge uses:

* ``POST /backend-api/codex/responses`` — SSE. ``ok`` replays
  ``fixtures/codex-responses/success.sse`` with a real image (Pillow, at the requested
  ``size`` when it is ``WxH``, else :attr:`CodexBackend.image_size`) as every partial and
  final ``result``;
* ``POST /backend-api/codex/images/generations`` and ``…/images/edits`` — JSON;
* ``GET /backend-api/wham/usage`` — the plan's usage windows.

Each call takes the next scripted :class:`Behaviour` of its route (:meth:`CodexBackend.script`)
or the route's default (``ok``). Every request is recorded with its JSON body and its
headers, secrets replaced by ``<redacted>`` plus a SHA-256 so tests can check which token
was sent, and counted per route. Generation answers carry the ``x-codex-*`` rate-limit
headers the real backend sends. Responses use ``Connection: close`` and chunked SSE, so an
abrupt disconnect is visible to the client exactly as with a real peer.

Use it as a context manager or through the ``codex_backend`` pytest fixture (registered
for the whole suite by ``tests/conftest.py``). ``codex_bridge`` / ``codex_bridge_factory``
build the real application (engine, fan-out, breakers, materializer) with both Codex
providers pointed at the mock over HTTP and ``CODEX_HOME`` holding a fake login.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import re
import socket
import struct
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, get_args
from urllib.parse import urlsplit

import pytest
from PIL import Image, ImageDraw

from tests.support.fixture_files import CODEX_SUCCESS_SSE

__all__ = [
    "BRIDGE_ACCOUNT",
    "BRIDGE_TOKEN",
    "FIXTURE_SSE_PATH",
    "REDACTED",
    "Behaviour",
    "BehaviourKind",
    "CodexBackend",
    "CodexBridge",
    "MockLogin",
    "MockQuota",
    "RecordedRequest",
    "Route",
    "bridge_sets",
    "codex_backend_fixture",
    "codex_bridge",
    "codex_bridge_factory",
    "codex_responses_sets",
    "make_jwt",
    "token_sha256",
    "with_c2pa_chunk",
    "write_codex_auth",
]

FIXTURE_SSE_PATH: Final = CODEX_SUCCESS_SSE
REDACTED: Final = "<redacted>"
_SECRET_HEADERS: Final = frozenset({"authorization", "chatgpt-account-id", "cookie"})
_MAX_REQUEST_BYTES: Final = 256 * 1024 * 1024
_MAX_SIDE: Final = 4096

BehaviourKind = Literal[
    "ok",
    "slow_ok",
    "http_400",
    "http_401",
    "http_403",
    "http_429",
    "http_500",
    "http_502",
    "http_503",
    "stall",
    "stall_mid_stream",
    "disconnect_before_first_byte",
    "disconnect_mid_stream",
    "malformed_json",
    "failed_image_call",
    "completed_without_image",
    "content_policy_refusal",
    "refusal_message",
    "usage_limit_in_stream",
    "failed_after_partial",
    "final_generating_no_completed",
    "ends_without_image",
    "repeated_image",
    "redirect",
]
Route = Literal["responses", "images_generations", "images_edits", "usage"]
ROUTES: Final[tuple[Route, ...]] = get_args(Route)
_PATHS: Final[dict[str, tuple[str, Route]]] = {
    "/backend-api/codex/responses": ("POST", "responses"),
    "/backend-api/codex/images/generations": ("POST", "images_generations"),
    "/backend-api/codex/images/edits": ("POST", "images_edits"),
    "/backend-api/wham/usage": ("GET", "usage"),
}


@dataclass(frozen=True, slots=True)
class Behaviour:
    """What the mock does with one call. ``seconds`` is the delay of ``slow_ok``."""

    kind: BehaviourKind
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in get_args(BehaviourKind):
            raise ValueError(f"unknown mock behaviour {self.kind!r}")

    @classmethod
    def slow_ok(cls, seconds: float) -> Behaviour:
        return cls("slow_ok", seconds)


def _as_behaviour(value: Behaviour | str) -> Behaviour:
    return value if isinstance(value, Behaviour) else Behaviour(value)  # type: ignore[arg-type]


@dataclass(slots=True)
class MockQuota:
    """The plan state the mock reports in headers, 429 bodies and ``wham/usage``."""

    plan_type: str = "plus"
    primary_used_percent: float = 12.0
    primary_window_minutes: int = 300
    primary_resets_in_s: int = 3_600
    secondary_used_percent: float = 40.0
    secondary_window_minutes: int = 10_080
    secondary_resets_in_s: int = 400_000
    limit_resets_in_s: int = 1_800
    """For 429 / in-stream usage-limit answers: seconds until ``resets_at``."""
    image_used_percent: float | None = None
    """When set, the separate image quota (limit id ``image_gen``) is reported too:
    ``x-image-gen-primary-*`` headers and an ``additional_rate_limits`` entry."""
    image_window_minutes: int = 1_440
    image_resets_in_s: int = 7_200


@dataclass(slots=True)
class MockLogin:
    """One ChatGPT login the mock knows by its bearer token: its own plan state and
    scripted behaviours (used before the backend-wide ones)."""

    quota: MockQuota = field(default_factory=MockQuota)
    queues: dict[str, deque[Behaviour]] = field(default_factory=dict)
    defaults: dict[str, Behaviour] = field(default_factory=dict)
    refused_models: set[str] = field(default_factory=set)
    """Carrier models this login's plan refuses (as :attr:`CodexBackend.refused_models`)."""

    def script(self, *behaviours: Behaviour | str, route: Route = "responses") -> None:
        """Queue behaviours for this login's next calls of ``route``."""
        self.queues.setdefault(route, deque()).extend(_as_behaviour(b) for b in behaviours)

    def set_default(self, behaviour: Behaviour | str, *, route: Route = "responses") -> None:
        """What this login's calls of ``route`` get once its queue is empty."""
        self.defaults[route] = _as_behaviour(behaviour)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the mock saw it (secrets already redacted)."""

    method: str
    path: str
    route: Route | None
    query: str
    headers: dict[str, str]
    authorization_sha256: str | None
    account_id_sha256: str | None
    body: Any
    body_bytes: int
    behaviour: str
    received_at: float = field(default=0.0)

    @property
    def has_bearer(self) -> bool:
        return self.authorization_sha256 is not None

    def sent_token(self, token: str) -> bool:
        """Did this request carry ``Authorization: Bearer <token>``?"""
        return self.authorization_sha256 == token_sha256(token)

    def sent_account_id(self, account_id: str) -> bool:
        return self.account_id_sha256 == token_sha256(account_id)


def token_sha256(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


# -- images --------------------------------------------------------------------------------


@lru_cache(maxsize=32)
def _image_b64(
    width: int, height: int, image_format: str, transparent: bool, variant: int = 0
) -> str:
    """A small, valid image: a coloured canvas with a square, alpha when transparent.

    ``variant`` shades the square, so successive previews differ as real ones do."""
    mode = "RGBA" if transparent and image_format != "jpeg" else "RGB"
    background = (0, 0, 0, 0) if mode == "RGBA" else (40, 90, 200)
    image = Image.new(mode, (width, height), background)
    draw = ImageDraw.Draw(image)
    inset_x, inset_y = max(width // 4, 0), max(height // 4, 0)
    shade = (230 - 40 * variant) % 256
    fill = (shade, 120, 30, 255) if mode == "RGBA" else (shade, 120, 30)
    draw.rectangle((inset_x, inset_y, width - inset_x - 1, height - inset_y - 1), fill=fill)
    buffer = io.BytesIO()
    image.save(buffer, format={"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}[image_format])
    return base64.b64encode(buffer.getvalue()).decode("ascii")


_MEASURED_CANVASES: Final = {(16, 9): (1672, 941), (9, 16): (941, 1672), (1, 1): (1254, 1254)}
_CANVAS_PIXELS: Final = 1254 * 1254
_ASPECT_LINE: Final = re.compile(r"Aspect ratio: ([1-9][0-9]{0,3}):([1-9][0-9]{0,3})\.\s*$")


def _canvas_for(prompt: object) -> tuple[int, int]:
    """The canvas the real images route draws for the prompt's last aspect line (square
    when there is none)."""
    match = _ASPECT_LINE.search(prompt) if isinstance(prompt, str) else None
    if match is None:
        return _MEASURED_CANVASES[(1, 1)]
    ratio = (int(match.group(1)), int(match.group(2)))
    if ratio in _MEASURED_CANVASES:
        return _MEASURED_CANVASES[ratio]
    width = min(round((_CANVAS_PIXELS * ratio[0] / ratio[1]) ** 0.5), _MAX_SIDE)
    return width, max(1, min(round(width * ratio[1] / ratio[0]), _MAX_SIDE))


@lru_cache(maxsize=32)
def with_c2pa_chunk(png_b64: str) -> str:
    """The PNG with a (fake) C2PA ``caBX`` chunk after ``IHDR``: a JUMBF box header and
    filler, enough to be recognised, not a signed manifest."""
    data = base64.b64decode(png_b64)
    ihdr_end = 8 + 8 + 13 + 4
    body = b"\x00\x00\x00\x28jumb\x00\x00\x00\x20jumdc2pa" + b"\x00" * 24
    chunk = struct.pack(">I", len(body)) + b"caBX" + body
    chunk += struct.pack(">I", zlib.crc32(b"caBX" + body))
    return base64.b64encode(data[:ihdr_end] + chunk + data[ihdr_end:]).decode("ascii")


def _partial_b64() -> str:
    """A preview that differs from every final image the mock sends."""
    return _image_b64(8, 8, "png", False)


def _parse_size(raw: object, default: tuple[int, int]) -> tuple[int, int]:
    if isinstance(raw, str) and "x" in raw:
        width_text, _, height_text = raw.partition("x")
        if width_text.isdigit() and height_text.isdigit():
            width, height = int(width_text), int(height_text)
            if 0 < width <= _MAX_SIDE and 0 < height <= _MAX_SIDE:
                return width, height
    return default


# -- the backend ---------------------------------------------------------------------------


class CodexBackend:
    """The mock server. Start with ``with CodexBackend() as backend:`` (or :meth:`start`)."""

    def __init__(
        self,
        *,
        expected_token: str | None = None,
        image_size: tuple[int, int] = (64, 64),
        honour_output_format: bool = False,
        honour_size: bool = True,
        report_usage: bool = True,
        stall_timeout_s: float = 30.0,
        sse_content_type: str | None = "text/event-stream",
        fixture_path: Path = FIXTURE_SSE_PATH,
    ) -> None:
        self.expected_token = expected_token
        """When set, any other bearer token gets a 401 (as an expired login would)."""
        self.image_size = image_size
        self.honour_output_format = honour_output_format
        self.honour_size = honour_size
        """Off: every image is :attr:`image_size`, whatever size was asked (as the real
        images route does)."""
        self.ignore_size_on: set[Route] = set()
        """Routes that ignore ``size`` even with ``honour_size`` on (every image is
        :attr:`image_size` there): one transport honours a size, the other does not."""
        self.c2pa = False
        """On: every PNG carries a C2PA manifest chunk (``caBX``), as real Codex PNGs do."""
        self.canvas_from_prompt = False
        """On (with ``honour_size`` off): the images route's canvas follows the prompt's
        "Aspect ratio: W:H." line at about 1.57 MP, as the real route does (16:9 →
        1672×941, 1:1 → 1254×1254; ShalomObongo/codex-imagegen-mcp docs/BACKEND.md)."""
        self.report_usage = report_usage
        """Off: answers carry no token usage."""
        """Off: always PNG, as the real backend does; on: the requested format."""
        self.stall_timeout_s = stall_timeout_s
        self.sse_content_type = sse_content_type
        """``None`` omits ``Content-Type`` on SSE success, as the private endpoint may."""
        self.image_gen_usage: dict[str, Any] | None = None
        """When set, ``response.completed`` carries it as ``response.tool_usage.image_gen``
        (where the real backend reports the image's own cost)."""
        self.refused_models: set[str] = set()
        """Carrier models this "plan" refuses: a ``/responses`` call naming one gets the
        real backend's 400 ``{"detail": "The '<model>' model is not supported when using
        Codex with a ChatGPT account."}`` (no scripted behaviour is used up)."""
        self.quota = MockQuota()
        self.logins: dict[str, MockLogin] = {}
        """Logins with their own plan state and scripts, by bearer token (:meth:`login`)."""
        self.usage_extra: dict[str, Any] = {
            "account_id": "acct-mock-secret-0001",
            "user_id": "user-mock-secret",
            "email": "mock-user@example.invalid",
        }
        """Identifying fields the real ``wham/usage`` answer carries; clients must drop them."""
        self._fixture_path = fixture_path
        self._cond = threading.Condition()
        self._queues: dict[Route, deque[Behaviour]] = {route: deque() for route in ROUTES}
        self._defaults: dict[Route, Behaviour] = {route: Behaviour("ok") for route in ROUTES}
        self._requests: list[RecordedRequest] = []
        self._release_generation = 0
        self._closing = False
        self._server: _Server | None = None
        self._serve_thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> CodexBackend:
        if self._server is not None:
            return self
        self._server = _Server(self)
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="codex-backend-mock",
            daemon=True,
        )
        self._serve_thread.start()
        return self

    def close(self) -> None:
        """Stop serving; stalled and slow calls are cut off, handler threads joined."""
        server = self._server
        if server is None:
            return
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        server.shutdown()
        server.abort_connections()
        server.server_close()
        server.join_handlers(timeout=5.0)
        if self._serve_thread is not None:
            self._serve_thread.join(timeout=5.0)
        self._server = None

    def __enter__(self) -> CodexBackend:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- addresses ---------------------------------------------------------------------------

    @property
    def origin(self) -> str:
        if self._server is None:
            raise RuntimeError("the mock Codex backend is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """``…/backend-api`` — the ChatGPT backend root."""
        return f"{self.origin}/backend-api"

    @property
    def codex_base_url(self) -> str:
        """``…/backend-api/codex`` — what the images provider takes as ``base_url``."""
        return f"{self.base_url}/codex"

    @property
    def responses_url(self) -> str:
        return f"{self.codex_base_url}/responses"

    @property
    def images_generations_url(self) -> str:
        return f"{self.codex_base_url}/images/generations"

    @property
    def images_edits_url(self) -> str:
        return f"{self.codex_base_url}/images/edits"

    @property
    def usage_url(self) -> str:
        return f"{self.base_url}/wham/usage"

    # -- scripting ----------------------------------------------------------------------------

    def script(self, *behaviours: Behaviour | str, route: Route = "responses") -> None:
        """Queue behaviours for the next calls of ``route`` (then its default applies)."""
        with self._cond:
            self._queues[route].extend(_as_behaviour(item) for item in behaviours)

    def set_default(self, behaviour: Behaviour | str, *, route: Route = "responses") -> None:
        with self._cond:
            self._defaults[route] = _as_behaviour(behaviour)

    def login(self, token: str) -> MockLogin:
        """The login whose bearer token is ``token`` (created on first use): its own quota
        and scripts; calls with another token use the backend-wide ones."""
        with self._cond:
            return self.logins.setdefault(token, MockLogin())

    def calls_by(self, token: str, route: Route = "responses") -> int:
        """How many requests of ``route`` carried ``Authorization: Bearer <token>``."""
        return sum(1 for request in self.requests_for(route) if request.sent_token(token))

    def release(self) -> None:
        """End every current ``stall``: the mock then closes those connections."""
        with self._cond:
            self._release_generation += 1
            self._cond.notify_all()

    def reset(self) -> None:
        """Forget recorded requests, queued behaviours and defaults."""
        with self._cond:
            self._requests.clear()
            for route in ROUTES:
                self._queues[route].clear()
                self._defaults[route] = Behaviour("ok")

    # -- observations -------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    def requests_for(self, route: Route) -> list[RecordedRequest]:
        with self._cond:
            return [request for request in self._requests if request.route == route]

    def calls(self, route: Route) -> int:
        """How many requests reached ``route`` so far."""
        return len(self.requests_for(route))

    @property
    def call_counts(self) -> dict[str, int]:
        with self._cond:
            counts: dict[str, int] = dict.fromkeys(ROUTES, 0)
            for request in self._requests:
                if request.route is not None:
                    counts[request.route] += 1
            return counts

    def wait_for_calls(
        self, count: int, *, route: Route = "responses", timeout: float = 5.0
    ) -> bool:
        """Block until ``route`` has seen ``count`` requests (e.g. a call reached a stall)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: sum(1 for r in self._requests if r.route == route) >= count, timeout
            )

    # -- used by the handler --------------------------------------------------------------------

    def _next_behaviour(self, route: Route, token: str | None = None) -> Behaviour:
        with self._cond:
            login = self.logins.get(token) if token is not None else None
            if login is not None:
                own = login.queues.get(route)
                if own:
                    return own.popleft()
                if route in login.defaults:
                    return login.defaults[route]
            queue = self._queues[route]
            return queue.popleft() if queue else self._defaults[route]

    def _quota_for(self, token: str | None) -> MockQuota:
        login = self.logins.get(token) if token is not None else None
        return login.quota if login is not None else self.quota

    def _refused_model(self, route: Route, raw: bytes, token: str | None = None) -> str | None:
        login = self.logins.get(token) if token is not None else None
        refused = self.refused_models | (login.refused_models if login is not None else set())
        if route != "responses" or not refused:
            return None
        body = _json_or_none(raw)
        model = body.get("model") if isinstance(body, dict) else None
        return model if isinstance(model, str) and model in refused else None

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _wait_released(self) -> None:
        with self._cond:
            generation = self._release_generation
            self._cond.wait_for(
                lambda: self._release_generation != generation or self._closing,
                self.stall_timeout_s,
            )

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the backend closes first; ``False`` when it did."""
        with self._cond:
            return not self._cond.wait_for(lambda: self._closing, seconds)

    def rate_limit_headers(self, quota: MockQuota | None = None) -> dict[str, str]:
        """The ``x-codex-*`` headers the real backend puts on generation answers."""
        now = int(time.time())
        quota = quota or self.quota
        image: dict[str, str] = {}
        if quota.image_used_percent is not None:
            image = {
                "x-image-gen-primary-used-percent": f"{quota.image_used_percent:g}",
                "x-image-gen-primary-window-minutes": str(quota.image_window_minutes),
                "x-image-gen-primary-reset-at": str(now + quota.image_resets_in_s),
            }
        return image | {
            "x-codex-plan-type": quota.plan_type,
            "x-codex-active-limit": "premium",
            "x-codex-primary-used-percent": f"{quota.primary_used_percent:g}",
            "x-codex-primary-window-minutes": str(quota.primary_window_minutes),
            "x-codex-primary-reset-at": str(now + quota.primary_resets_in_s),
            "x-codex-primary-reset-after-seconds": str(quota.primary_resets_in_s),
            "x-codex-secondary-used-percent": f"{quota.secondary_used_percent:g}",
            "x-codex-secondary-window-minutes": str(quota.secondary_window_minutes),
            "x-codex-secondary-reset-at": str(now + quota.secondary_resets_in_s),
            "x-codex-secondary-reset-after-seconds": str(quota.secondary_resets_in_s),
            "x-codex-credits-has-credits": "False",
            "x-codex-credits-unlimited": "False",
            "x-codex-credits-balance": "0",
        }

    def usage_payload(self, quota: MockQuota | None = None) -> dict[str, Any]:
        now = int(time.time())
        quota = quota or self.quota
        return {
            **self.usage_extra,
            "plan_type": quota.plan_type,
            "rate_limit": {
                "allowed": True,
                "limit_reached": quota.primary_used_percent >= 100,
                "primary_window": {
                    "used_percent": quota.primary_used_percent,
                    "limit_window_seconds": quota.primary_window_minutes * 60,
                    "reset_after_seconds": quota.primary_resets_in_s,
                    "reset_at": now + quota.primary_resets_in_s,
                },
                "secondary_window": {
                    "used_percent": quota.secondary_used_percent,
                    "limit_window_seconds": quota.secondary_window_minutes * 60,
                    "reset_after_seconds": quota.secondary_resets_in_s,
                    "reset_at": now + quota.secondary_resets_in_s,
                },
            },
            "credits": {"has_credits": False, "unlimited": False, "balance": "0"},
            "additional_rate_limits": self._image_rate_limits(now, quota),
        }

    def _image_rate_limits(self, now: int, quota: MockQuota) -> list[dict[str, Any]]:
        if quota.image_used_percent is None:
            return []
        window = {
            "used_percent": quota.image_used_percent,
            "limit_window_seconds": quota.image_window_minutes * 60,
            "reset_after_seconds": quota.image_resets_in_s,
            "reset_at": now + quota.image_resets_in_s,
        }
        rate_limit = {"allowed": quota.image_used_percent < 100, "primary_window": window}
        return [{"limit_name": "image_gen", "metered_feature": "image_gen",
                 "rate_limit": rate_limit}]  # fmt: skip

    def usage_limit_error(self, quota: MockQuota | None = None) -> dict[str, Any]:
        """The body of the real backend's quota 429 (``usage_limit_reached``)."""
        quota = quota or self.quota
        wait = quota.limit_resets_in_s
        return {
            "error": {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": quota.plan_type,
                "resets_at": int(time.time()) + wait,
                "resets_in_seconds": wait,
            }
        }

    def fixture_events(self) -> list[str]:
        """The recorded success stream, split into its SSE blocks (text, untouched)."""
        text = self._fixture_path.read_text(encoding="utf-8")
        return [block for block in text.replace("\r\n", "\n").split("\n\n") if block.strip()]


# -- HTTP plumbing ----------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, backend: CodexBackend) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name="codex-backend-connection",
            daemon=True,
        )
        with self._lock:
            self._connections.add(request)
            self._handlers.add(thread)
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._connections.discard(request)
                self._handlers.discard(threading.current_thread())

    def abort_connections(self) -> None:
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def join_handlers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            handlers = list(self._handlers)
        for thread in handlers:
            thread.join(max(deadline - time.monotonic(), 0))

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients hanging up mid-answer are expected here; stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10
    server: _Server
    quota: MockQuota
    """The plan state of the login this request came with."""

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    # -- entry points ---------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        backend = self.server.backend
        split = urlsplit(self.path)
        expected = _PATHS.get(split.path.rstrip("/"))
        try:
            raw = self._read_body()
        except ValueError:
            self._send_json(400, {"error": {"message": "bad request body"}})
            return
        route: Route | None = None
        behaviour = Behaviour("ok")
        refused = None
        authorization = self.headers.get("Authorization")
        token = authorization[7:] if authorization and authorization.startswith("Bearer ") else None
        self.quota = backend._quota_for(token)
        if expected is not None and expected[0] == self.command:
            route = expected[1]
            refused = backend._refused_model(route, raw, token)
            if refused is None:
                behaviour = backend._next_behaviour(route, token)
        rejected = (
            route is not None
            and backend.expected_token is not None
            and token != backend.expected_token
        )
        recorded_as = "plan_refusal" if refused is not None else behaviour.kind
        backend._record(
            self._recorded(split, route, raw, "auth_rejected" if rejected else recorded_as)
        )
        if expected is None:
            self._send_json(
                404, {"error": {"message": "not found", "type": "invalid_request_error"}}
            )
            return
        if route is None:
            self._send_json(405, {"error": {"message": "method not allowed"}})
            return
        if rejected:
            self._send_json(401, _error_401())
            return
        if refused is not None:
            detail = (
                f"The '{refused}' model is not supported when using Codex with a ChatGPT account."
            )
            self._send_json(400, {"detail": detail}, {"x-oai-request-id": _request_id()})
            return
        try:
            if route == "responses":
                self._responses(behaviour, _json_or_none(raw))
            elif route == "usage":
                self._usage(behaviour)
            else:
                self._images(behaviour, _json_or_none(raw))
        except OSError:
            self.close_connection = True  # the client went away

    # -- routes -----------------------------------------------------------------------------

    def _responses(self, behaviour: Behaviour, body: Any) -> None:
        if self._common_fault(behaviour):
            return
        backend = self.server.backend
        tool = _first_tool(body)
        image_b64 = self._image_for(
            tool.get("size"), tool.get("output_format"), tool.get("background")
        )
        kind = behaviour.kind
        blocks: list[str]
        if kind in ("ok", "slow_ok", "stall_mid_stream", "disconnect_mid_stream", "malformed_json"):
            previews = [
                self._image_for(
                    tool.get("size"), tool.get("output_format"), tool.get("background"), index
                )
                for index in range(1, 4)
            ]
            blocks = _success_blocks(
                backend.fixture_events(), image_b64, tool.get("partial_images"), previews
            )
        elif kind == "failed_image_call":
            item = {
                "type": "image_generation_call",
                "id": "ig_mock",
                "status": "failed",
                "result": "",
            }
            blocks = _blocks(
                _created(),
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                _completed([item]),
            )
        elif kind == "completed_without_image":
            item = _message_item(
                {"type": "output_text", "text": "I described the image instead.", "annotations": []}
            )
            blocks = _blocks(
                _created(),
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                _completed([item]),
            )
        elif kind == "refusal_message":
            item = _message_item({"type": "refusal", "refusal": "I can't help with that."})
            blocks = _blocks(
                _created(),
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                _completed([item]),
            )
        elif kind == "content_policy_refusal":
            blocks = _blocks(
                _created(),
                {
                    "type": "response.failed",
                    "response": {
                        "id": "resp_mock",
                        "status": "failed",
                        "error": {
                            "code": "content_policy_violation",
                            "message": "Your request was rejected by the safety system.",
                            "moderation_details": {"stage": "input", "categories": ["violence"]},
                        },
                    },
                },
            )
        elif kind == "usage_limit_in_stream":
            error = backend.usage_limit_error(self.quota)["error"]
            blocks = _blocks(
                _created(), {"type": "error", "error": {**error, "code": "usage_limit_reached"}}
            )
        elif kind == "failed_after_partial":
            blocks = _blocks(
                _created(),
                {
                    "type": "response.image_generation_call.partial_image",
                    "partial_image_b64": image_b64,
                    "partial_image_index": 0,
                },
                {
                    "type": "response.failed",
                    "response": {
                        "id": "resp_mock",
                        "status": "failed",
                        "error": {"code": "server_error", "message": "The server had an error."},
                    },
                },
            )
        elif kind == "final_generating_no_completed":
            # The backend of late 2026: the whole image in a last output_item.done that
            # still says "generating", then the stream ends (openai/codex PR #28656).
            item = {"type": "image_generation_call", "id": "ig_mock", "status": "generating",
                    "result": image_b64, "revised_prompt": "revised"}  # fmt: skip
            blocks = _blocks(
                _created(),
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            )
        elif kind == "ends_without_image":
            blocks = _blocks(
                _created(),
                {
                    "type": "response.image_generation_call.partial_image",
                    "partial_image_b64": _partial_b64(),
                    "partial_image_index": 0,
                },
            )
        elif kind == "repeated_image":
            # One image inlined again and again (kittors/CliRelay PR #954): a repeated
            # partial, the final under two item ids, a late partial of the final's bytes,
            # and both items again in response.completed.
            partial = {
                "type": "response.image_generation_call.partial_image",
                "partial_image_b64": _partial_b64(),
                "partial_image_index": 0,
            }
            first = {"type": "image_generation_call", "id": "ig_one", "status": "completed",
                     "result": image_b64, "revised_prompt": "revised"}  # fmt: skip
            second = {**first, "id": "ig_two"}
            blocks = _blocks(
                _created(),
                partial,
                {**partial, "partial_image_index": 1},
                {"type": "response.output_item.done", "output_index": 0, "item": first},
                {"type": "response.output_item.done", "output_index": 0, "item": second},
                {**partial, "partial_image_b64": image_b64, "partial_image_index": 2},
                _completed([first, second]),
            )
        else:  # pragma: no cover - every kind is handled above or by _common_fault
            raise AssertionError(kind)

        if not backend.report_usage:
            blocks = _without_usage(blocks)
        if backend.image_gen_usage is not None:
            blocks = _with_tool_usage(blocks, backend.image_gen_usage)
        headers = {**backend.rate_limit_headers(self.quota), "x-oai-request-id": _request_id()}
        if backend.sse_content_type is not None:
            headers["Content-Type"] = backend.sse_content_type
        headers["Cache-Control"] = "no-cache"
        self._start(200, headers, chunked=True)
        head, tail = blocks[:1], blocks[1:]
        if kind == "malformed_json":
            head = [*head, 'data: {"type":"response.output_item.done","item":']
        for block in head:
            self._chunk(f"{block}\n\n".encode())
        if kind == "slow_ok" and not backend._sleep(behaviour.seconds):
            return
        if kind in ("stall_mid_stream", "disconnect_mid_stream"):
            self._chunk(f"{tail[0]}\n\n".encode())  # the partial image, then silence
            if kind == "stall_mid_stream":
                backend._wait_released()
            self._hang_up()
            return
        for block in tail:
            self._chunk(f"{block}\n\n".encode())
        self._end_chunks()

    def _images(self, behaviour: Behaviour, body: Any) -> None:
        if self._common_fault(behaviour):
            return
        backend = self.server.backend
        request = body if isinstance(body, dict) else {}
        kind = behaviour.kind
        headers = {
            **backend.rate_limit_headers(self.quota),
            "x-oai-request-id": _request_id(),
            "x-codex-imagegen-request-id": _request_id(),
        }
        if kind == "failed_image_call":
            self._send_json(
                500,
                {
                    "error": {
                        "type": "server_error",
                        "code": "image_generation_failed",
                        "message": "Image generation failed.",
                    }
                },
                headers,
            )
            return
        if kind == "content_policy_refusal":
            self._send_json(
                400,
                {
                    "error": {
                        "type": "image_generation_user_error",
                        "code": "moderation_blocked",
                        "message": "Your request was rejected by the safety system.",
                        "moderation_details": {"stage": "input", "categories": ["sexual"]},
                    }
                },
                headers,
            )
            return
        if kind == "usage_limit_in_stream":
            self._send_json(429, backend.usage_limit_error(self.quota), headers)
            return
        images_routes: set[Route] = {"images_generations", "images_edits"}
        honoured = backend.honour_size and not images_routes & backend.ignore_size_on
        width, height = _parse_size(request.get("size") if honoured else None, backend.image_size)
        if backend.canvas_from_prompt and not backend.honour_size:
            width, height = _canvas_for(request.get("prompt"))
        background = request.get("background")
        data = (
            []
            if kind == "completed_without_image"
            else [
                {
                    "b64_json": self._maybe_c2pa(
                        _image_b64(width, height, "png", background == "transparent")
                    ),
                    "generation_id": "gen_mock",
                }
            ]
        )
        payload = {
            "created": int(time.time()),
            "background": "transparent" if background == "transparent" else "opaque",
            "data": data,
            "output_format": "png",
            "quality": "medium",
            "size": f"{width}x{height}",
            "usage": {"input_tokens": 12, "output_tokens": 34, "total_tokens": 46},
        }
        if not backend.report_usage:
            del payload["usage"]
        encoded = json.dumps(payload).encode()
        if kind == "slow_ok" and not backend._sleep(behaviour.seconds):
            return
        if kind == "malformed_json":
            encoded = encoded[: max(len(encoded) // 2, 1)]
        if kind in ("disconnect_mid_stream", "stall_mid_stream"):
            self._start(
                200, {**headers, "Content-Type": "application/json"}, content_length=len(encoded)
            )
            self.wfile.write(encoded[: len(encoded) // 2])
            if kind == "stall_mid_stream":
                backend._wait_released()
            self._hang_up()
            return
        self._send_bytes(200, encoded, "application/json", headers)

    def _usage(self, behaviour: Behaviour) -> None:
        if self._common_fault(behaviour):
            return
        backend = self.server.backend
        encoded = json.dumps(backend.usage_payload(self.quota)).encode()
        if behaviour.kind == "slow_ok" and not backend._sleep(behaviour.seconds):
            return
        if behaviour.kind == "malformed_json":
            encoded = encoded[: len(encoded) // 2]
        self._send_bytes(200, encoded, "application/json", {"x-oai-request-id": _request_id()})

    def _common_fault(self, behaviour: Behaviour) -> bool:
        """HTTP errors, stalls and early disconnects look the same on every route."""
        backend = self.server.backend
        kind = behaviour.kind
        rate_headers = backend.rate_limit_headers(self.quota)
        if kind == "http_400":
            self._send_json(
                400,
                {
                    "error": {
                        "type": "invalid_request_error",
                        "message": "Invalid value for 'size'.",
                        "param": "tools[0].size",
                    }
                },
            )
        elif kind == "http_401":
            self._send_json(401, _error_401())
        elif kind == "http_403":
            self._send_json(
                403,
                {
                    "error": {
                        "type": "permission_error",
                        "code": "forbidden",
                        "message": "Access to Codex is not allowed.",
                    }
                },
            )
        elif kind == "http_429":
            wait = self.quota.limit_resets_in_s
            limited = {
                **rate_headers,
                "x-codex-primary-used-percent": "100",
                "Retry-After": str(wait),
            }
            self._send_json(429, backend.usage_limit_error(self.quota), limited)
        elif kind == "http_500":
            self._send_json(
                500,
                {
                    "error": {
                        "type": "server_error",
                        "code": None,
                        "message": "Internal server error",
                    }
                },
            )
        elif kind == "http_502":
            self._send_bytes(502, b"<html><body>502 Bad Gateway</body></html>", "text/html")
        elif kind == "http_503":
            self._send_json(
                503,
                {
                    "error": {
                        "type": "server_error",
                        "code": "server_is_overloaded",
                        "message": "The server is overloaded.",
                    }
                },
                {"Retry-After": "2"},
            )
        elif kind == "stall":
            backend._wait_released()
            self._hang_up()
        elif kind == "disconnect_before_first_byte":
            self._hang_up()
        elif kind == "redirect":
            target = f"{backend.base_url}/redirected"
            self._send_json(307, {"error": {"message": "moved"}}, {"Location": target})
        else:
            return False
        return True

    # -- helpers ----------------------------------------------------------------------------

    def _image_for(
        self, size: object, output_format: object, background: object, variant: int = 0
    ) -> str:
        backend = self.server.backend
        honoured = backend.honour_size and "responses" not in backend.ignore_size_on
        width, height = _parse_size(size if honoured else None, backend.image_size)
        image_format = "png"
        if backend.honour_output_format and output_format in ("png", "jpeg", "webp"):
            image_format = str(output_format)
        image = _image_b64(width, height, image_format, background == "transparent", variant)
        return with_c2pa_chunk(image) if backend.c2pa and image_format == "png" else image

    def _maybe_c2pa(self, image_b64: str) -> str:
        return with_c2pa_chunk(image_b64) if self.server.backend.c2pa else image_b64

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            total = 0
            while True:
                size_line = self.rfile.readline(1024).split(b";")[0].strip()
                size = int(size_line, 16)
                if size == 0:
                    self.rfile.readline(1024)
                    return b"".join(parts)
                total += size
                if total > _MAX_REQUEST_BYTES:
                    raise ValueError("request body too large")
                parts.append(self.rfile.read(size))
                self.rfile.readline(1024)
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > _MAX_REQUEST_BYTES:
            raise ValueError("bad Content-Length")
        return self.rfile.read(length) if length else b""

    def _recorded(
        self, split: Any, route: Route | None, raw: bytes, behaviour: str
    ) -> RecordedRequest:
        headers: dict[str, str] = {}
        hashes: dict[str, str | None] = {"authorization": None, "chatgpt-account-id": None}
        for name, value in self.headers.items():
            key = name.lower()
            if key in _SECRET_HEADERS:
                headers[key] = REDACTED
                secret = (
                    value[7:] if key == "authorization" and value.startswith("Bearer ") else value
                )
                hashes[key] = token_sha256(secret)
            else:
                headers[key] = value
        return RecordedRequest(
            method=self.command,
            path=split.path,
            route=route,
            query=split.query,
            headers=headers,
            authorization_sha256=hashes["authorization"],
            account_id_sha256=hashes["chatgpt-account-id"],
            body=_json_or_none(raw),
            body_bytes=len(raw),
            behaviour=behaviour,
            received_at=time.time(),
        )

    def _start(
        self,
        status: int,
        headers: dict[str, str],
        *,
        chunked: bool = False,
        content_length: int | None = None,
    ) -> None:
        self.send_response(status)
        if not any(name.lower() == "x-oai-request-id" for name in headers):
            headers = {**headers, "x-oai-request-id": _request_id()}
        for name, value in headers.items():
            self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        elif content_length is not None:
            self.send_header("Content-Length", str(content_length))
        self.send_header("Connection", "close")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _send_bytes(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self._start(
            status, {**(headers or {}), "Content-Type": content_type}, content_length=len(body)
        )
        self.wfile.write(body)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

    def _hang_up(self) -> None:
        """Close the connection now, mid-answer or before it: no terminating chunk."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _json_or_none(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _first_tool(body: Any) -> dict[str, Any]:
    if isinstance(body, dict) and isinstance(body.get("tools"), list) and body["tools"]:
        tool = body["tools"][0]
        if isinstance(tool, dict):
            return tool
    return {}


def _request_id() -> str:
    return f"req_{uuid.uuid4().hex}"


def _error_401() -> dict[str, Any]:
    return {
        "error": {
            "type": "invalid_request_error",
            "code": "token_expired",
            "message": "Provided authentication token is expired. Please try signing in again.",
        }
    }


def _created() -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": "resp_mock", "status": "in_progress"}}


def _completed(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "response": {
            "id": "resp_mock",
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18},
        },
    }


def _message_item(part: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_mock",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }


def _blocks(*events: dict[str, Any]) -> list[str]:
    return [f"event: {event['type']}\ndata: {json.dumps(event)}" for event in events]


def _without_usage(blocks: list[str]) -> list[str]:
    """The same SSE blocks with ``response.usage`` removed from ``response.completed``."""
    return _edit_completed(
        blocks, lambda response: {k: v for k, v in response.items() if k != "usage"}
    )


def _with_tool_usage(blocks: list[str], image_gen: dict[str, Any]) -> list[str]:
    """The same SSE blocks with ``response.tool_usage.image_gen`` on ``response.completed``."""
    return _edit_completed(
        blocks, lambda response: {**response, "tool_usage": {"image_gen": image_gen}}
    )


def _edit_completed(
    blocks: list[str], edit: Callable[[dict[str, Any]], dict[str, Any]]
) -> list[str]:
    """The same SSE blocks with ``edit`` applied to the ``response`` of ``response.completed``."""
    out: list[str] = []
    for block in blocks:
        lines = block.split("\n")
        data = [line for line in lines if line.startswith("data:")]
        payload = _json_or_none(data[0][5:].strip().encode()) if len(data) == 1 else None
        if (
            isinstance(payload, dict)
            and payload.get("type") == "response.completed"
            and isinstance(payload.get("response"), dict)
        ):
            response = edit(payload["response"])
            kept = [line for line in lines if not line.startswith("data:")]
            block = "\n".join([*kept, f"data: {json.dumps({**payload, 'response': response})}"])
        out.append(block)
    return out


def _success_blocks(
    fixture: list[str], image_b64: str, partial_images: object, previews: list[str]
) -> list[str]:
    """The fixture's blocks with real images; ``partial_images`` > 1 repeats the partial
    event, each time with the next of ``previews`` (distinct images, as real previews)."""
    wanted = (
        partial_images if isinstance(partial_images, int) and 1 <= partial_images <= 3 else None
    )
    out: list[str] = []
    for block in fixture:
        lines = block.split("\n")
        data_lines = [line for line in lines if line.startswith("data:")]
        payload = (
            _json_or_none(data_lines[0][5:].strip().encode()) if len(data_lines) == 1 else None
        )
        if not isinstance(payload, dict):
            out.append(block)
            continue
        kept = [line for line in lines if not line.startswith("data:")]
        if payload.get("type") == "response.image_generation_call.partial_image":
            for index in range(wanted or 1):
                event = {**payload, "partial_image_b64": previews[index % len(previews)]}
                if wanted is not None:
                    event["partial_image_index"] = index
                out.append("\n".join([*kept, f"data: {json.dumps(event)}"]))
            continue
        item = payload.get("item")
        if isinstance(item, dict) and item.get("type") == "image_generation_call":
            payload = {**payload, "item": {**item, "result": image_b64}}
        out.append("\n".join([*kept, f"data: {json.dumps(payload)}"]))
    return out


# -- credentials helpers ---------------------------------------------------------------------


def make_jwt(claims: dict[str, Any]) -> str:
    """An unsigned (``alg: none``) JWT carrying ``claims``, like codex's test tokens."""

    def encode(part: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()

    return f"{encode({'alg': 'none', 'typ': 'JWT'})}.{encode(claims)}.c2ln"


def write_codex_auth(
    codex_home: Path,
    *,
    access_token: str,
    account_id: str | None = "acct-mock-0001",
    auth_mode: str = "chatgpt",
    mode: int = 0o600,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a ChatGPT-mode ``auth.json`` under ``codex_home`` and return its path."""
    codex_home.mkdir(parents=True, exist_ok=True)
    tokens: dict[str, Any] = {
        "id_token": make_jwt({"email": "mock@example.invalid"}),
        "access_token": access_token,
        "refresh_token": "rt_mock_refresh",
    }
    if account_id is not None:
        tokens["account_id"] = account_id
    document = {
        "auth_mode": auth_mode,
        "OPENAI_API_KEY": None,
        "tokens": tokens,
        "last_refresh": "2026-11-29T00:00:00Z",
        **(extra or {}),
    }
    path = codex_home / "auth.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    path.chmod(mode)
    return path


@pytest.fixture(name="codex_backend")
def codex_backend_fixture() -> Iterator[CodexBackend]:
    """A running :class:`CodexBackend`, closed after the test."""
    with CodexBackend() as backend:
        yield backend


# -- the whole bridge over this mock ---------------------------------------------------------

BRIDGE_TOKEN: Final = "tok-SECRET-bridge-4d7e19c2a8"
BRIDGE_ACCOUNT: Final = "acct-SECRET-bridge-6b30"


def bridge_sets(backend: CodexBackend, data_dir: Path) -> list[str]:
    """``--set`` overrides that point both Codex providers at ``backend`` (fast retries)."""
    return [
        "providers.codex_app_server.enabled=false",
        f'providers.codex_responses.endpoint="{backend.responses_url}"',
        "providers.codex_responses.transient_retry_backoff_ms=20",
        "providers.codex_images.enabled=true",
        f'providers.codex_images.base_url="{backend.codex_base_url}"',
        "runtime.cancellation_grace_ms=300",
        f'inputs.local_roots=["{data_dir}"]',
    ]


def codex_responses_sets(
    backend: CodexBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """``--set`` overrides for a served bridge whose default provider is ``codex-responses``
    over ``backend``, signed in as :data:`BRIDGE_ACCOUNT` (its ``CODEX_HOME`` under
    ``tmp_path``, set for the process: the served app reads the login from there)."""
    home = tmp_path / "codex-home"
    write_codex_auth(home, access_token=BRIDGE_TOKEN, account_id=BRIDGE_ACCOUNT)
    monkeypatch.setenv("CODEX_HOME", str(home))
    sets = [s for s in bridge_sets(backend, tmp_path) if not s.startswith("inputs.")]
    return [*sets, "providers.codex_responses.enabled=true", 'default_provider="codex-responses"']


@dataclass(slots=True)
class CodexBridge:
    """A real application (engine, fan-out, breakers, materializer) over the mock backend."""

    app: Any
    backend: CodexBackend
    codex_home: Path
    token: str = BRIDGE_TOKEN
    account_id: str = BRIDGE_ACCOUNT

    @property
    def runtime(self) -> Any:
        return self.app.runtime

    def provider(self, name: str = "codex-responses") -> Any:
        """The registered provider without its fan-out decorator."""
        registered = self.app.runtime.registry.resolve(name)
        return getattr(registered, "inner", registered)

    def request(self, prompt: str = "a red fox", **fields: Any) -> Any:
        from imagebridge.contract.request import ImageRequest

        body: dict[str, Any] = {"operation": "generate", "prompt": prompt, **fields}
        return ImageRequest.model_validate(body)

    async def run(self, prompt: str = "a red fox", *, context: Any = None, **fields: Any) -> Any:
        return await self.app.runtime.execute(self.request(prompt, **fields), context)

    async def fail(self, prompt: str = "a red fox", *, context: Any = None, **fields: Any) -> Any:
        """The :class:`BridgeError` the request ends with (the test fails if it succeeds)."""
        from imagebridge.contract.errors import BridgeError

        with pytest.raises(BridgeError) as caught:
            await self.run(prompt, context=context, **fields)
        return caught.value


@pytest.fixture
async def codex_bridge_factory(
    codex_backend: CodexBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., Awaitable[CodexBridge]]]:
    """Build :class:`CodexBridge` instances (extra ``--set`` strings allowed); all closed after."""
    from imagebridge.application import build_application
    from imagebridge.config import load_config

    codex_home = tmp_path / "codex-home"
    write_codex_auth(codex_home, access_token=BRIDGE_TOKEN, account_id=BRIDGE_ACCOUNT)
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    built: list[Any] = []

    async def factory(*sets: str) -> CodexBridge:
        data_dir = tmp_path / f"data-{len(built)}"
        data_dir.mkdir()
        loaded = load_config(
            env={"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir)},
            sets=[*bridge_sets(codex_backend, data_dir), *sets],
            cwd=data_dir,
        )
        app = build_application(loaded.require_valid())
        built.append(app)
        return CodexBridge(app=app, backend=codex_backend, codex_home=codex_home)

    yield factory
    for app in built:
        await app.aclose()


@pytest.fixture
async def codex_bridge(
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
) -> CodexBridge:
    """The bridge with default settings over the ``codex_backend`` mock."""
    return await codex_bridge_factory()
