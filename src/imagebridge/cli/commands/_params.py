"""Small helpers to declare typer parameters as data and to reach the invocation state."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from imagebridge.cli.context import CliContext

__all__ = ["argument", "cli_context", "option", "with_parameters"]


def cli_context(ctx: typer.Context) -> CliContext:
    """The :class:`CliContext` the root callback stored for this invocation."""
    holder = ctx.find_root().obj
    context = getattr(holder, "context", None)
    if not isinstance(context, CliContext):  # pragma: no cover - defensive
        raise RuntimeError("CLI context is not initialised")
    return context


def option(
    name: str,
    annotation: Any,
    *decls: str,
    default: Any = None,
    help: str | None = None,
    panel: str | None = None,
    parser: Callable[[str], Any] | None = None,
    metavar: str | None = None,
) -> inspect.Parameter:
    """One keyword parameter carrying a ``typer.Option``."""
    info = typer.Option(
        *decls,
        help=help,
        rich_help_panel=panel,
        parser=parser,
        metavar=metavar,
        show_default=False,
    )
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[annotation, info],
        default=default,
    )


def argument(
    name: str, annotation: Any, *, default: Any = None, help: str | None = None, metavar: str
) -> inspect.Parameter:
    info = typer.Argument(help=help, metavar=metavar, show_default=False)
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        annotation=Annotated[annotation, info],
        default=default,
    )


_CTX = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)


def with_parameters(
    parameters: list[inspect.Parameter],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a ``def command(ctx, **values)`` function the declared typer signature."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        function.__signature__ = inspect.Signature([_CTX, *parameters])  # type: ignore[attr-defined]
        return function

    return decorate
