"""``json.loads`` for answers that carry images as large ``b64_json`` strings.

An upstream's image answer is a few hundred bytes of JSON around megabytes of base64.
``json.loads`` walks those megabytes character by character (~1 ns each: 3–5 ms of
GIL-held CPU for a 1024² noise PNG, bench/gateway.py). Base64 holds no quote, no
backslash and nothing outside ASCII, so the extent of such a string is found with two
``memchr`` scans, and its text made by one ASCII decode (a copy). :func:`loads` lifts every
large string that is the value of a ``"b64_json"`` key out of the body that way, parses
what is left with ``json.loads`` and puts the strings back: the same result as
``json.loads(body)``. Anything it does not recognise (an escape or a non-ASCII byte in
such a string, a body that is not UTF-8 JSON) goes to ``json.loads`` unchanged, so the
errors are its errors. One difference: a control character inside a lifted string is
not refused here; the strict base64 decode every ``b64_json`` goes through refuses it.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

__all__ = ["LIFT_MIN_CHARS", "loads"]

LIFT_MIN_CHARS = 64 * 1024
"""Strings shorter than this are left to ``json.loads`` (lifting them gains nothing)."""
_KEY = b'"b64_json"'
_QUOTE = 0x22
_BACKSLASH = 0x5C


def loads(body: bytes | bytearray) -> Any:
    """``json.loads(body)``, with large ``b64_json`` strings lifted out first."""
    if len(body) < LIFT_MIN_CHARS:
        return json.loads(body)
    view = memoryview(body)
    lifted: dict[str, str] = {}
    marker = "\x00" + secrets.token_hex(8)
    skeleton: list[bytes] = []
    copied = 0
    position = 0
    while True:
        key = body.find(_KEY, position)
        if key < 0:
            break
        start, end = _lifted_span(body, key)
        position = key + len(_KEY)
        if end < 0:
            continue
        try:
            text = str(view[start + 1 : end], "ascii")
        except UnicodeDecodeError:
            return json.loads(body)
        token = f"{marker}:{len(lifted)}"
        lifted[token] = text
        skeleton += (bytes(view[copied:start]), json.dumps(token).encode())
        copied = position = end + 1
    if not lifted:
        return json.loads(body)
    skeleton.append(bytes(view[copied:]))
    view.release()

    def restore(obj: dict[str, Any]) -> dict[str, Any]:
        value = obj.get("b64_json")
        if type(value) is str and value.startswith(marker):
            obj["b64_json"] = lifted.pop(value)
        return obj

    result = json.loads(b"".join(skeleton), object_hook=restore)
    if lifted:  # a marker that did not come back as a b64_json value: never lose data
        return json.loads(body)
    return result


def _lifted_span(body: bytes | bytearray, key: int) -> tuple[int, int]:
    """``(opening, closing)`` quote positions of the string value after ``key``, or
    ``(-1, -1)`` when that is not a large escape-free string value of a ``b64_json`` key.

    ``key`` is where ``"b64_json"`` was found. It is a key only if its opening quote is not
    itself escaped and, after whitespace, a colon and whitespace, a string starts. Whether
    it is inside another string is settled by ``json.loads`` of the skeleton: lifting a
    string out of another string's middle leaves that skeleton invalid (the marker's quotes
    would close and reopen it), and then the caller's ``object_hook`` never restores the
    marker, which sends the body to plain ``json.loads``.
    """
    if key > 0 and body[key - 1] == _BACKSLASH:
        return -1, -1
    start = key + len(_KEY)
    while start < len(body) and body[start] in b" \t\r\n":
        start += 1
    if start >= len(body) or body[start] != ord(":"):
        return -1, -1
    start += 1
    while start < len(body) and body[start] in b" \t\r\n":
        start += 1
    if start >= len(body) or body[start] != _QUOTE:
        return -1, -1
    end = body.find(b'"', start + 1)
    if end < 0 or end - start - 1 < LIFT_MIN_CHARS or body.find(b"\\", start + 1, end) >= 0:
        return -1, -1
    return start, end
