"""Field types shared by the configuration model.

Values reach the model as TOML data (file, environment and ``--set`` values are all
parsed as TOML), so numbers and booleans are strict: ``"5"`` is not an integer and
``1`` is not ``true``. Integer widths follow the original's Rust types, so a value
that would not fit there is a schema error here too. Validators never put the
rejected value into their messages: the loader reports only the field path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, PlainValidator, Strict
from pydantic_core import PydanticCustomError

__all__ = [
    "AUTO",
    "I64",
    "MAX_PATH_BYTES",
    "U8",
    "U16",
    "U32",
    "U64",
    "UNLIMITED",
    "Bool",
    "Capacity",
    "ConfigPath",
    "Parallelism",
    "StoreLocation",
    "Str",
    "UnitFloat",
    "capacity_value",
    "parallelism_value",
]

UNLIMITED: Literal["unlimited"] = "unlimited"
AUTO: Literal["auto"] = "auto"
MAX_PATH_BYTES = 4096
_I64_MAX = 2**63 - 1

Bool = Annotated[bool, Strict()]
Str = Annotated[str, Strict()]
U8 = Annotated[int, Strict(), Field(ge=0, le=255)]
U16 = Annotated[int, Strict(), Field(ge=0, le=65_535)]
U32 = Annotated[int, Strict(), Field(ge=0, le=2**32 - 1)]
U64 = Annotated[int, Strict(), Field(ge=0, le=_I64_MAX)]
I64 = Annotated[int, Strict(), Field(ge=-(2**63), le=_I64_MAX)]
UnitFloat = Annotated[float, Strict()]
"""A float (TOML integers are accepted); its 0..1 range is a semantic check."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_capacity(value: Any) -> int | Literal["unlimited"]:
    if value == UNLIMITED and isinstance(value, str):
        return UNLIMITED
    if _is_int(value) and 0 <= value <= _I64_MAX:
        return int(value)
    raise PydanticCustomError("capacity", 'expected a non-negative integer or "unlimited"')


def _validate_parallelism(value: Any) -> int | Literal["auto"]:
    if value == AUTO and isinstance(value, str):
        return AUTO
    if _is_int(value) and 0 <= value <= _I64_MAX:
        return int(value)
    raise PydanticCustomError("parallelism", 'expected a non-negative integer or "auto"')


def _validate_path(value: Any) -> Any:
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str):
        raise PydanticCustomError("path_type", "expected a path string")
    if not value:
        raise PydanticCustomError("path_empty", "a path must not be empty")
    if "\x00" in value:
        raise PydanticCustomError("path_nul", "a path must not contain NUL characters")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise PydanticCustomError("path_too_long", "a path must be at most 4096 bytes")
    return value


Capacity = Annotated[
    int | Literal["unlimited"],
    PlainValidator(_validate_capacity, json_schema_input_type=int | Literal["unlimited"]),
    PlainSerializer(lambda value: value),
]
"""A pool size: a non-negative integer or ``"unlimited"`` (0 is checked per field)."""

Parallelism = Annotated[
    int | Literal["auto"],
    PlainValidator(_validate_parallelism, json_schema_input_type=int | Literal["auto"]),
    PlainSerializer(lambda value: value),
]
"""Simultaneous outputs: ``"auto"`` (the provider's max_outputs) or an integer."""

ConfigPath = Annotated[Path, BeforeValidator(_validate_path)]
"""A filesystem path, kept exactly as configured (relative paths stay relative)."""

_URL_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _validate_store_location(value: Any) -> Path | str:
    text = _validate_path(value)
    # A URL stays text: ``Path`` would fold the ``//`` of ``postgresql://host/db``.
    return str(text) if _URL_PREFIX.match(text) else Path(text)


StoreLocation = Annotated[
    Path | str,
    PlainValidator(_validate_store_location, json_schema_input_type=str),
    PlainSerializer(str, when_used="json"),
]
"""Where a store lives: a filesystem path (a ``Path``), or a URL kept verbatim (a ``str``).

Which URL schemes are usable (``sqlite:///``, ``postgresql://``) is a semantic check."""


def capacity_value(value: int | Literal["unlimited"]) -> int | None:
    """``None`` means unlimited; an integer is the configured bound."""
    return None if value == UNLIMITED else int(value)


def parallelism_value(value: int | Literal["auto"]) -> int | None:
    """``None`` means automatic (use the provider's output bound)."""
    return None if value == AUTO else int(value)
