"""``providers``, ``session``, ``preset`` and ``jobs``: local by default, or ``--remote``."""

from __future__ import annotations

from typing import Annotated

import typer

from imagebridge.cli.choices import choice, metavar, ranged
from imagebridge.cli.commands._params import cli_context

__all__ = ["register"]

ProviderOpt = Annotated[
    str | None, typer.Option("--provider", metavar="NAME", help="Default: the default provider.")
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Show what would happen; change nothing.")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Really do it.")]
NameArg = Annotated[str, typer.Argument(metavar="NAME")]
FromOpt = Annotated[
    str,
    typer.Option(
        "--from", metavar="FILE|-",
        help="An ImagePresetTemplate or a full ImageRequest (reduced to reusable fields).",
    ),
]  # fmt: skip
DescriptionOpt = Annotated[str | None, typer.Option("--description", metavar="TEXT")]
JobArg = Annotated[str, typer.Argument(metavar="JOB_ID")]


def _providers() -> typer.Typer:
    group = typer.Typer(help="Registered providers and what they support.", no_args_is_help=True)

    @group.command("list")
    def list_(ctx: typer.Context) -> int:
        """Print the provider descriptors."""
        from imagebridge.cli.resources import providers_list

        return providers_list(cli_context(ctx))

    @group.command("capabilities")
    def capabilities(
        ctx: typer.Context,
        provider: ProviderOpt = None,
        model: Annotated[str | None, typer.Option("--model", metavar="MODEL")] = None,
        size_match: Annotated[
            bool,
            typer.Option(
                "--size-match",
                help="Print {capabilities, size_match}: how often the provider delivered the "
                "size asked (a running bridge's rates with --remote).",
            ),
        ] = False,
    ) -> int:
        """Print a provider's capability document (sizes, formats, batching …)."""
        from imagebridge.cli.resources import providers_capabilities

        return providers_capabilities(cli_context(ctx), provider, model, size_match=size_match)

    @group.command("quota")
    def quota(
        ctx: typer.Context,
        provider: Annotated[
            str | None,
            typer.Option("--provider", metavar="NAME", help="Default: every enabled provider."),
        ] = None,
        refresh: Annotated[
            bool,
            typer.Option(
                "--refresh", help="Ask the backend now instead of using a cached reading."
            ),
        ] = False,
    ) -> int:
        """Show each provider's plan usage windows (a read, never a generation)."""
        from imagebridge.cli.resources import providers_quota

        return providers_quota(cli_context(ctx), provider, refresh=refresh)

    @group.command("readiness")
    def readiness(ctx: typer.Context) -> int:
        """Run the non-generating readiness checks of every provider."""
        from imagebridge.cli.resources import providers_readiness

        return providers_readiness(cli_context(ctx))

    return group


def _session() -> typer.Typer:
    group = typer.Typer(help="Persistent provider sessions (by key).", no_args_is_help=True)

    @group.command("get")
    def get(
        ctx: typer.Context,
        key: Annotated[str, typer.Argument(metavar="KEY")],
        provider: ProviderOpt = None,
    ) -> int:
        """Show the thread a session key is bound to."""
        from imagebridge.cli.resources import session_get

        return session_get(cli_context(ctx), key, provider)

    @group.command("delete")
    def delete(
        ctx: typer.Context,
        key: Annotated[str, typer.Argument(metavar="KEY")],
        provider: ProviderOpt = None,
        dry_run: DryRunOpt = False,
        force: ForceOpt = False,
    ) -> int:
        """Forget a session binding (the upstream thread is kept)."""
        from imagebridge.cli.resources import session_delete

        return session_delete(cli_context(ctx), key, provider, dry_run=dry_run, force=force)

    return group


