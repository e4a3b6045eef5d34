"""A real loopback mock of the OpenAI Images API (uvicorn + Starlette) for tests.

:class:`OpenAIImagesServer` listens on ``127.0.0.1`` (a free port) in a background
thread and serves ``POST /v1/images/generations`` (JSON) and ``POST /v1/images/edits``
(multipart: ``image``/``image[]`` repeated, ``mask``). Answers carry real images of the
requested ``size`` and ``output_format`` (``auto`` → :attr:`OpenAIImagesServer.auto_size`),
and with ``stream`` they arrive as SSE: ``partial_images`` previews per output
(``image_generation.partial_image`` / ``image_edit.partial_image``), then one
``*.completed`` event per output with ``usage``.

Every request is recorded (:class:`RecordedRequest`): path, JSON body or multipart text
fields and file parts, and headers with credentials replaced by their SHA-256. Each call
takes the next scripted :class:`Behaviour` of its route (:meth:`OpenAIImagesServer.script`),
else the default ``ok``: HTTP errors with OpenAI-style bodies and headers, a delay, a
connection dropped in the middle of the body, an in-stream ``error`` event, fewer images,
or a raw body.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import pytest
import uvicorn
from PIL import Image, ImageDraw
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

__all__ = [
    "Behaviour",
    "OpenAIImagesServer",
    "RecordedPart",
    "RecordedRequest",
    "Route",
    "openai_server_fixture",
    "openai_server_session_fixture",
    "png_bytes",
    "sha256",
]

Route = Literal["generations", "edits"]
_SECRET_HEADERS = frozenset({"authorization", "openai-organization", "openai-project"})


def sha256(value: str | bytes) -> str:
    data = value.encode() if isinstance(value, str) else value
    return hashlib.sha256(data).hexdigest()


def png_bytes(
    width: int, height: int, *, alpha: bool = False, color: tuple[int, int, int] = (40, 90, 200)
) -> bytes:
    """A real PNG (RGBA with a transparent border when ``alpha``)."""
    return _render(width, height, "png", alpha=alpha, color=color)


def _render(
    width: int,
    height: int,
    image_format: str,
    *,
    alpha: bool = False,
    color: tuple[int, int, int] = (40, 90, 200),
) -> bytes:
    mode = "RGBA" if alpha and image_format != "jpeg" else "RGB"
    fill: tuple[int, ...] = (*color, 0) if mode == "RGBA" else color
    image = Image.new(mode, (width, height), fill)
    ImageDraw.Draw(image).ellipse(
        (
            width // 4,
            height // 4,
            max(width // 4, 3 * width // 4),
            max(height // 4, 3 * height // 4),
        ),
        fill=(250, 200, 30, 255) if mode == "RGBA" else (250, 200, 30),
    )
    buffer = io.BytesIO()
    if image_format == "jpeg":
        image.save(buffer, format="JPEG", quality=80)
    elif image_format == "webp":
        image.save(buffer, format="WEBP", lossless=True)
    else:
        image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How one call is answered (default: a successful answer)."""

    status: int = 200
    error: dict[str, Any] | None = None
    """The ``error`` object of a non-2xx JSON body."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering (interrupted when the server stops)."""
    disconnect_after: int | None = None
    """Send headers and this many body bytes of a correct answer, then drop the connection."""
    stream_error: dict[str, Any] | None = None
    """For streamed calls: an ``error`` event sent after the partial images of output 0."""
    images: int | None = None
    """Return this many images instead of ``n``."""
    raw_body: bytes | None = None
    content_type: str = "application/json"

    @classmethod
    def fail(
        cls,
        status: int,
        code: str | None = None,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        message: str = "request failed",
        headers: dict[str, str] | None = None,
    ) -> Behaviour:
        error = {"message": message, "type": type, "param": param, "code": code}
        return cls(status=status, error=error, headers=headers or {})


