"""HTTP routes, one small module per area.

Every route is made by one of three routers, and that is its access decision:
:func:`public_router` (no bearer: health, the OpenAPI document, signed links),
:func:`protected_router` (the bearer or, with named keys, any key — the route shows a key
its own work only) and :func:`admin_router` (the operator's views: with named keys, a key
gets 403). ``tests/server/auth/test_operator_views.py`` holds every mounted route to a decision.
"""

from __future__ import annotations

import asyncio
import ctypes
import secrets
import sys
from typing import Any, TypeVar

import orjson
from fastapi import APIRouter, Depends, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from imagebridge.contract._base import decode_model
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.b64 import decode_strict
from imagebridge.server.auth import quota_headers
from imagebridge.server.context import request_context
from imagebridge.server.state import bridge_state

__all__ = [
    "OFFLOAD_BYTES",
    "PiecesResponse",
    "admin_router",
    "decode_body",
    "json_response",
    "large_json_response",
    "protected_router",
    "public_router",
    "require_access",
    "require_admin",
]

M = TypeVar("M", bound=BaseModel)

OFFLOAD_BYTES = 1024 * 1024
"""Bodies above this are decoded in a worker thread, never on the event loop."""

bridge_bearer = HTTPBearer(
    scheme_name="bridgeBearer",
    auto_error=False,
    description="Optional bridge token, separate from provider OAuth.",
)


async def require_access(
    request: Request,
    _documented: HTTPAuthorizationCredentials | None = Security(bridge_bearer),  # noqa: B008
) -> None:
    """Browser-origin guard, then the exact bearer check; records the caller's scope.

    ``_documented`` only declares the scheme in OpenAPI: the header is checked here,
    exactly (``Bearer`` with that case and one space), not by FastAPI's lenient parser.
    """
    state = bridge_state(request)
    client = request.client.host if request.client is not None else None
    principal = await state.access.authenticate(request.scope["headers"], client)
    context = request_context(request)
    context.owner = principal.owner
    context.principal = principal
    if principal.key is not None and state.access.keys is not None:
        context.extra_headers = quota_headers(state.access.keys, principal.key)


async def require_admin(request: Request) -> None:
    """After :func:`require_access`: only the admin passes (403 ``permission_denied`` for
    a named key). Without keys every authenticated caller is the admin."""
    principal = request_context(request).principal
    if principal is None or not principal.admin:
        raise BridgeError(
            ErrorCode.PERMISSION_DENIED, "this is an operator route: only the admin key may use it"
        )


def protected_router(**kwargs: Any) -> APIRouter:
    return APIRouter(dependencies=[Security(require_access)], **kwargs)


def admin_router(**kwargs: Any) -> APIRouter:
    """Routes that name pool accounts, other keys or other keys' work: the admin's only."""
    return APIRouter(dependencies=[Security(require_access), Depends(require_admin)], **kwargs)


def public_router(**kwargs: Any) -> APIRouter:
    return APIRouter(**kwargs)


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Serialize a contract model with its omission rules (no re-validation)."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")


