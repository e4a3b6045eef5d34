"""``mcp``: the MCP server for Claude, Cursor, VS Code, Codex … (implementation in
:mod:`imagebridge.mcp`; see docs/mcp.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from imagebridge.cli.commands._params import cli_context

__all__ = ["register"]


def _group() -> None:
    """The holder group (never invoked: the root dispatches to ``mcp`` directly)."""


def register(app: typer.Typer) -> None:
    # A holder with one command and no callback would be built as a bare command; the
    # lazy root expects a group (as for the modules that define several commands).
    app.callback()(_group)

    @app.command("mcp")
    def mcp(
        ctx: typer.Context,
        transport: Annotated[
            str,
            typer.Option(
                "--transport",
                metavar="stdio|streamable-http",
                help="stdio (default: the MCP client starts this command) or streamable-http.",
            ),
        ] = "stdio",
        bind: Annotated[
            str | None,
            typer.Option(
                "--bind",
                metavar="IP:PORT",
                help="Loopback address for streamable-http (default 127.0.0.1:8788).",
            ),
        ] = None,
    ) -> int:
        """Run the MCP server: image tools over stdio, or streamable HTTP on loopback.

        The engine runs in-process, or on the bridge given by --remote / IMAGEGEN_BRIDGE_URL.
        """
        from imagebridge.mcp.options import options_from
        from imagebridge.mcp.server import run

        context = cli_context(ctx)
        options = options_from(transport, bind, context.remote_url(), context.env)
        run(context.config(), options, env=context.env)
        return 0
