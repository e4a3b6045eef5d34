"""Closed value sets of the command-line flags, and their parsers.

These mirror the contract enums (``imagebridge.contract.enums``) as plain tuples so that
building the command tree for ``--help`` never imports pydantic; a test keeps them equal.
A bad value fails the way the original's does: ``unsupported value `x```.
"""

from __future__ import annotations

from collections.abc import Callable

from imagebridge.cli._clicklib import BadParameter

__all__ = ["VALUE_SETS", "choice", "metavar", "ranged"]

VALUE_SETS: dict[str, tuple[str, ...]] = {
    "quality": ("auto", "low", "medium", "high"),
    "format": ("png", "jpeg", "webp"),
    "background": ("auto", "opaque", "transparent"),
    "transparency": ("auto", "native", "chroma_key"),
    "moderation": ("auto", "low"),
    "resolution": ("1k", "2k", "4k"),
    "failure_policy": ("fail_fast", "best_effort"),
    "batch_execution": ("auto", "sequential", "parallel"),
    "input_fidelity": ("low", "high"),
    "action": ("auto", "generate", "edit"),
    "response_format": ("b64_json", "url", "artifact", "metadata"),
    "collision": ("error", "suffix"),
    "metadata": ("none", "sidecar", "embedded", "sidecar_and_embedded"),
    "compatibility": ("strict", "normalize", "best_effort"),
    "negative_prompt_mode": ("auto", "native", "merge", "reject"),
    "revised_prompt": ("include", "omit", "require"),
    "session": ("isolated", "persistent", "thread"),
    "fallback_policy": ("on_unavailable", "on_error"),
    "job_status": ("queued", "running", "succeeded", "failed", "cancelled", "interrupted"),
    "visibility": ("active", "hidden", "all"),
    "schema_kind": ("json-schema", "openapi"),
    "shell": ("bash", "zsh", "fish", "powershell"),
}


def choice(kind: str) -> Callable[[str], str]:
    """A parser accepting exactly the snake_case names of one value set."""
    allowed = VALUE_SETS[kind]

    def parse(value: str) -> str:
        if value not in allowed:
            raise BadParameter(
                f"unsupported value `{value}` (expected one of: {', '.join(allowed)})"
            )
        return value

    parse.__name__ = f"parse_{kind}"
    return parse


def metavar(kind: str) -> str:
    return "[" + "|".join(VALUE_SETS[kind]) + "]"


def ranged(low: int, high: int | None = None) -> Callable[[str | int], int]:
    """An integer parser with an inclusive range (``high=None``: no upper bound)."""

    def parse(value: str | int) -> int:
        if isinstance(value, int):  # a declared default
            return value
        try:
            number = int(value, 10)
        except ValueError:
            raise BadParameter(f"unsupported value `{value}` (expected an integer)") from None
        if number < low or (high is not None and number > high):
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            raise BadParameter(f"unsupported value `{value}` (expected {bound})")
        return number

    parse.__name__ = f"parse_{low}_{high}"
    return parse
