"""The ``imagegen-bridge`` command line: global flags, command tree and exit codes.

:func:`main` parses with typer (click underneath) in non-standalone mode so that every
outcome maps to the original's exit codes: usage mistakes exit 2, a ``BridgeError`` exits
with the code of its native error code (see :data:`imagebridge.cli.output.EXIT_CODES`),
Ctrl-C exits 130. Only typer and the CLI's own light modules are imported to build the
tree; each command imports the engine, config or storage when it runs, which keeps
``--help`` fast.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from imagebridge._version import __version__
from imagebridge.cli._clicklib import Abort, ClickException, UsageError
from imagebridge.cli.argv import hoist_global_flags
from imagebridge.cli.context import CliContext, CliUsageError, GlobalOptions
from imagebridge.cli.output import EXIT_USAGE, Output, OutputMode, exit_code_for

__all__ = ["PROG_NAME", "build_app", "main"]

PROG_NAME = "imagegen-bridge"
COMPLETE_VAR = "_IMAGEGEN_BRIDGE_COMPLETE"
GENERATION_COMMANDS = frozenset({"generate", "edit"})
REMOTE_COMMANDS = frozenset(
    {"generate", "edit", "preset", "session", "providers", "jobs", "mcp", "doctor"}
)
"""Commands that may use a running bridge (``doctor``: only for the size-match rates it
measures; every other check of doctor is local)."""
_GLOBAL = "Global options"
HELP = (
    "Image generation from your own Codex/ChatGPT login: a local CLI, an HTTP bridge "
    "with an OpenAI-compatible Images API, durable jobs, presets and a dashboard.\n\n"
    "Start with `imagegen-bridge setup`, check with `imagegen-bridge doctor`, then "
    '`imagegen-bridge generate "a red fox"` saves the image and prints its path. '
    "Global options may appear anywhere on the command line."
)


@dataclass(slots=True)
class _Invocation:
    """Shared between :func:`main` and the root callback (``ctx.obj``)."""

    output: Output
    context: CliContext | None = None
    env: dict[str, str] = field(default_factory=dict)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"{PROG_NAME} {__version__}\n")
        raise typer.Exit(0)


def root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", metavar="FILE", rich_help_panel=_GLOBAL,
                     help="TOML config file (env IMAGEGEN_BRIDGE_CONFIG)."),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", metavar="KEY=VALUE", rich_help_panel=_GLOBAL,
                     help="Override one config key (repeatable, highest precedence)."),
    ] = None,
    unsets: Annotated[
        list[str] | None,
        typer.Option("--unset", metavar="KEY", rich_help_panel=_GLOBAL,
                     help="Clear one optional config key (repeatable)."),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", rich_help_panel=_GLOBAL,
                           help="Compact JSON on stdout; errors as JSON on stderr."),
    ] = False,
    plain: Annotated[
        bool, typer.Option("--plain", rich_help_panel=_GLOBAL,
                           help="Line-oriented output for scripts."),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", rich_help_panel=_GLOBAL,
                           help="Hide status lines, notices and human output."),
    ] = False,
    allow_inline: Annotated[
        bool, typer.Option("--allow-inline", rich_help_panel=_GLOBAL,
                           help="Allow base64 image data in JSON printed to a terminal."),
    ] = False,
    local_artifact_paths: Annotated[
        bool, typer.Option("--local-artifact-paths", rich_help_panel=_GLOBAL,
                           help="With --json, generate/edit print {response, artifacts[].path} "
                           "with verified absolute paths."),
    ] = False,
    remote: Annotated[
        str | None, typer.Option("--remote", metavar="URL", rich_help_panel=_GLOBAL,
                                    help="Use a running bridge (env IMAGEGEN_BRIDGE_URL)."),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_version,
                           help="Print the version and exit."),
    ] = False,
) -> None:  # fmt: skip
    invocation: _Invocation = ctx.obj
    if json_output and plain:
        raise CliUsageError("--json cannot be used with --plain")
    mode = OutputMode.JSON if json_output else OutputMode.PLAIN if plain else OutputMode.HUMAN
    invocation.output = Output(mode=mode, quiet=quiet)
    if local_artifact_paths:
        if not json_output:
            raise CliUsageError("--local-artifact-paths requires --json")
        if ctx.invoked_subcommand not in GENERATION_COMMANDS:
            raise CliUsageError(
                "--local-artifact-paths requires a non-dry-run generate or edit command"
            )
    if remote is not None and ctx.invoked_subcommand not in REMOTE_COMMANDS:
        raise CliUsageError(
            "--remote applies only to generate, edit, preset, session, providers, jobs, mcp "
            "and doctor"
        )
    invocation.context = CliContext(
        options=GlobalOptions(
            config=config,
            sets=tuple(sets or ()),
            unsets=tuple(unsets or ()),
            allow_inline=allow_inline,
            local_artifact_paths=local_artifact_paths,
            remote=remote,
        ),
        output=invocation.output,
        env=invocation.env,
    )


COMMANDS: dict[str, tuple[str, str]] = {
    "setup": ("setup_doctor", "Create a working configuration, private state and databases."),
    "doctor": ("setup_doctor", "Check configuration, Codex, storage, databases and providers."),
    "auth-doctor": ("setup_doctor", "Check the Codex login without generating anything."),
    "generate": ("generation", "Generate images from a prompt."),
    "edit": ("generation", "Edit images (-i/--images FILE) following a prompt."),
    "background": ("generation", "Offline image tools: `background remove`."),
    "serve": ("service", "Run the HTTP bridge (API, jobs and dashboard) until Ctrl-C."),
    "dashboard": ("service", "Open the dashboard: attach to a bridge or start one."),
    "providers": ("resources", "Registered providers and what they support."),
    "session": ("resources", "Persistent provider sessions (get, delete)."),
    "preset": ("resources", "Stored request templates (list, get, create, update, delete)."),
    "jobs": ("resources", "Durable jobs on a running bridge (list, get, cancel, wait)."),
    "config": ("admin", "Inspect the effective configuration (check, show, origins)."),
    "artifacts": ("admin", "Maintain the artifact store (cleanup, repair)."),
    "schema": ("admin", "Print the contract JSON Schema or the OpenAPI document."),
    "completions": ("admin", "Print a shell completion script."),
    "man": ("admin", "Print the manual page (roff)."),
    "mcp": ("mcp", "Run the MCP server (tools for Claude, Cursor, VS Code, Codex …)."),
    "login": ("accounts", "Sign in to ChatGPT; the bridge keeps and refreshes the login."),
    "accounts": ("accounts", "The bridge's own logins (list, status, remove)."),
    "keys": ("keys", "Named API keys with image quotas (create, list, revoke, usage …)."),
}
"""Command → (defining module in :mod:`imagebridge.cli.commands`, one-line summary)."""

ALIASES = {"sessions": "session"}
"""Hidden spellings users reach for (the original has only ``session``)."""

UNAVAILABLE = frozenset({"update", "gateway"})
"""The original's commands for its binary and Docker images: hidden from help and
completion, they answer with what to do instead (:mod:`imagebridge.cli.commands.unavailable`)."""


class _LazyGroup(TyperGroup):
    """The root group: a subcommand's module is imported and its click command built only
    when that subcommand runs, so ``--help`` never builds ~150 parameters it will not show."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._built: dict[str, Any] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd_name = ALIASES.get(cmd_name, cmd_name)
        if cmd_name in UNAVAILABLE:
            module_name = "unavailable"
        elif cmd_name in COMMANDS:
            module_name = COMMANDS[cmd_name][0]
        else:
            return None
        if module_name not in self._built:
            module = importlib.import_module(f"imagebridge.cli.commands.{module_name}")
            holder = typer.Typer(rich_markup_mode=None, add_completion=False)
            module.register(holder)
            self._built[module_name] = typer.main.get_command(holder)
        return self._built[module_name].commands.get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in COMMANDS.items()])


