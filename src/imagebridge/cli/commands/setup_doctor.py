"""``setup``, ``doctor`` and ``auth-doctor``."""

from __future__ import annotations

from typing import Annotated

import typer

from imagebridge.cli.commands._params import cli_context

__all__ = ["register"]

YesOpt = Annotated[bool, typer.Option("--yes", help="Answer yes to every confirmation.")]
NonInteractiveOpt = Annotated[
    bool, typer.Option("--non-interactive", "--no-input", help="Never prompt.")
]
LiveProbeOpt = Annotated[
    bool, typer.Option("--live-probe", help="Also run one real (possibly paid) generation.")
]
ProviderOpt = Annotated[str | None, typer.Option("--provider", metavar="NAME")]


def register(app: typer.Typer) -> None:
    @app.command("setup")
    def setup(
        ctx: typer.Context,
        state_root: Annotated[
            str | None,
            typer.Option("--state-root", metavar="DIR", help="Private state directory."),
        ] = None,
        output_root: Annotated[
            str | None,
            typer.Option("--output-root", metavar="DIR", help="Where images are saved."),
        ] = None,
        yes: YesOpt = False,
        non_interactive: NonInteractiveOpt = False,
        dry_run: Annotated[
            bool, typer.Option("-n", "--dry-run", help="Show the plan; change nothing.")
        ] = False,
        live_probe: LiveProbeOpt = False,
    ) -> int:
        """Create a working configuration, private state and databases (idempotent)."""
        from imagebridge.cli.setup import setup_command

        return setup_command(
            cli_context(ctx),
            state_root=state_root,
            output_root=output_root,
            yes=yes,
            non_interactive=non_interactive,
            dry_run=dry_run,
            live_probe=live_probe,
        )

    @app.command("doctor")
    def doctor(
        ctx: typer.Context,
        provider: ProviderOpt = None,
        live_probe: LiveProbeOpt = False,
        yes: YesOpt = False,
        non_interactive: NonInteractiveOpt = False,
    ) -> int:
        """Check configuration, Codex, storage, databases, port and providers."""
        from imagebridge.cli.doctor import doctor_command

        return doctor_command(
            cli_context(ctx),
            provider=provider,
            live_probe=live_probe,
            yes=yes,
            non_interactive=non_interactive,
        )

    @app.command("auth-doctor")
    def auth_doctor(ctx: typer.Context, provider: ProviderOpt = None) -> int:
        """Check the Codex login and provider readiness without generating anything."""
        from imagebridge.cli.doctor import auth_doctor_command

        return auth_doctor_command(cli_context(ctx), provider=provider)
