from __future__ import annotations

import asyncio
import json

import pytest

from imagebridge.providers.codex_app_server.framing import LineReader, LineTooLong, encode_message


async def test_lines_are_split_across_chunks_and_crlf_is_stripped() -> None:
    stream = asyncio.StreamReader()
    reader = LineReader(stream, 64)
    stream.feed_data(b'{"a":')
    stream.feed_data(b'1}\r\n{"b":2}\n{"c"')
    stream.feed_data(b":3}")
    stream.feed_eof()
    assert await reader.readline() == b'{"a":1}'
    assert await reader.readline() == b'{"b":2}'
    assert await reader.readline() == b'{"c":3}'
    assert await reader.readline() is None


async def test_an_oversize_line_fails_before_its_newline_arrives() -> None:
    stream = asyncio.StreamReader()
    reader = LineReader(stream, 100)
    stream.feed_data(b"x" * 150)  # no newline and never finished: must not wait for more
    with pytest.raises(LineTooLong) as caught:
        await asyncio.wait_for(reader.readline(), 1)
    assert caught.value.limit == 100
    assert caught.value.size > 100


async def test_a_complete_line_over_the_limit_fails_too() -> None:
    stream = asyncio.StreamReader()
    reader = LineReader(stream, 10)
    stream.feed_data(b"0123456789A\nok\n")
    with pytest.raises(LineTooLong):
        await reader.readline()


async def test_a_line_exactly_at_the_limit_passes() -> None:
    stream = asyncio.StreamReader()
    reader = LineReader(stream, 10)
    stream.feed_data(b"0123456789\n")
    assert await reader.readline() == b"0123456789"


def test_encoding_is_one_compact_line_without_jsonrpc_member() -> None:
    line = encode_message({"method": "initialize", "id": 1, "params": {"text": "ü\nx"}})
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    decoded = json.loads(line)
    assert decoded == {"method": "initialize", "id": 1, "params": {"text": "ü\nx"}}
    assert "jsonrpc" not in decoded