def build_app() -> typer.Typer:
    """The root of the command tree; subcommands load on demand (see :class:`_LazyGroup`)."""
    app = typer.Typer(
        name=PROG_NAME,
        cls=_LazyGroup,
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )
    app.callback()(root)
    return app


def _command() -> Any:
    return typer.main.get_command(build_app())


def _prepare_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``imagegen-bridge`` and ``imagebridge`` console scripts."""
    import os

    args = sys.argv[1:] if argv is None else list(argv)
    if os.environ.get(COMPLETE_VAR):
        # typer has no public API for completion requests outside its own app runner.
        from typer._completion_classes import completion_init

        completion_init()  # registers typer's shell classes for the completion request
    hoisted = hoist_global_flags(args)
    _prepare_streams()
    invocation = _Invocation(
        output=Output(mode=OutputMode.JSON if hoisted.json else OutputMode.HUMAN),
        env=dict(os.environ),
    )
    try:
        result = _command().main(
            args=hoisted.argv, prog_name=PROG_NAME, standalone_mode=False, obj=invocation
        )
    except CliUsageError as error:
        invocation.output.usage_error(error.message)
        return EXIT_USAGE
    except (UsageError, ClickException) as error:
        message, usage, status = _click_failure(error)
        if type(error).__name__ == "NoArgsIsHelpError":
            invocation.output.help_text(message)
            return EXIT_USAGE
        invocation.output.usage_error(message, usage)
        return status
    except (Abort, KeyboardInterrupt):
        invocation.output.stderr.write("error: interrupted\n")
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 1
    except Exception as error:  # the one place that turns anything into an exit status
        return _report_failure(invocation.output, error)
    return result if isinstance(result, int) else 0


def _click_failure(error: Exception) -> tuple[str, str | None, int]:
    """Message, usage line and exit status of a click exception (typed loosely: typer
    vendors click privately)."""
    format_message = getattr(error, "format_message", None)
    message = str(format_message()) if callable(format_message) else str(error)
    context = getattr(error, "ctx", None)
    get_usage = getattr(context, "get_usage", None)
    usage = str(get_usage()) if callable(get_usage) else None
    status = getattr(error, "exit_code", EXIT_USAGE)
    return message, usage, status if isinstance(status, int) else EXIT_USAGE


def _report_failure(output: Output, error: Exception) -> int:
    from imagebridge.contract.errors import BridgeError, ErrorCode

    if isinstance(error, BridgeError):
        output.error(error)
        return exit_code_for(error.code.value)
    internal = BridgeError(
        ErrorCode.INTERNAL,
        "unexpected internal error",
        details={"exception": type(error).__name__},
    )
    output.error(internal)
    return exit_code_for(internal.code.value)


def _silence_stdout() -> None:
    import os

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
