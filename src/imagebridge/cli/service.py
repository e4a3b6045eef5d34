"""``serve`` and the ``dashboard`` launcher.

Both hand the validated configuration to :func:`imagebridge.server.serve.run_server`,
imported only when needed. The launcher first looks for a dashboard already listening
(``GET /dashboard`` answering 200 with the page title within 1 s) and attaches to it;
otherwise it starts the server itself, always on loopback, on an ephemeral port when the
configured one is taken, and opens a browser once the page answers.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from collections.abc import Callable
from typing import Any

from imagebridge.cli.context import CliContext, CliUsageError
from imagebridge.cli.failures import invalid
from imagebridge.cli.output import OutputMode
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "Connection",
    "dashboard_command",
    "parse_bind",
    "serve_command",
]

PROBE_TIMEOUT_S = 1.0
ServerRunner = Callable[..., int]


def parse_bind(value: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """``IP:PORT`` or ``[IPv6]:PORT`` (numeric, like ``server.bind``); exit 2 otherwise."""
    host, sep, port_text = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        address = ipaddress.ip_address(host)
        port = int(port_text, 10)
    except ValueError:
        raise CliUsageError(f"unsupported value `{value}` for --bind (expected IP:PORT)") from None
    if not sep or not 0 <= port <= 65535:
        raise CliUsageError(f"unsupported value `{value}` for --bind (expected IP:PORT)")
    return address, port


def _format_bind(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def _server_runner() -> ServerRunner:
    import importlib

    try:
        run_server = importlib.import_module("imagebridge.server.serve").run_server
    except (ImportError, AttributeError):
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "the HTTP server is not available in this build",
            suggestions=["Reinstall imagebridge; `serve` and `dashboard` need imagebridge.server."],
        ) from None
    runner: ServerRunner = run_server
    return runner


def serve_command(ctx: CliContext, bind: str | None, *, runner: ServerRunner | None = None) -> int:
    """Validate the configuration (including ``--bind``) and serve until Ctrl-C.

    Status lines (``listening on …``, ``dashboard at …``) go to stderr, as JSON objects in
    ``--json`` mode, and not at all with ``--quiet``.
    """
    extra: tuple[str, ...] = ()
    if bind is not None:
        address, port = parse_bind(bind)
        bind = _format_bind(address, port)
        extra = (f'server.bind="{bind}"',)
    loaded = ctx.load(extra_sets=extra)
    config = loaded.require_valid()
    run = runner or _server_runner()

    def announce(url: str) -> None:
        ctx.output.status(f"listening on {url}", url=url)
        if config.server.jobs.enabled:
            ctx.output.status(f"dashboard at {url}/dashboard", dashboard=f"{url}/dashboard")

    return int(run(loaded, bind=bind, env=ctx.env, announce=announce))


# -- dashboard launcher -------------------------------------------------------------------------


def _port_is_free(address: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


class Connection(dict[str, Any]):
    """The launcher's report: ``{mode, url, api_base_url, bind, authentication, pid?, opened}``."""


def _connection(mode: str, bind: str, authentication: str, pid: int | None) -> Connection:
    base = f"http://{bind}"
    report = Connection(
        mode=mode,
        url=f"{base}/dashboard",
        api_base_url=base,
        bind=bind,
        authentication=authentication,
    )
    if pid is not None:
        report["pid"] = pid
    report["opened"] = False
    return report


def _print_connection(ctx: CliContext, report: Connection) -> None:
    output = ctx.output
    if output.mode is OutputMode.PLAIN:
        for key, value in report.items():
            output.fields(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    elif output.mode is OutputMode.JSON:
        output.value(dict(report))
    else:
        verb = "Attached to" if report["mode"] == "attached" else "Started"
        output.text(f"{verb} the Imagegen Bridge dashboard at {report['url']}")
        output.text(f"API base URL: {report['api_base_url']}")
        if report["mode"] == "started":
            output.text("Press Ctrl-C to stop.")


def _should_open(ctx: CliContext, open_browser: bool, no_open: bool) -> bool:
    if no_open:
        return False
    if open_browser:
        return True
    return ctx.output.mode is OutputMode.HUMAN and ctx.output.stdout_is_tty()


def _open_browser(url: str, required: bool) -> bool:
    import webbrowser

    try:
        opened = webbrowser.open(url)
    except webbrowser.Error:
        opened = False
    if not opened and required:
        raise BridgeError(
            ErrorCode.ARTIFACT,
            "could not open a web browser",
            suggestions=[f"Open {url} yourself."],
        )
    return opened


async def _probe(url: str) -> bool:
    from imagebridge.cli.remote import RemoteBridge

    async with RemoteBridge(url) as bridge:
        return await bridge.dashboard_is_running(PROBE_TIMEOUT_S)


def dashboard_command(
    ctx: CliContext,
    *,
    bind: str | None,
    open_browser: bool,
    no_open: bool,
    attach_only: bool,
    runner: ServerRunner | None = None,
) -> int:
    if open_browser and no_open:
        raise CliUsageError("--open cannot be used with --no-open")
    requested = parse_bind(bind) if bind is not None else None
    if requested is not None and not requested[0].is_loopback:
        raise CliUsageError("the dashboard listens on loopback only; use --bind 127.0.0.1:PORT")
    config = ctx.config()
    if requested is not None:
        address, port = requested
    else:
        configured, port = parse_bind(config.server.bind)
        address = configured if configured.is_loopback else ipaddress.ip_address("127.0.0.1")
    target = _format_bind(address, port)
    should_open = _should_open(ctx, open_browser, no_open)
    if asyncio.run(_probe(f"http://{target}")):
        report = _connection("attached", target, "unknown", None)
        if should_open:
            report["opened"] = _open_browser(report["url"], required=open_browser)
        _print_connection(ctx, report)
        return 0
    if attach_only:
        raise invalid(
            "no Imagegen Bridge dashboard is listening at the target address",
            "Start one with `imagegen-bridge dashboard` (without --attach-only).",
            bind=target,
        )
    if not config.server.jobs.enabled:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "the dashboard needs durable jobs (server.jobs.enabled = true)",
            details={"field": "server.jobs.enabled"},
        )
    if requested is None and not _port_is_free(str(address), port):
        target = _format_bind(address, 0)  # the kernel picks a free port
    loaded = ctx.load(extra_sets=(f'server.bind="{target}"',))
    loaded.require_valid()
    authentication = "bearer" if config.server.bearer_token_env else "none"
    run = runner or _server_runner()

    def announce(url: str) -> None:
        report = _connection("started", url.removeprefix("http://"), authentication, os.getpid())
        if should_open:
            try:
                report["opened"] = _open_browser(report["url"], required=open_browser)
            except BridgeError as error:
                ctx.output.error(error)
        _print_connection(ctx, report)

    return int(run(loaded, bind=target, env=ctx.env, announce=announce))
