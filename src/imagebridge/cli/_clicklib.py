"""The click exception types, wherever the installed typer keeps them.

Typer 0.29 vendors click privately; older releases re-export the ``click`` package. The
CLI runs commands with ``standalone_mode=False`` so that it formats usage errors itself,
which means catching these types. They are found through typer's public
``typer.BadParameter`` (whose bases are click's ``UsageError`` and ``ClickException``),
so this module never imports a private module.
"""

from __future__ import annotations

import typer

__all__ = ["Abort", "BadParameter", "ClickException", "Exit", "UsageError"]

BadParameter = typer.BadParameter
Abort = typer.Abort
Exit = typer.Exit


def _base(name: str) -> type[Exception]:
    for cls in BadParameter.__mro__:
        if cls.__name__ == name and issubclass(cls, Exception):
            return cls
    raise ImportError(f"typer.BadParameter does not derive from {name}")  # pragma: no cover


UsageError = _base("UsageError")
ClickException = _base("ClickException")
