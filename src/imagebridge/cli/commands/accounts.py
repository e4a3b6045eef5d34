"""``login`` and ``accounts list|status|remove``: the bridge's own ChatGPT logins."""

from __future__ import annotations

from typing import Annotated

import typer

from imagebridge.cli.commands._params import cli_context

__all__ = ["register"]

AccountOpt = Annotated[
    str | None,
    typer.Option("--account", metavar="NAME", help="Login name (default: 'default')."),
]


def _accounts() -> typer.Typer:
    group = typer.Typer(help="The bridge's own ChatGPT logins.", no_args_is_help=True)

    @group.command("list")
    def list_(ctx: typer.Context) -> int:
        """Names of the stored logins and which one the Codex transports use."""
        from imagebridge.cli.accounts import accounts_list

        return accounts_list(cli_context(ctx))

    @group.command("status")
    def status(ctx: typer.Context, account: AccountOpt = None) -> int:
        """Expiry, plan and a short account hash of each login (never a token)."""
        from imagebridge.cli.accounts import accounts_status

        return accounts_status(cli_context(ctx), account)

    @group.command("remove")
    def remove(
        ctx: typer.Context,
        account: Annotated[str, typer.Argument(metavar="NAME", help="Login to delete.")],
        yes: Annotated[bool, typer.Option("--yes", help="Delete without asking.")] = False,
    ) -> int:
        """Delete a stored login (its tokens are gone from this machine)."""
        from imagebridge.cli.accounts import accounts_remove

        return accounts_remove(cli_context(ctx), account, yes=yes)

    return group


def register(app: typer.Typer) -> None:
    @app.command("login")
    def login(
        ctx: typer.Context,
        account: AccountOpt = None,
        browser: Annotated[
            bool,
            typer.Option("--browser", help="Sign in in a browser (loopback callback) instead "
                         "of with a device code."),
        ] = False,
        no_open: Annotated[
            bool, typer.Option("--no-open", help="With --browser: print the URL, open nothing.")
        ] = False,
    ) -> int:  # fmt: skip
        """Sign in to ChatGPT and store the login in the bridge's data directory."""
        from imagebridge.cli.accounts import login as run_login

        return run_login(cli_context(ctx), account, browser=browser, open_browser=not no_open)

    app.add_typer(_accounts(), name="accounts")