@dataclass(frozen=True, slots=True)
class RecordedPart:
    """One multipart file part (bytes kept for assertions; never printed)."""

    name: str
    filename: str | None
    content_type: str | None
    data: bytes = field(repr=False)

    @property
    def size(self) -> tuple[int, int]:
        with Image.open(io.BytesIO(self.data)) as image:
            return image.size


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    route: Route
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None = None
    fields: dict[str, str] = field(default_factory=dict)
    files: list[RecordedPart] = field(default_factory=list)

    @property
    def params(self) -> dict[str, Any]:
        """The request's parameters whatever the encoding (multipart values stay text)."""
        return dict(self.json) if self.json is not None else dict(self.fields)

    def sent_secret(self, header: str, value: str) -> bool:
        return self.headers.get(header.lower()) == f"sha256:{sha256(value)}"


class OpenAIImagesServer:
    """Start with :meth:`start` (or ``with``); stop with :meth:`close`."""

    def __init__(self, *, auto_size: tuple[int, int] = (64, 64)) -> None:
        self.auto_size = auto_size
        self._lock = threading.Lock()
        self._scripts: dict[Route, deque[Behaviour]] = {"generations": deque(), "edits": deque()}
        self._requests: list[RecordedRequest] = []
        self._closing = threading.Event()
        config = uvicorn.Config(
            self._app,
            host="127.0.0.1",
            port=0,
            log_level="critical",
            access_log=False,
            lifespan="off",
            interface="asgi3",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> OpenAIImagesServer:
        self._thread = threading.Thread(target=self._server.run, name="openai-mock", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("mock OpenAI server did not start")
            time.sleep(0.01)
        self._port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def close(self) -> None:
        self._closing.set()
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> OpenAIImagesServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        assert self._port is not None, "server not started"
        return f"http://127.0.0.1:{self._port}/v1"

    # -- scripting and records -----------------------------------------------------------------

    def script(self, *behaviours: Behaviour, route: Route = "generations") -> None:
        with self._lock:
            self._scripts[route].extend(behaviours)

    def reset(self) -> None:
        """Forget recorded requests and unused scripts."""
        with self._lock:
            self._requests.clear()
            for script in self._scripts.values():
                script.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def calls(self, route: Route | None = None) -> int:
        return sum(1 for r in self.requests if route is None or r.route == route)

    def _next(self, route: Route) -> Behaviour:
        with self._lock:
            script = self._scripts[route]
            return script.popleft() if script else Behaviour()

    # -- the ASGI application ------------------------------------------------------------------

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        path = request.url.path
        routes: dict[str, Route] = {
            "/v1/images/generations": "generations",
            "/v1/images/edits": "edits",
        }
        route = routes.get(path)
        if request.method != "POST" or route is None:
            await _send_json(send, 404, {"error": {"message": "not found", "code": None}})
            return
        headers = {
            key: (
                f"sha256:{sha256(value.removeprefix('Bearer '))}"
                if key in _SECRET_HEADERS
                else value
            )
            for key, value in request.headers.items()
        }
        if route == "generations":
            body = json.loads(await request.body())
            record = RecordedRequest(route, path, headers, json=body)
        else:
            async with request.form(max_files=64, max_fields=64) as form:
                fields: dict[str, str] = {}
                files: list[RecordedPart] = []
                for key, value in form.multi_items():
                    if isinstance(value, UploadFile):
                        files.append(
                            RecordedPart(
                                key, value.filename, value.content_type, await value.read()
                            )
                        )
                    else:
                        fields[key] = value
            record = RecordedRequest(route, path, headers, fields=fields, files=files)
        with self._lock:
            self._requests.append(record)
        behaviour = self._next(route)
        if behaviour.delay and await self._sleep(behaviour.delay):
            return
        if behaviour.raw_body is not None:
            await _send_bytes(
                send,
                behaviour.status,
                behaviour.raw_body,
                behaviour.content_type,
                behaviour.headers,
            )
            return
        if behaviour.status >= 400:
            body_bytes = json.dumps({"error": behaviour.error}).encode()
            await _send_bytes(
                send, behaviour.status, body_bytes, "application/json", behaviour.headers
            )
            return
        params = record.params
        if str(params.get("stream", "")).lower() == "true":
            await self._stream(send, route, params, behaviour)
            return
        answer = json.dumps(self._answer(params, behaviour)).encode()
        if behaviour.disconnect_after is not None:
            await _send_truncated(send, answer, behaviour.disconnect_after)
            return
        await _send_bytes(send, 200, answer, "application/json", behaviour.headers)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep in small steps; ``True`` when the server is stopping."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self._closing.is_set():
                return True
            await asyncio.sleep(min(0.02, end - time.monotonic()))
        return self._closing.is_set()

    def _image(self, params: dict[str, Any], index: int, scale: int = 1) -> str:
        size = str(params.get("size", "auto"))
        width, height = self.auto_size
        if size != "auto":
            width, height = (int(part) for part in size.split("x"))
        image_format = str(params.get("output_format", "png"))
        alpha = params.get("background") == "transparent"
        color = ((37 * index) % 256, 90, 200)
        data = _render(
            max(1, width // scale), max(1, height // scale), image_format, alpha=alpha, color=color
        )
        return base64.b64encode(data).decode()

    @staticmethod
    def _usage(images: int) -> dict[str, Any]:
        return {
            "input_tokens": 12,
            "output_tokens": 100 * images,
            "total_tokens": 12 + 100 * images,
            "input_tokens_details": {"text_tokens": 12, "image_tokens": 0},
        }

    def _answer(self, params: dict[str, Any], behaviour: Behaviour) -> dict[str, Any]:
        n = int(params.get("n", 1))
        count = n if behaviour.images is None else behaviour.images
        data: list[dict[str, Any]] = []
        for index in range(count):
            item: dict[str, Any] = {"b64_json": self._image(params, index)}
            if str(params.get("model", "")).startswith("dall-e-3"):
                item["revised_prompt"] = "a revised prompt"
            data.append(item)
        return {"created": int(time.time()), "data": data, "usage": self._usage(count)}

    async def _stream(
        self, send: Send, route: Route, params: dict[str, Any], behaviour: Behaviour
    ) -> None:
        prefix = "image_generation" if route == "generations" else "image_edit"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        n = int(params.get("n", 1))
        partials = int(params.get("partial_images", 0))
        count = n if behaviour.images is None else behaviour.images
        sent = 0
        for index in range(count):
            for partial in range(partials):
                event = {
                    "type": f"{prefix}.partial_image",
                    "b64_json": self._image(params, index, scale=8),
                    "partial_image_index": partial,
                }
                sent += await _send_event(send, event)
            if index == 0 and behaviour.stream_error is not None:
                await _send_event(send, {"type": "error", "error": behaviour.stream_error})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            if behaviour.disconnect_after is not None and sent >= behaviour.disconnect_after:
                raise ConnectionAbortedError("scripted disconnect")  # uvicorn drops the socket
            completed = {
                "type": f"{prefix}.completed",
                "b64_json": self._image(params, index),
                "usage": self._usage(1),
            }
            sent += await _send_event(send, completed)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _send_event(send: Send, event: dict[str, Any]) -> int:
    body = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
    await send({"type": "http.response.body", "body": body, "more_body": True})
    return len(body)


async def _send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    headers: dict[str, str] | None = None,
) -> None:
    raw = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    await _send_bytes(send, status, json.dumps(payload).encode(), "application/json")


async def _send_truncated(send: Send, body: bytes, keep: int) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body[:keep], "more_body": True})
    raise ConnectionAbortedError("scripted disconnect")  # uvicorn drops the connection


@pytest.fixture(name="openai_server_session", scope="session")
def openai_server_session_fixture() -> Iterator[OpenAIImagesServer]:
    """One started server for the whole run (starting and stopping uvicorn costs ~0.2 s)."""
    with OpenAIImagesServer() as server:
        yield server


@pytest.fixture(name="openai_server")
def openai_server_fixture(openai_server_session: OpenAIImagesServer) -> OpenAIImagesServer:
    """The shared server with its scripts and records cleared for this test.

    Import both ``openai_server_fixture`` and ``openai_server_session_fixture`` into a test
    module (or conftest) to use it.
    """
    openai_server_session.reset()
    return openai_server_session
