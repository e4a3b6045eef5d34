"""Malformed multipart bodies on ``POST /v1/images/edits``: a 4xx envelope, never 5xx, never
a hang.

A live server (uvicorn on 127.0.0.1, the mock provider) receives hypothesis-built forms:
random and hostile boundaries, parts cut off anywhere, repeated fields, odd or missing
part headers, headers of a few hundred KiB, binary garbage instead of a form, and the
``Content-Type`` header itself mangled. The OpenAI SDK's valid shapes are in the mix, so
some forms legitimately succeed (200); anything else must be a 4xx with the error
envelope. Each request has a client timeout, so a server that waits forever fails the
test. A raw socket also sends a body shorter than its ``Content-Length`` and half-closes:
the server must answer or close promptly.
"""

from __future__ import annotations

import base64
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.resilience.harness import ThreadServer, start_in_thread
from tests.support.images import png_bytes

FUZZ: Final = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
REQUEST_TIMEOUT_S: Final = 15.0
FIELDS: Final = [
    "image",
    "image[]",
    "mask",
    "prompt",
    "n",
    "size",
    "model",
    "response_format",
    "quality",
    "background",
    "output_format",
    "user",
    "stream",
    "unknown",
    "",
]


PNG: Final = png_bytes(8, 8, (200, 10, 10, 255), mode="RGBA")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    root: Path = tmp_path_factory.mktemp("multipart")
    live = start_in_thread(
        root, ["runtime.request.max_edge=64", "artifacts.image.max_encoded_bytes=1048576"]
    )
    yield live
    live.stop()


@pytest.fixture(scope="module")
def client(server: ThreadServer) -> Iterator[httpx.Client]:
    with server.client(timeout=REQUEST_TIMEOUT_S) as http:
        yield http


boundaries = st.sampled_from(
    ["b", "----WebKitFormBoundary7MA4YWxkTrZu0gW", "x" * 70, "x" * 200, "a b", '"q"', "é", ""]
) | st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=80)
part_bodies = st.sampled_from([PNG, PNG[:20], b"", b"a red fox", b"2", b"256x256"]) | st.binary(
    max_size=300
)
header_values = st.sampled_from(
    [
        "image/png",
        "text/plain; charset=utf-8",
        "application/octet-stream",
        "x" * 300_000,
        "",
    ]
) | st.text(max_size=40)


@st.composite
def parts(draw: st.DrawFn) -> bytes:
    name = draw(st.sampled_from(FIELDS) | st.text(max_size=10))
    lines: list[bytes] = []
    disposition = draw(
        st.sampled_from(
            [
                f'form-data; name="{name}"',
                f'form-data; name="{name}"; filename="a.png"',
                f'form-data; name="{name}"; filename=""',
                f"form-data; name={name}",
                "form-data",
                f'attachment; name="{name}"',
                "",
            ]
        )
    )
    if draw(st.integers(0, 9)):
        lines.append(b"Content-Disposition: " + disposition.encode("utf-8", "replace"))
    if draw(st.booleans()):
        lines.append(b"Content-Type: " + draw(header_values).encode("utf-8", "replace"))
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(["X-Extra", "Content-Transfer-Encoding", ":", "A" * 1000]))
        lines.append(key.encode() + b": " + draw(header_values).encode("utf-8", "replace"))
    newline = draw(st.sampled_from([b"\r\n", b"\r\n", b"\n"]))
    return newline.join(lines) + newline + newline + draw(part_bodies)


@st.composite
def forms(draw: st.DrawFn) -> tuple[str, bytes]:
    """A ``Content-Type`` header and a body: built from parts, then perhaps broken."""
    boundary = draw(boundaries)
    body_boundary = draw(st.sampled_from([boundary, boundary, boundary, "other"]))
    chunks = [b"--" + body_boundary.encode() + b"\r\n" + part for part in draw(st.lists(parts()))]
    body = b"\r\n".join(chunks) + b"\r\n--" + body_boundary.encode() + b"--\r\n"
    mangle = draw(st.sampled_from(["none", "none", "truncate", "no_close", "garbage", "empty"]))
    if mangle == "truncate":
        body = body[: draw(st.integers(0, len(body)))]
    elif mangle == "no_close":
        body = body.rsplit(b"\r\n--", 1)[0]
    elif mangle == "garbage":
        body = draw(st.binary(max_size=2_000))
    elif mangle == "empty":
        body = b""
    content_type = draw(
        st.sampled_from(
            [
                f"multipart/form-data; boundary={boundary}",
                f'multipart/form-data; boundary="{boundary}"',
                f"multipart/form-data; boundary={boundary}; charset=utf-8",
                "multipart/form-data",
                "multipart/mixed; boundary=b",
                "application/json",
                "text/plain",
            ]
        )
    )
    return content_type, body


