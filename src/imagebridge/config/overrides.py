"""Parsing of ``IMAGEGEN_BRIDGE__*`` variables and ``--set`` / ``--unset`` arguments.

Both name a field by a path of keys and give its value as TOML (``5``, ``true``,
``[80, 443]``, ``"text"``); anything that is not a TOML value is taken as a literal
string, so ``--set default_provider=mock`` needs no quotes.

Provider names contain ``-``, which environment variable names cannot, so inside the
per-provider maps ``runtime.providers`` and ``runtime.circuit_breakers`` an ``_`` in the
provider segment means ``-`` (``CODEX_RESPONSES`` → ``codex-responses``). ``--set``
additionally accepts quoted segments, taken literally:
``runtime.providers."codex-responses".max_queued=0``.

Errors never contain a value: a malformed argument is identified by its position.
"""

from __future__ import annotations

import datetime
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from imagebridge.config._tree import MAX_NESTING, nesting_depth
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "ENV_PREFIX",
    "MAX_OVERRIDE_BYTES",
    "Assignment",
    "environment_assignments",
    "parse_set",
    "parse_unset",
    "parse_value",
]

ENV_PREFIX = "IMAGEGEN_BRIDGE__"
MAX_OVERRIDE_BYTES = 1024 * 1024
MAX_KEY_BYTES = 1024
MAX_SEGMENTS = 32

_ENV_SEGMENT = re.compile(r"[A-Z0-9_]+")
_BARE_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_PROVIDER_MAPS = frozenset({"providers", "circuit_breakers"})


@dataclass(frozen=True, slots=True)
class Assignment:
    """One override: the field path, the value (``None`` = unset) and its source key.

    ``source_key`` is what provenance shows: the variable name for the environment,
    the dotted key as typed for ``--set``/``--unset``. It never holds a value.
    """

    path: tuple[str, ...]
    value: Any
    source_key: str
    unset: bool = False


def _error(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.CONFIGURATION, message, details=details)


def _byte_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def parse_value(raw: str) -> Any:
    """A TOML value, or the literal string when ``raw`` is not exactly one TOML value."""
    if _byte_len(raw) > MAX_OVERRIDE_BYTES:
        raise _error("configuration override exceeds the 1 MiB limit")
    if raw == "":
        return ""
    try:
        document = tomllib.loads(f"value = {raw}")
    except (tomllib.TOMLDecodeError, ValueError, RecursionError, UnicodeError):
        return raw
    if set(document) != {"value"}:
        # e.g. "1\nother = 2": more than one value is not a value.
        return raw
    value = document["value"]
    if nesting_depth(value) > MAX_NESTING:
        raise _error("configuration override nests tables or arrays too deeply")
    # No field holds a TOML date or time: keep such text as the string that was typed.
    return raw if _has_datetime(value) else value


def _has_datetime(value: Any) -> bool:
    if isinstance(value, list):
        return any(_has_datetime(item) for item in value)
    if isinstance(value, dict):
        return any(_has_datetime(item) for item in value.values())
    return isinstance(value, datetime.date | datetime.time)


def _provider_key(segments: list[str], literal: list[bool]) -> list[str]:
    """Inside the per-provider maps, map ``_`` to ``-`` in an unquoted provider segment."""
    if (
        len(segments) > 2
        and segments[0] == "runtime"
        and segments[1] in _PROVIDER_MAPS
        and not literal[2]
    ):
        segments = [*segments[:2], segments[2].replace("_", "-"), *segments[3:]]
    return segments


def environment_assignments(environ: dict[str, str] | Any) -> list[Assignment]:
    """``IMAGEGEN_BRIDGE__A__B=v`` → ``a.b = v`` for every matching variable, in name order."""
    assignments: list[Assignment] = []
    for name in sorted(key for key in environ if key.startswith(ENV_PREFIX)):
        rest = name[len(ENV_PREFIX) :]
        raw_segments = rest.split("__")
        if (
            not rest
            or len(raw_segments) > MAX_SEGMENTS
            or _byte_len(name) > MAX_KEY_BYTES
            or not all(_ENV_SEGMENT.fullmatch(segment) for segment in raw_segments)
        ):
            raise _error(
                "configuration environment variable name is not a valid key path "
                "(segments of A-Z, 0-9 and _ separated by __)",
                variable=name if _byte_len(name) <= MAX_KEY_BYTES else name[:64],
            )
        segments = _provider_key(
            [segment.lower() for segment in raw_segments], [False] * len(raw_segments)
        )
        assignments.append(Assignment(tuple(segments), parse_value(environ[name]), name))
    return assignments


def _dotted(key: str, position: int, option: str) -> tuple[str, ...]:
    """Split ``a.b."c-d".e``; bare segments are ``[A-Za-z0-9_-]+``, quoted ones literal."""
    invalid = _error(
        f"{option} argument {position} has an invalid key: use dotted segments of "
        "A-Z, a-z, 0-9, _ and -, or quoted segments",
        position=position,
    )
    if not key or _byte_len(key) > MAX_KEY_BYTES:
        raise invalid
    segments: list[str] = []
    literal: list[bool] = []
    index = 0
    while True:
        if index < len(key) and key[index] in "\"'":
            quote = key[index]
            end = key.find(quote, index + 1)
            if end < 0:
                raise invalid
            segment = key[index + 1 : end]
            if not segment or any(ord(ch) < 0x20 or ch in "\\\x7f" for ch in segment):
                raise invalid
            segments.append(segment)
            literal.append(True)
            index = end + 1
        else:
            end = key.find(".", index)
            end = len(key) if end < 0 else end
            segment = key[index:end]
            if not _BARE_SEGMENT.fullmatch(segment):
                raise invalid
            segments.append(segment)
            literal.append(False)
            index = end
        if index == len(key):
            break
        if key[index] != "." or index + 1 == len(key):
            raise invalid
        index += 1
    if len(segments) > MAX_SEGMENTS:
        raise invalid
    return tuple(_provider_key(segments, literal))


def parse_set(items: Sequence[str]) -> list[Assignment]:
    """``KEY=VALUE`` arguments; the value is TOML or else a literal string."""
    assignments: list[Assignment] = []
    for position, item in enumerate(items, start=1):
        key, sep, raw = item.partition("=")
        if not sep:
            raise _error(
                f"--set argument {position} must have the form KEY=VALUE", position=position
            )
        path = _dotted(key, position, "--set")
        assignments.append(Assignment(path, parse_value(raw), key))
    return assignments


def parse_unset(keys: Sequence[str]) -> list[Assignment]:
    """Dotted keys whose optional field becomes null (or whose map entry is removed)."""
    return [
        Assignment(_dotted(key, position, "--unset"), None, key, unset=True)
        for position, key in enumerate(keys, start=1)
    ]
