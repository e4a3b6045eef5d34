"""``config``, ``artifacts``, ``schema``, ``completions`` and ``man``."""

from __future__ import annotations

from typing import Annotated

import typer

from imagebridge.cli.choices import choice, metavar
from imagebridge.cli.commands._params import cli_context

__all__ = ["register"]

DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Report only; change nothing.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Apply the changes.")]
OutputFileOpt = Annotated[
    str | None, typer.Option("-o", "--output", metavar="FILE|-", help="Write here (default -).")
]


def _config() -> typer.Typer:
    group = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)

    @group.command("check")
    def check(ctx: typer.Context) -> int:
        """Validate the configuration; never changes anything (exit 2 on issues)."""
        from imagebridge.cli.maintenance import config_check

        return config_check(cli_context(ctx))

    @group.command("show")
    def show(ctx: typer.Context) -> int:
        """Print the effective configuration (secrets appear only as variable names)."""
        from imagebridge.cli.maintenance import config_show

        return config_show(cli_context(ctx))

    @group.command("origins")
    def origins(ctx: typer.Context) -> int:
        """Print where each setting came from (default, file, environment, override)."""
        from imagebridge.cli.maintenance import config_origins

        return config_origins(cli_context(ctx))

    return group


def _artifacts() -> typer.Typer:
    group = typer.Typer(help="Maintain the artifact store.", no_args_is_help=True)

    @group.command("cleanup")
    def cleanup(ctx: typer.Context, dry_run: DryRunOpt = False, force: ForceOpt = False) -> int:
        """Delete verified bridge-owned artifacts beyond the retention policy."""
        from imagebridge.cli.maintenance import artifacts_cleanup

        return artifacts_cleanup(cli_context(ctx), dry_run=dry_run, force=force)

    @group.command("repair")
    def repair(ctx: typer.Context, dry_run: DryRunOpt = False, force: ForceOpt = False) -> int:
        """Audit (--dry-run) or repair (--force) orphaned ownership records."""
        from imagebridge.cli.maintenance import artifacts_repair

        return artifacts_repair(cli_context(ctx), dry_run=dry_run, force=force)

    @group.command("migrate")
    def migrate(
        ctx: typer.Context,
        to: Annotated[str, typer.Option("--to", metavar="s3|filesystem", help="Target store.")],
        dry_run: DryRunOpt = False,
        force: ForceOpt = False,
    ) -> int:
        """Copy every verified artifact into [artifacts.s3], or back (resumable; SHA-256)."""
        from imagebridge.cli.maintenance import artifacts_migrate

        return artifacts_migrate(cli_context(ctx), to=to, dry_run=dry_run, force=force)

    @group.command("verify")
    def verify(
        ctx: typer.Context,
        store: Annotated[
            str, typer.Option("--store", metavar="filesystem|s3", help="Which store to check.")
        ] = "filesystem",
    ) -> int:
        """Read back every artifact against its recorded SHA-256 (exit 1 if any fails)."""
        from imagebridge.cli.maintenance import artifacts_verify

        return artifacts_verify(cli_context(ctx), store=store)

    return group


def register(app: typer.Typer) -> None:
    app.add_typer(_config(), name="config")
    app.add_typer(_artifacts(), name="artifacts")

    @app.command("schema")
    def schema(
        ctx: typer.Context,
        kind: Annotated[
            str,
            typer.Option("--kind", parser=choice("schema_kind"), metavar=metavar("schema_kind")),
        ] = "json-schema",
        output: OutputFileOpt = None,
        check: Annotated[
            str | None,
            typer.Option("--check", metavar="FILE", help="Compare with FILE; exit 2 if stale."),
        ] = None,
    ) -> int:
        """Print the contract's JSON Schema or the HTTP API's OpenAPI document."""
        from imagebridge.cli.docs import schema_command

        return schema_command(cli_context(ctx), kind=kind, output=output, check=check)

    @app.command("completions")
    def completions(
        ctx: typer.Context,
        shell: Annotated[str, typer.Argument(parser=choice("shell"), metavar=metavar("shell"))],
    ) -> int:
        """Print a shell completion script (e.g. `source <(imagegen-bridge completions bash)`)."""
        from imagebridge.cli.docs import completions_command

        return completions_command(cli_context(ctx), shell)

    @app.command("man")
    def man(ctx: typer.Context, output: OutputFileOpt = None) -> int:
        """Print the manual page (roff)."""
        from imagebridge.cli.docs import man_command

        return man_command(cli_context(ctx), ctx.find_root(), output)