def _post(client: httpx.Client, content_type: str, body: bytes) -> httpx.Response:
    try:
        return client.post(
            "/v1/images/edits", content=body, headers={b"content-type": content_type.encode()}
        )
    except httpx.TimeoutException:
        pytest.fail("the server did not answer a malformed multipart body in time")


def _assert_refused_cleanly(answer: httpx.Response) -> None:
    assert answer.status_code < 500, (answer.status_code, answer.text[:500])
    if answer.status_code == 200:
        assert answer.json()["data"], "a success carries its image"
        return
    assert 400 <= answer.status_code < 500, answer.status_code
    envelope = answer.json()["error"]
    assert envelope["message"] and envelope["type"] and envelope["code"]
    assert envelope["imagegen_bridge"]["code"]


def _valid_form(*extra: tuple[str, bytes, str | None]) -> tuple[str, bytes]:
    boundary = "fuzzboundary"
    items = [("prompt", b"a red fox", None), ("image[]", PNG, "a.png"), *extra]
    chunks = []
    for name, data, filename in items:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"\r\nContent-Type: image/png'
        chunks.append(f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data)
    body = b"\r\n".join(chunks) + f"\r\n--{boundary}--\r\n".encode()
    return f"multipart/form-data; boundary={boundary}", body


@FUZZ
@given(form=forms())
@example(form=_valid_form())
@example(form=_valid_form(("prompt", b"again", None)))
@example(form=_valid_form(("mask", PNG, "m.png"), ("mask", PNG, "m.png")))
def test_malformed_forms_get_a_4xx_envelope(client: httpx.Client, form: tuple[str, bytes]) -> None:
    content_type, body = form
    _assert_refused_cleanly(_post(client, content_type, body))


def test_the_sdk_shape_succeeds_so_the_fuzz_reaches_the_provider(client: httpx.Client) -> None:
    answer = _post(client, *_valid_form())
    assert answer.status_code == 200, answer.text[:500]
    assert base64.b64decode(answer.json()["data"][0]["b64_json"]).startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("label", "extra"),
    [
        ("many repeated text fields", [("user", b"u", None)] * 5_000),
        ("many image parts", [("image[]", PNG, "a.png")] * 200),
        ("one huge part header", [("x" * 1_000_000, b"v", None)]),
        ("a text field over its limit", [("user", b"u" * 200_000, None)]),
        ("an image over the encoded-size limit", [("image[]", b"\x89PNG" * 400_000, "b.png")]),
    ],
)
def test_oversized_shapes_are_refused_promptly(
    client: httpx.Client, label: str, extra: list[tuple[str, bytes, str | None]]
) -> None:
    started = time.monotonic()
    answer = _post(client, *_valid_form(*extra))
    assert 400 <= answer.status_code < 500, (label, answer.status_code, answer.text[:300])
    _assert_refused_cleanly(answer)
    assert time.monotonic() - started < 10, label


def _raw_request(port: int, head: dict[str, str], body: bytes) -> bytes:
    lines = ["POST /v1/images/edits HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{key}: {value}" for key, value in head.items()]
    sock = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S)
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65_536):
            received += chunk
        return received
    except TimeoutError:
        pytest.fail("the server neither answered nor closed a short body")
    finally:
        sock.close()


def test_a_body_shorter_than_its_content_length_does_not_hang(server: ThreadServer) -> None:
    content_type, body = _valid_form()
    port = int(server.url.rsplit(":", 1)[1])
    received = _raw_request(
        port,
        {"Content-Type": content_type, "Content-Length": str(len(body) + 1_000)},
        body[: len(body) // 2],
    )
    status: Any = received.split(b" ", 2)[1] if received.startswith(b"HTTP/1.1 ") else None
    assert status is None or not status.startswith(b"5"), received[:200]
