"""Reading the ``openai`` SDK's type hints: the field tables of the Images and Responses
tests walk every parameter the SDK declares, so a field the SDK adds fails a table."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal


def literals(hint: Any) -> list[Any]:
    """Every ``Literal`` value ``hint`` admits (through unions and ``Optional``)."""
    if typing.get_origin(hint) is Literal:
        return list(typing.get_args(hint))
    values: list[Any] = []
    for arg in typing.get_args(hint):
        if arg is not type(None) and not isinstance(arg, types.NoneType):
            values.extend(literals(arg))
    return values
