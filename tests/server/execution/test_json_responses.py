"""Image responses: serialized on the loop when small, in a worker thread when large."""

from __future__ import annotations

import base64
import os
import socket
import threading
import time
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.responses import Response

from imagebridge.contract.request import GenerationParameters
from imagebridge.contract.response import ImageResponse
from imagebridge.server import routes
from tests.support.fakes import image_item
from tests.support.images import png_bytes
from tests.support.waiting import STARTUP_S


def image_response(data: bytes) -> ImageResponse:
    params = GenerationParameters()
    return ImageResponse(
        id="r",
        created=1,
        provider="p",
        model="m",
        requested=params,
        effective=params,
        data=[image_item(0, data)],
    )


@pytest.mark.parametrize(
    ("base64_chars", "threaded"),
    [(4_000, False), (routes.OFFLOAD_BYTES, False), (routes.OFFLOAD_BYTES + 4, True)],
)
async def test_only_large_image_payloads_are_serialized_in_a_thread(
    monkeypatch: pytest.MonkeyPatch, base64_chars: int, threaded: bool
) -> None:
    offloaded: list[Any] = []
    real_to_thread = routes.asyncio.to_thread

    async def to_thread(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        offloaded.append(func)
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(routes.asyncio, "to_thread", to_thread)
    model = image_response(png_bytes(8, 8))
    model.data[0].b64_json = "A" * base64_chars  # only the size of the base64 counts

    answer = await routes.large_json_response(model)

    assert bool(offloaded) is threaded
    assert isinstance(answer, routes.PiecesResponse) is threaded
    body = b"".join(await _sent_body(answer))
    assert body == model.model_dump_json().encode()
    assert answer.headers["content-length"] == str(len(body))
    assert answer.media_type == "application/json"


def test_the_large_path_writes_the_same_json_as_pydantic() -> None:
    """orjson writes large responses: same keys, order, omissions and values, byte for byte."""
    params = GenerationParameters()
    failure = {
        "index": 1,
        "error": {"code": "upstream", "message": 'é ✓ "quoted"\n', "details": {"r": 0.1}},
        "generation_ms": 7,
    }
    model = ImageResponse.model_validate(
        {
            "id": "r",
            "created": 2**40,
            "provider": "p",
            "model": "m",
            "requested": params.model_dump(mode="json"),
            "effective": params.model_dump(mode="json"),
            "data": [image_item(0, png_bytes(8, 8)).model_dump(mode="json")],
            "failures": [failure],
            "normalizations": [
                {"field": "size", "requested": "1x1", "effective": [1, 2.5], "reason": "r"}
            ],
        }
    )

    assert _joined(routes._dump_large(model)) == model.model_dump_json().encode()


def _joined(pieces: list[bytes | str]) -> bytes:
    return b"".join(piece if isinstance(piece, bytes) else piece.encode() for piece in pieces)


@pytest.mark.parametrize("images", [1, 3])
def test_large_images_go_out_as_pieces_of_the_same_json(images: int) -> None:
    """Each large base64 is a piece of its own between the JSON around it, unescaped."""
    model = image_response(png_bytes(8, 8))
    text = base64.b64encode(os.urandom(300_000)).decode()
    model.data = [image_item(i, png_bytes(8, 8)) for i in range(images)]
    for item in model.data:
        item.b64_json = text
    model.revised_prompt = 'a "quoted" prompt with \\ and é'

    pieces = routes._dump_large(model)

    assert len(pieces) == 2 * images + 1
    assert _joined(pieces) == model.model_dump_json().encode()


def test_text_that_is_not_plain_base64_is_escaped_as_json() -> None:
    model = image_response(png_bytes(8, 8))
    model.data[0].b64_json = "A" * 100_000 + '"\\\n'
    assert _joined(routes._dump_large(model)) == model.model_dump_json().encode()


async def _sent_body(answer: Response) -> list[bytes]:
    """The body messages ``answer`` sends as an ASGI app; it must not read the request."""
    messages: list[Any] = []

    async def receive() -> Any:
        raise AssertionError("the response must not wait on the client")

    async def send(message: Any) -> None:
        messages.append(message)

    await answer({"type": "http", "method": "POST", "path": "/"}, receive, send)
    assert messages[0]["type"] == "http.response.start"
    more = [message.get("more_body", False) for message in messages[1:]]
    assert more == [True] * (len(more) - 1) + [False]
    return [bytes(message["body"]) for message in messages[1:]]


async def test_a_large_answer_is_sent_in_slices_without_watching_the_client() -> None:
    """Pieces go out as they are, base64 text a slice at a time; no disconnect watcher runs."""
    model = image_response(png_bytes(8, 8))
    text = base64.b64encode(os.urandom(3 * routes.SEND_SLICE_CHARS // 4 * 2 + 999)).decode()
    model.data = [image_item(i, png_bytes(8, 8)) for i in range(2)]
    for item in model.data:
        item.b64_json = text

    answer = await routes.large_json_response(model)
    chunks = await _sent_body(answer)

    assert b"".join(chunks) == model.model_dump_json().encode()
    assert answer.headers["content-length"] == str(sum(len(chunk) for chunk in chunks))
    assert max(len(chunk) for chunk in chunks) == routes.SEND_SLICE_CHARS
    assert sum(len(chunk) == routes.SEND_SLICE_CHARS for chunk in chunks) == 4  # 2 per image


def test_base64_text_is_sent_as_views_of_its_own_characters() -> None:
    """No copy of the text is made, and a view outlives every other holder of the text."""
    text = base64.b64encode(os.urandom(3_000)).decode()
    view = routes._ascii_view(text)
    assert view is not None and bytes(view) == text.encode()
    expected = text[100:200].encode()
    tail = view[100:200]
    del text, view
    assert bytes(tail) == expected
    assert routes._ascii_view("é" * 10) is None  # not ASCII: the caller encodes instead


@pytest.mark.parametrize("views", [True, False])
@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_a_large_answer_arrives_whole_through_uvicorn(
    monkeypatch: pytest.MonkeyPatch, http: str, views: bool
) -> None:
    if not views:  # where strings have no usable buffer, the text is encoded a slice at a time
        monkeypatch.setattr(routes, "_AS_UTF8", None)
    model = image_response(png_bytes(8, 8))
    text = base64.b64encode(os.urandom(3 * routes.SEND_SLICE_CHARS // 4 * 3 + 5)).decode()
    model.data[0].b64_json = text
    expected = model.model_dump_json().encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await (await routes.large_json_response(model))(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, http=http, lifespan="off", log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_S
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        answer = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert answer.status_code == 200
    assert answer.content == expected
    assert answer.headers["content-length"] == str(len(expected))
