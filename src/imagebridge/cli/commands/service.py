"""``serve`` and ``dashboard``."""

from __future__ import annotations

from typing import Annotated

import typer

from imagebridge.cli.commands._params import cli_context

__all__ = ["register"]

BindOpt = Annotated[
    str | None,
    typer.Option("--bind", metavar="IP:PORT", help="Listen here (overrides server.bind)."),
]


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(ctx: typer.Context, bind: BindOpt = None) -> int:
        """Run the HTTP bridge (API, jobs and dashboard) until Ctrl-C."""
        from imagebridge.cli.service import serve_command

        return serve_command(cli_context(ctx), bind)

    @app.command("dashboard")
    def dashboard(
        ctx: typer.Context,
        bind: BindOpt = None,
        open_browser: Annotated[
            bool, typer.Option("--open", help="Always open a browser.")
        ] = False,
        no_open: Annotated[bool, typer.Option("--no-open", help="Never open a browser.")] = False,
        attach_only: Annotated[
            bool, typer.Option("--attach-only", help="Only attach to a running dashboard.")
        ] = False,
    ) -> int:
        """Open the dashboard: attach to a running bridge or start one on loopback."""
        from imagebridge.cli.service import dashboard_command

        return dashboard_command(
            cli_context(ctx),
            bind=bind,
            open_browser=open_browser,
            no_open=no_open,
            attach_only=attach_only,
        )
