"""The image-answer JSON reader gives exactly what ``json.loads`` gives."""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imagebridge.providers.openai import json_body
from imagebridge.providers.openai.json_body import LIFT_MIN_CHARS

BIG = base64.b64encode(os.urandom(LIFT_MIN_CHARS)).decode()


def same(body: bytes) -> Any:
    expected = json.loads(body)
    for form in (body, bytearray(body)):
        assert json_body.loads(form) == expected
    return expected


@pytest.mark.parametrize(
    "document",
    [
        {"created": 1, "data": [{"b64_json": BIG}]},
        {"data": [{"b64_json": BIG, "revised_prompt": 'say "b64_json": "x"'}, {"b64_json": BIG}]},
        {"data": [{"revised_prompt": "\\" * 3 + '"b64_json": "' + BIG + '"'}]},
        {"data": [{"b64_json": BIG[:100]}], "padding": "p" * LIFT_MIN_CHARS},
        {"b64_json": {"b64_json": BIG}, "list": [BIG, {"b64_json": None}]},
        {"data": [{"b64_json": BIG, "b64_json_2": BIG}]},
        {"data": [{"url": "data:image/png;base64," + BIG}]},
    ],
)
@pytest.mark.parametrize("indent", [None, 2])
def test_answers_parse_as_json_loads_parses_them(document: Any, indent: int | None) -> None:
    assert same(json.dumps(document, indent=indent).encode()) == document


@pytest.mark.parametrize(
    "body",
    [
        # the same key twice: the last value wins, as in json.loads
        b'{"b64_json": "' + BIG.encode() + b'", "b64_json": "' + BIG.encode() + b'=="}',
        # a key inside a string value, escaped and not
        b'{"a": "\\\\", "b64_json": "' + BIG.encode() + b'"}',
        b'{"a": "\\"b64_json\\": \\"' + BIG.encode() + b'\\""}',
        # escapes and non-ASCII inside the large value
        b'{"b64_json": "' + BIG.encode() + b'\\u0041"}',
        b'{"b64_json": "' + BIG.encode() + "é".encode() + b'"}',
    ],
)
def test_unusual_answers_parse_as_json_loads_parses_them(body: bytes) -> None:
    same(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"b64_json": "' + BIG.encode() + b'"',  # cut off
        b'{"b64_json": "' + BIG.encode() + b'" "x"}',
        b'{"s": "b64_json": "' + BIG.encode() + b'"}',
        b'["b64_json": "' + BIG.encode() + b'"]',
        b'{"b64_json": "' + BIG.encode(),  # unterminated string
        b"\xff" * LIFT_MIN_CHARS,
    ],
)
def test_malformed_answers_are_refused_like_json_loads(body: bytes) -> None:
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)) as expected:
        json.loads(body)
    with pytest.raises(type(expected.value)):
        json_body.loads(body)


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.sampled_from([BIG]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["b64_json", "data", "url", "x"]), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(_values)
def test_any_document_parses_as_json_loads_parses_it(document: Any) -> None:
    body = json.dumps({"pad": "p" * LIFT_MIN_CHARS, "doc": document}).encode()
    assert same(body)["doc"] == document
