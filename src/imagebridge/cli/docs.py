"""``schema``, ``completions`` and ``man``: generated documents (no config needed)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

from imagebridge.cli.context import CliContext, CliUsageError
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["completions_command", "man_command", "render_manpage", "schema_command"]

MAX_SCHEMA_FILE_BYTES = 16 * 1024 * 1024
COMPLETE_VAR = "_IMAGEGEN_BRIDGE_COMPLETE"


def _openapi_document() -> dict[str, Any]:
    """The OpenAPI document the server publishes at ``/v1/openapi.json``.

    Built from an app on a fixed, offline configuration (mock provider, jobs and metrics
    on) inside a throw-away data directory, so neither the user's configuration nor their
    files affect or receive anything.
    """
    import tempfile

    try:
        from imagebridge.server.app import create_app
        from imagebridge.server.openapi import build_openapi
        from imagebridge.server.state import ServerOptions
    except ImportError:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "the OpenAPI document comes from the HTTP server, which is not available here",
            suggestions=["Use --kind json-schema."],
        ) from None
    from imagebridge.config import parse_config

    offline = {
        "default_provider": "mock",
        "providers": {
            "mock": {"enabled": True},
            "codex_responses": {"enabled": False},
            "codex_app_server": {"enabled": False},
            "codex_images": {"enabled": False},
            "openai": {"enabled": False},
        },
        "server": {"metrics": {"enabled": True}, "jobs": {"enabled": True}},
    }
    with tempfile.TemporaryDirectory(prefix="imagegen-bridge-openapi-") as scratch:
        loaded = parse_config(offline, env={}, data_dir=Path(scratch))
        app = create_app(loaded.config, options=ServerOptions(env={}))
        return build_openapi(app)


def _document(kind: str) -> dict[str, Any]:
    if kind == "openapi":
        return _openapi_document()
    from imagebridge.contract.schema import contract_json_schema

    return contract_json_schema()


def _write_text(ctx: CliContext, text: str, output: str | None) -> None:
    if output is None or output == "-":
        ctx.output.stdout.write(text)
        ctx.output.stdout.flush()
        return
    from imagebridge.cli.atomic import write_atomic

    target = Path(output)
    if not target.is_absolute():
        target = ctx.cwd / target
    try:
        write_atomic(target, text.encode("utf-8"), replace=True)
    except OSError as exc:
        raise BridgeError(
            ErrorCode.ARTIFACT,
            "could not write the output file",
            details={"path": str(target), "reason": exc.strerror or type(exc).__name__},
        ) from None


def schema_command(ctx: CliContext, *, kind: str, output: str | None, check: str | None) -> int:
    """Print/write a schema, or with ``--check`` compare it with a file (exit 2 if stale)."""
    if check is not None and output is not None:
        raise CliUsageError("--check cannot be used with --output")
    document = _document(kind)
    if check is None:
        _write_text(ctx, json.dumps(document, indent=2, ensure_ascii=False) + "\n", output)
        return 0
    from imagebridge.cli.files import read_bounded

    path = check if Path(check).is_absolute() else str(ctx.cwd / check)
    try:
        existing = json.loads(read_bounded(path, MAX_SCHEMA_FILE_BYTES, "schema file"))
    except (ValueError, RecursionError):
        existing = None
    current = existing == document
    ctx.output.value({"current": current, "kind": kind, "path": path})
    return 0 if current else 2


def completions_command(ctx: CliContext, shell: str) -> int:
    from typer._completion_shared import get_completion_script  # no public equivalent

    script = get_completion_script(
        prog_name="imagegen-bridge", complete_var=COMPLETE_VAR, shell=shell
    )
    _write_text(ctx, script + "\n", None)
    return 0


# -- manual page ------------------------------------------------------------------------------


def _roff(text: str) -> str:
    escaped = text.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in escaped.splitlines() or [""]:
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


def _option_lines(command: Any) -> list[str]:
    lines: list[str] = []
    for param in getattr(command, "params", []):
        if getattr(param, "param_type_name", "") != "option" or getattr(param, "hidden", False):
            continue
        names = ", ".join(f"\\fB{_roff(name)}\\fR" for name in [*param.opts, *param.secondary_opts])
        metavar = getattr(param, "metavar", None)
        if metavar and not getattr(param, "is_flag", False):
            names += f" \\fI{_roff(str(metavar))}\\fR"
        lines += [".TP", names, _roff(getattr(param, "help", None) or "")]
    return lines


def _walk(command: Any, context: Any, path: list[str]) -> list[str]:
    lines: list[str] = []
    list_commands = getattr(command, "list_commands", None)
    if callable(list_commands):
        for name in list_commands(context):
            child = command.get_command(context, name)
            if child is not None:
                lines += _walk(child, context, [*path, name])
        return lines
    summary = (getattr(command, "help", None) or "").strip().split("\n\n")[0]
    lines += [".SS " + _roff(" ".join(path)), _roff(summary)]
    lines += _option_lines(command)
    return lines


def render_manpage(root: Any, context: Any, version: str) -> str:
    """A roff manual page for the whole command tree (``context``: the root's context)."""
    today = date.today().isoformat()
    help_text = (getattr(root, "help", None) or "").strip()
    lines = [
        f'.TH imagegen-bridge 1 "{today}" "imagegen-bridge {version}" "User Commands"',
        ".SH NAME",
        "imagegen\\-bridge \\- image generation bridge for your own Codex/ChatGPT login",
        ".SH SYNOPSIS",
        "\\fBimagegen\\-bridge\\fR [\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]",
        ".SH DESCRIPTION",
        _roff(help_text),
        ".SH GLOBAL OPTIONS",
        *_option_lines(root),
        ".SH COMMANDS",
        *_walk(root, context, []),
        ".SH EXIT STATUS",
        _roff(
            "0 success; 2 invalid request, configuration or usage error; 3 authentication, "
            "permission or safety rejection; 4 input, artifact or session error; 5 rate "
            "limited or overloaded; 6 upstream, protocol or unsupported capability; "
            "70 internal error; 124 timeout; 130 cancelled."
        ),
    ]
    return "\n".join(lines) + "\n"


def man_command(ctx: CliContext, root_context: Any, output: str | None) -> int:
    from imagebridge._version import __version__

    page = render_manpage(root_context.command, root_context, __version__)
    _write_text(ctx, page, output)
    return 0