def _preset() -> typer.Typer:
    group = typer.Typer(help="Stored request templates.", no_args_is_help=True)

    @group.command("list")
    def list_(
        ctx: typer.Context,
        limit: Annotated[
            int, typer.Option("--limit", parser=ranged(1, 100), metavar="1..100")
        ] = 100,
        cursor: Annotated[str | None, typer.Option("--cursor", metavar="CURSOR")] = None,
    ) -> int:
        """List presets by name."""
        from imagebridge.cli.resources import preset_list

        return preset_list(cli_context(ctx), limit, cursor)

    @group.command("get")
    def get(ctx: typer.Context, name: NameArg) -> int:
        """Show one preset."""
        from imagebridge.cli.resources import preset_get

        return preset_get(cli_context(ctx), name)

    @group.command("create")
    def create(
        ctx: typer.Context, name: NameArg, source: FromOpt, description: DescriptionOpt = None
    ) -> int:
        """Store a new preset."""
        from imagebridge.cli.resources import preset_write

        return preset_write(cli_context(ctx), name, source, description, create=True)

    @group.command("update")
    def update(
        ctx: typer.Context, name: NameArg, source: FromOpt, description: DescriptionOpt = None
    ) -> int:
        """Replace a preset (omitting --description clears it)."""
        from imagebridge.cli.resources import preset_write

        return preset_write(cli_context(ctx), name, source, description, create=False)

    @group.command("delete")
    def delete(
        ctx: typer.Context, name: NameArg, dry_run: DryRunOpt = False, force: ForceOpt = False
    ) -> int:
        """Delete a preset."""
        from imagebridge.cli.resources import preset_delete

        return preset_delete(cli_context(ctx), name, dry_run=dry_run, force=force)

    return group


def _jobs() -> typer.Typer:
    group = typer.Typer(
        help="Durable jobs on a running bridge (--remote, IMAGEGEN_BRIDGE_URL or server.bind).",
        no_args_is_help=True,
    )

    @group.command("list")
    def list_(
        ctx: typer.Context,
        limit: Annotated[
            int, typer.Option("--limit", parser=ranged(1, 100), metavar="1..100")
        ] = 20,
        cursor: Annotated[str | None, typer.Option("--cursor", metavar="CURSOR")] = None,
        status: Annotated[
            str | None,
            typer.Option("--status", parser=choice("job_status"), metavar=metavar("job_status")),
        ] = None,
        visibility: Annotated[
            str | None,
            typer.Option(
                "--visibility", parser=choice("visibility"), metavar=metavar("visibility")
            ),
        ] = None,
        favorite: Annotated[
            bool | None, typer.Option("--favorite/--not-favorite", show_default=False)
        ] = None,
        search: Annotated[str | None, typer.Option("--search", metavar="TEXT")] = None,
    ) -> int:
        """List job summaries, newest first."""
        from imagebridge.cli.jobs import jobs_list

        return jobs_list(
            cli_context(ctx),
            limit=limit,
            cursor=cursor,
            status=status,
            visibility=visibility,
            favorite=favorite,
            search=search,
        )

    @group.command("get")
    def get(ctx: typer.Context, job_id: JobArg) -> int:
        """Show one job with its request and result."""
        from imagebridge.cli.jobs import jobs_get

        return jobs_get(cli_context(ctx), job_id)

    @group.command("cancel")
    def cancel(ctx: typer.Context, job_id: JobArg) -> int:
        """Request cancellation (best effort: a running provider may still finish)."""
        from imagebridge.cli.jobs import jobs_cancel

        return jobs_cancel(cli_context(ctx), job_id)

    @group.command("wait")
    def wait(
        ctx: typer.Context,
        job_id: JobArg,
        timeout_ms: Annotated[
            int, typer.Option("--timeout-ms", parser=ranged(1), metavar="MS")
        ] = 1_800_000,
        interval_ms: Annotated[
            int, typer.Option("--interval-ms", parser=ranged(100, 60_000), metavar="MS")
        ] = 1_000,
    ) -> int:
        """Wait until a job finishes; exits like the job (0 on success)."""
        from imagebridge.cli.jobs import jobs_wait

        return jobs_wait(cli_context(ctx), job_id, timeout_ms=timeout_ms, interval_ms=interval_ms)

    return group


def register(app: typer.Typer) -> None:
    app.add_typer(_providers(), name="providers")
    app.add_typer(_session(), name="session")
    app.add_typer(_preset(), name="preset")
    app.add_typer(_jobs(), name="jobs")
