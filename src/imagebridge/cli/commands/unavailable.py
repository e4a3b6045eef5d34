"""``update`` and ``gateway``: the original's commands this implementation does not carry.

Both manage the original's release artifacts (its Rust binary, its Docker images and their
blue/green hand-over), which a Python package does not have. Someone who learnt the
original, or a script written for it, still types them, so instead of click's bare
"No such command" each answers with what to do here, as an ``invalid_request`` error:
exit 2 (the status the original gives for a refused ``update`` mutation and for any usage
mistake), ``--json`` errors on stderr like every other failure. Every argument and flag the
original accepted is taken and ignored, so the answer never degrades into a usage error
about a flag. No configuration is read: like the original, these work without a config.
"""

from __future__ import annotations

from typing import Any, NoReturn

import typer

__all__ = ["GATEWAY_SUGGESTIONS", "UPDATE_SUGGESTIONS", "register"]

PACKAGE = "imagebridge"
UPDATE_SUGGESTIONS = (
    f"pip install -U {PACKAGE}",
    f"pipx upgrade {PACKAGE}",
    f"uv tool upgrade {PACKAGE}",
)
"""The upgrade command for each common installer, in the order users most often have them."""
GATEWAY_SUGGESTIONS = (
    "For a blue/green hand-over of one Codex login, start each slot with "
    "`imagegen-bridge serve` and `server.activation_lock`, behind your own reverse proxy.",
    "To run several bridges on one job history, use the PostgreSQL store (docs/deployment.md).",
)
_ACCEPT_ANYTHING: dict[str, Any] = {"ignore_unknown_options": True, "allow_extra_args": True}


def _refuse(command: str, message: str, suggestions: tuple[str, ...]) -> NoReturn:
    from imagebridge._version import __version__
    from imagebridge.contract.errors import BridgeError, ErrorCode

    raise BridgeError(
        ErrorCode.INVALID_REQUEST,
        message.format(version=__version__),
        details={
            "kind": "unavailable_command",
            "command": command,
            "current_version": __version__,
        },
        suggestions=list(suggestions),
    )


def register(app: typer.Typer) -> None:
    @app.command("update", context_settings=_ACCEPT_ANYTHING, add_help_option=False)
    def update(ctx: typer.Context) -> None:
        """Not available here: upgrade the Python package with its installer instead."""
        _refuse(
            "update",
            "`update` is not part of the Python imagebridge ({version} installed): it "
            "replaced the original's release binary and Docker image. Upgrade the package "
            "with the installer you used",
            UPDATE_SUGGESTIONS,
        )

    @app.command("gateway", context_settings=_ACCEPT_ANYTHING, add_help_option=False)
    def gateway(ctx: typer.Context) -> None:
        """Not available here: the original's blue/green front door for its Docker slots."""
        _refuse(
            "gateway",
            "`gateway` is not part of the Python imagebridge ({version} installed): it was "
            "the original's blue/green front door for its Docker slots",
            GATEWAY_SUGGESTIONS,
        )