async def large_json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Like :func:`json_response`, serialized in a worker thread when its images are big.

    Up to :data:`OFFLOAD_BYTES` of base64 the thread hop costs more than the work (the
    same bound as :func:`decode_body`). Above it the body goes out in pieces
    (:func:`_dump_large`, :class:`PiecesResponse`), with its exact ``Content-Length``.
    """
    if _image_payload_chars(model) <= OFFLOAD_BYTES:
        return json_response(model, status_code)
    pieces = await asyncio.to_thread(_dump_large, model)
    return PiecesResponse(pieces, status_code)


SEND_SLICE_CHARS = 1024 * 1024
"""Base64 characters handed to the server per message (a write stall is timed per message)."""


class PiecesResponse(Response):
    """A JSON body known in full, sent as its pieces: bytes as they are, base64 text as
    views of the string's own characters (:func:`_ascii_view`), a slice at a time.

    Unlike ``StreamingResponse`` it starts no task to watch for a disconnect: every piece
    is already in memory, and the server drops the writes of a response whose client
    has gone.
    """

    media_type = "application/json"

    def __init__(self, pieces: list[bytes | str], status_code: int = 200) -> None:
        self.pieces = pieces
        self.status_code = status_code
        self.background = None
        length = sum(len(piece) for piece in pieces)  # base64 text is ASCII
        self.init_headers({"content-length": str(length)})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        for piece in self.pieces:
            if isinstance(piece, bytes):
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                continue
            view = _ascii_view(piece)
            for start in range(0, len(piece), SEND_SLICE_CHARS):
                chunk = (
                    view[start : start + SEND_SLICE_CHARS]
                    if view is not None
                    else piece[start : start + SEND_SLICE_CHARS].encode("ascii")
                )
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _ascii_view(text: str) -> memoryview | None:
    """The bytes of an ASCII ``text`` without a copy, or ``None`` where that is not possible.

    CPython stores an ASCII string's characters as its UTF-8 form, and the C API's
    ``PyUnicode_AsUTF8AndSize`` returns that buffer, valid while the string lives; the view
    holds the string, so the server may keep slices of it until they are written. Encoding
    instead copied each 4 MB image twice on the event loop (a slice of the text, then its
    bytes): ~0.6 ms of a request's CPU in bench/gateway.py.
    """
    if _AS_UTF8 is None or not text.isascii():
        return None
    size = ctypes.c_ssize_t()
    address = _AS_UTF8(text, ctypes.byref(size))
    if not address or size.value != len(text):
        return None
    characters = (ctypes.c_char * size.value).from_address(address)
    characters._text = text  # type: ignore[attr-defined]  # lives as long as any view
    return memoryview(characters).cast("B")


def _utf8_accessor() -> Any:
    if sys.implementation.name != "cpython":
        return None
    accessor = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    accessor.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)]
    accessor.restype = ctypes.c_void_p
    return accessor


_AS_UTF8 = _utf8_accessor()


def _dump_large(model: BaseModel) -> list[bytes | str]:
    """The same JSON as ``model_dump_json``, as pieces: the JSON around the images, and
    each image's base64 text on its own.

    ``model_dump(mode="json")`` applies the same omission rules and keeps the payload
    strings by reference. orjson writes the JSON with a marker for each large
    ``b64_json``, and the base64 text goes between the pieces as it is: JSON needs no
    escape in it, which :func:`decode_strict` proves (every character in the base64
    alphabet) in ~0.15 ms for 4 MB. :class:`PiecesResponse` sends it as views of its own
    characters, so no copy of the answer is ever made: writing the 67 MB answer of a
    16-image fan-out through orjson took 26-60 ms of GIL-held copying and page faults
    (bench/gateway.py), one 4 MB image 1.5-4 ms (now 0.3 ms), and the copy was 1.33x the
    images' size in memory. Anything unexpected falls back to pydantic's JSON.
    """
    try:
        document = model.model_dump(mode="json")
        items = document.get("data") if isinstance(document, dict) else None
        marker = "\x00" + secrets.token_hex(8)
        texts: list[str] = []
        for item in items if isinstance(items, list) else ():
            text = item.get("b64_json") if isinstance(item, dict) else None
            if isinstance(text, str) and len(text) > _PIECE_CHARS and _plain_base64(text):
                item["b64_json"] = f"{marker}:{len(texts)}"
                texts.append(text)
        skeleton = orjson.dumps(document)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return [model.model_dump_json().encode()]
    pieces: list[bytes | str] = []
    position = 0
    for index, text in enumerate(texts):
        token = orjson.dumps(f"{marker}:{index}")
        found = skeleton.find(token, position)
        if found < 0:
            return [model.model_dump_json().encode()]
        pieces += (skeleton[position : found + 1], text)
        position = found + len(token) - 1  # from the closing quote on
    pieces.append(skeleton[position:])
    return pieces


_PIECE_CHARS = 64 * 1024
"""``b64_json`` strings longer than this are sent as pieces of their own."""


def _plain_base64(text: str) -> bool:
    """Only base64 alphabet and padding: nothing JSON would escape."""
    try:
        decode_strict(text)
    except ValueError:
        return False
    return True


def _image_payload_chars(model: BaseModel) -> int:
    """The base64 characters an image response carries (unknown shapes count as large)."""
    data = getattr(model, "data", None)
    if not isinstance(data, list):
        return OFFLOAD_BYTES + 1
    return sum(len(getattr(item, "b64_json", None) or "") for item in data)


async def decode_body(model: type[M], request: Request, message: str) -> M:
    """Read and decode a JSON body; large bodies (inline images) decode off the loop."""
    body = await request.body()
    if len(body) > OFFLOAD_BYTES:
        return await asyncio.to_thread(decode_model, model, body, message)
    return decode_model(model, body, message)
