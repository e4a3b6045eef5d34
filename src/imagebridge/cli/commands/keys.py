"""``keys``: named API keys with image quotas, in the jobs database (docs/keys.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from imagebridge.cli.commands._params import cli_context

__all__ = ["register"]

KeyArg = Annotated[str, typer.Argument(metavar="KEY", help="The key's id or name.")]
_LIMIT = "A number, or 'none' to remove the limit."
DayOpt = Annotated[str | None, typer.Option("--images-per-day", metavar="N", help=_LIMIT)]
WeekOpt = Annotated[str | None, typer.Option("--images-per-week", metavar="N", help=_LIMIT)]
MonthOpt = Annotated[str | None, typer.Option("--images-per-month", metavar="N", help=_LIMIT)]
ConcurrentOpt = Annotated[
    str | None, typer.Option("--max-concurrent", metavar="N", help="Requests at once; " + _LIMIT)
]
ProvidersOpt = Annotated[
    str | None,
    typer.Option("--providers", metavar="A,B", help="Allowed providers, or 'none' for all."),
]
ExpiresOpt = Annotated[
    str | None,
    typer.Option(
        "--expires",
        metavar="DATE",
        help="YYYY-MM-DD (valid through that day) or an ISO time, in server.keys.time_zone; "
        "'none' never expires.",
    ),
]
FilterKeyOpt = Annotated[str | None, typer.Option("--key", metavar="KEY", help="Id or name.")]


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Named API keys with image quotas.", no_args_is_help=True)

    @group.command("create")
    def create(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(metavar="NAME")],
        images_per_day: DayOpt = None,
        images_per_week: WeekOpt = None,
        images_per_month: MonthOpt = None,
        max_concurrent: ConcurrentOpt = None,
        providers: ProvidersOpt = None,
        expires: ExpiresOpt = None,
    ) -> int:
        """Create a key; its secret is printed once (only its hash is kept)."""
        from imagebridge.cli.keys import keys_create, limit_flags

        flags = limit_flags(
            images_per_day, images_per_week, images_per_month, max_concurrent, providers, expires
        )
        return keys_create(cli_context(ctx), name, flags)

    @group.command("list")
    def list_(ctx: typer.Context) -> int:
        """Every key with its state and remaining images (never a secret)."""
        from imagebridge.cli.keys import keys_list

        return keys_list(cli_context(ctx))

    @group.command("show")
    def show(ctx: typer.Context, key: KeyArg) -> int:
        """One key."""
        from imagebridge.cli.keys import keys_show

        return keys_show(cli_context(ctx), key)

    @group.command("update")
    def update(
        ctx: typer.Context,
        key: KeyArg,
        images_per_day: DayOpt = None,
        images_per_week: WeekOpt = None,
        images_per_month: MonthOpt = None,
        max_concurrent: ConcurrentOpt = None,
        providers: ProvidersOpt = None,
        expires: ExpiresOpt = None,
    ) -> int:
        """Change a key's limits; takes effect at once on every instance."""
        from imagebridge.cli.keys import keys_update, limit_flags

        flags = limit_flags(
            images_per_day, images_per_week, images_per_month, max_concurrent, providers, expires
        )
        return keys_update(cli_context(ctx), key, flags)

    @group.command("revoke")
    def revoke(ctx: typer.Context, key: KeyArg) -> int:
        """Refuse the key from its next request on, on every instance."""
        from imagebridge.cli.keys import keys_revoke

        return keys_revoke(cli_context(ctx), key)

    @group.command("rotate")
    def rotate(ctx: typer.Context, key: KeyArg) -> int:
        """Give the key a new secret (printed once); the old one stops at once."""
        from imagebridge.cli.keys import keys_rotate

        return keys_rotate(cli_context(ctx), key)

    @group.command("usage")
    def usage(
        ctx: typer.Context,
        key: FilterKeyOpt = None,
        provider: Annotated[str | None, typer.Option("--provider", metavar="NAME")] = None,
        account: Annotated[str | None, typer.Option("--account", metavar="NAME")] = None,
        since: Annotated[str | None, typer.Option("--since", metavar="YYYY-MM-DD")] = None,
        until: Annotated[str | None, typer.Option("--until", metavar="YYYY-MM-DD")] = None,
        csv: Annotated[bool, typer.Option("--csv", help="Comma-separated values.")] = False,
    ) -> int:
        """Images per key per day (requested, delivered, failed, unknown)."""
        from imagebridge.cli.keys import keys_usage

        return keys_usage(
            cli_context(ctx),
            key=key,
            provider=provider,
            account=account,
            since=since,
            until=until,
            csv=csv,
        )

    @group.command("audit")
    def audit(ctx: typer.Context, key: FilterKeyOpt = None) -> int:
        """Every key administration action: who, what, when."""
        from imagebridge.cli.keys import keys_audit

        return keys_audit(cli_context(ctx), key)

    app.add_typer(group, name="keys")
