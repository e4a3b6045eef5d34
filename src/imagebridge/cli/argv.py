"""Global flags are valid anywhere on the command line, as with the original (clap ``global``).

Typer (click) only accepts a group's options before the subcommand, so
``imagegen-bridge generate "fox" --json`` would fail. :func:`hoist_global_flags` moves every
global flag (and the value of the ones that take one) in front of the subcommand before
parsing; everything after a ``--`` separator is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BOOLEAN_FLAGS", "VALUE_FLAGS", "Hoisted", "hoist_global_flags"]

VALUE_FLAGS = frozenset({"--config", "--set", "--unset", "--remote"})
BOOLEAN_FLAGS = frozenset(
    {"--json", "--plain", "-q", "--quiet", "--allow-inline", "--local-artifact-paths"}
)


@dataclass(frozen=True, slots=True)
class Hoisted:
    argv: list[str]
    """Global flags first, then the rest in their original order."""
    json: bool
    """Whether ``--json`` was given (usage errors are then reported as JSON)."""


def hoist_global_flags(argv: Sequence[str]) -> Hoisted:
    """Reorder ``argv`` so that global flags precede the subcommand."""
    front: list[str] = []
    rest: list[str] = []
    index = 0
    tokens = list(argv)
    while index < len(tokens):
        arg = tokens[index]
        if arg == "--":
            rest.extend(tokens[index:])
            break
        name = arg.split("=", 1)[0]
        if arg in BOOLEAN_FLAGS or (name in VALUE_FLAGS and "=" in arg):
            front.append(arg)
        elif arg in VALUE_FLAGS and index + 1 < len(tokens):
            front.extend((arg, tokens[index + 1]))
            index += 1
        else:
            rest.append(arg)
        index += 1
    return Hoisted(argv=front + rest, json="--json" in front)
