"""Small helpers for configuration trees (nested ``dict``/``list``/scalar data)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["MAX_NESTING", "format_path", "iter_leaves", "nesting_depth"]

MAX_NESTING = 64
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def format_path(path: Sequence[str | int]) -> str:
    """``("runtime", "providers", "a.b", "x")`` → ``runtime.providers."a.b".x``.

    Segments that are not bare keys are quoted, so the result reads back unambiguously
    with ``--set``; list indices become ``[i]``.
    """
    text = ""
    for segment in path:
        if isinstance(segment, int):
            text += f"[{segment}]"
            continue
        part = segment if _BARE.fullmatch(segment) else json.dumps(segment)
        text = part if not text else f"{text}.{part}"
    return text


def iter_leaves(tree: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (path, value) below ``tree`` that is not a table; arrays are leaves."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from iter_leaves(value, (*prefix, key))
    elif prefix:
        yield prefix, tree


def nesting_depth(value: Any) -> int:
    """How deeply tables and arrays nest (a scalar is 0), computed without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest
