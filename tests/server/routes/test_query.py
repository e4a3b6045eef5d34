"""Strict query strings, provider cursors and page limits."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from imagebridge.contract.errors import BridgeError
from imagebridge.server.query import (
    decode_provider_cursor,
    encode_provider_cursor,
    page_limit,
    strict_query,
)


@pytest.mark.parametrize("name", ["a", "codex-responses", "x" * 64, "ünï"])
def test_cursors_round_trip(name: str) -> None:
    cursor = encode_provider_cursor(name)
    assert "=" not in cursor
    assert decode_provider_cursor(cursor) == name


@pytest.mark.parametrize(
    ("cursor", "message"),
    [
        ("", "provider cursor length is invalid"),
        ("A" * 257, "provider cursor length is invalid"),
        (encode_provider_cursor("x" * 65), "provider cursor length is invalid"),
        ("%", "provider cursor is malformed"),
        ("bW9jaw==", "provider cursor is malformed"),
        ("bW9jax", "provider cursor is malformed"),  # non-canonical trailing bits
        ("A", "provider cursor is malformed"),
        ("_w", "provider cursor is malformed"),  # not UTF-8
    ],
)
def test_bad_cursors_are_refused(cursor: str, message: str) -> None:
    with pytest.raises(BridgeError) as caught:
        decode_provider_cursor(cursor)
    assert caught.value.message == message
    assert caught.value.http_status == 422


def test_page_limits() -> None:
    kwargs = {"invalid": "bad query", "out_of_range": "bad range"}
    assert page_limit(None, **kwargs) == 20
    assert page_limit("1", **kwargs) == 1
    assert page_limit("100", **kwargs) == 100
    for raw, message in (("0", "bad range"), ("101", "bad range"), ("9" * 30, "bad range")):
        with pytest.raises(BridgeError, match=message):
            page_limit(raw, **kwargs)
    for raw in ("", "-1", "1.5", "ten", "٣"):
        with pytest.raises(BridgeError, match="bad query"):
            page_limit(raw, **kwargs)


def _request(query: bytes) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "query_string": query})


def test_empty_query_values_mean_absent() -> None:
    query = strict_query(_request(b"limit=5&cursor=&status="), ("limit", "cursor", "status"), "x")
    assert query == {"limit": "5"}


@pytest.mark.parametrize("query", [b"cursor=&cursor=", b"cursor=&cursor=abc", b"other="])
def test_empty_values_still_count_as_keys(query: bytes) -> None:
    with pytest.raises(BridgeError, match="bad query") as caught:
        strict_query(_request(query), ("cursor",), "bad query")
    assert caught.value.http_status == 422
