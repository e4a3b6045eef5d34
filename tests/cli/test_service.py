"""``serve`` and the ``dashboard`` launcher (cli.rs 3, 29, 30)."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from imagebridge.cli.context import CliContext, GlobalOptions
from imagebridge.cli.output import Output, OutputMode
from imagebridge.cli.service import dashboard_command, serve_command
from tests.cli.conftest import SCRIPT, Cli
from tests.cli.servers import serving
from tests.support.waiting import STARTUP_S


@contextmanager
def running(
    cli: Cli, *args: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [str(SCRIPT), *args],
        cwd=cli.cwd,
        env=cli.process_env(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=20)


def read_line(stream: Any, predicate: Callable[[str], bool]) -> str:
    """The first line of ``stream`` satisfying ``predicate`` (bounded wait)."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = stream.readline().decode("utf-8", "replace")
        if not line:
            break
        if predicate(line):
            return line
    raise AssertionError("expected output did not appear")


def test_serve_starts_serves_health_and_stops_on_sigint(cli: Cli) -> None:
    """cli.rs 29: serve, health, an invalid request gets 422, SIGINT stops cleanly, and the
    JSON trace names the request but never the prompt."""
    with running(cli, "--json", "serve", "--bind", "127.0.0.1:0") as process:
        line = read_line(process.stderr, lambda text: "listening on" in text)
        url = json.loads(line)["url"]
        assert httpx.get(f"{url}/health/live", timeout=10).json() == {"status": "live"}
        secret_prompt = "a very private prompt"
        bad = httpx.post(
            f"{url}/v1/images",
            json={"prompt": secret_prompt, "operation": "generate", "parameters": {"n": 0}},
            timeout=10,
        )
        assert bad.status_code == 422
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        stderr = process.stderr.read().decode() if process.stderr else ""
    assert secret_prompt not in stderr
    assert "invalid_request" in stderr


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_live(url: str) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health/live", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise AssertionError("server did not come up")


def test_serve_quiet_hides_status_lines_and_stops_on_sigterm(cli: Cli) -> None:
    port = _free_port()
    quiet_env = {"IMAGEGEN_BRIDGE__SERVER__TRACING__ENABLED": "false"}
    with running(cli, "--quiet", "serve", "--bind", f"127.0.0.1:{port}", env=quiet_env) as process:
        _wait_live(f"http://127.0.0.1:{port}")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert process.stderr is not None and process.stderr.read() == b""


def test_serve_refuses_a_public_bind_without_a_bearer(cli: Cli) -> None:
    result = cli("--json", "serve", "--bind", "0.0.0.0:8787")
    assert result.code == 2
    assert result.error()["code"] == "configuration"


def test_serve_rejects_a_malformed_bind(cli: Cli) -> None:
    result = cli("serve", "--bind", "localhost:80")
    assert result.code == 2 and "expected IP:PORT" in result.stderr


def _context(cli: Cli, mode: OutputMode = OutputMode.JSON) -> CliContext:
    import io

    return CliContext(
        options=GlobalOptions(),
        output=Output(mode=mode, stdout=io.StringIO(), stderr=io.StringIO()),
        env=cli.process_env(),
        cwd=cli.cwd,
    )


def _stdout(context: CliContext) -> str:
    value: str = context.output.stdout.getvalue()
    return value


def test_serve_passes_status_lines_through_announce(cli: Cli) -> None:
    calls: list[dict[str, Any]] = []

    def runner(loaded: Any, **kwargs: Any) -> int:
        calls.append(kwargs)
        kwargs["announce"]("http://127.0.0.1:4321")
        return 0

    context = _context(cli)
    assert serve_command(context, "127.0.0.1:4321", runner=runner) == 0
    assert calls[0]["bind"] == "127.0.0.1:4321"
    lines = [json.loads(line) for line in context.output.stderr.getvalue().splitlines()]
    assert lines[0]["status"] == "listening on http://127.0.0.1:4321"
    assert lines[1]["dashboard"] == "http://127.0.0.1:4321/dashboard"


def test_dashboard_rejects_a_public_listener_and_a_missing_attach_target(cli: Cli) -> None:
    """cli.rs 3."""
    public = cli("dashboard", "--bind", "0.0.0.0:8787")
    assert public.code == 2 and "loopback only" in public.stderr
    with serving(Starlette()) as url:
        pass
    free = url.removeprefix("http://")
    missing = cli("--json", "dashboard", "--bind", free, "--attach-only")
    assert missing.code == 2
    assert "no Imagegen Bridge dashboard is listening" in missing.error()["message"]


def test_dashboard_flag_conflicts(cli: Cli) -> None:
    assert cli("dashboard", "--open", "--no-open").code == 2
    disabled = cli("--json", "--set", "server.jobs.enabled=false", "dashboard", "--no-open",
                   "--bind", "127.0.0.1:9")  # fmt: skip
    assert disabled.code == 2 and disabled.error()["code"] == "configuration"


def _dashboard_page() -> Starlette:
    async def page(_: Any) -> HTMLResponse:
        return HTMLResponse("<html><head><title>Imagegen Bridge</title></head></html>")

    return Starlette(routes=[Route("/dashboard", page)])


def test_dashboard_attaches_to_a_running_bridge(cli: Cli) -> None:
    """cli.rs 29 (attach part): mode attached, authentication unknown, no pid."""
    with serving(_dashboard_page()) as url:
        bind = url.removeprefix("http://")
        result = cli("--json", "dashboard", "--attach-only", "--bind", bind)
        assert result.code == 0, result.stderr
        assert result.json() == {
            "mode": "attached",
            "url": f"{url}/dashboard",
            "api_base_url": url,
            "bind": bind,
            "authentication": "unknown",
            "opened": False,
        }
        plain = cli("--plain", "dashboard", "--attach-only", "--bind", bind)
        assert "mode=attached" in plain.stdout.splitlines()
        assert "opened=false" in plain.stdout.splitlines()


def test_dashboard_starts_on_another_port_when_the_configured_one_is_busy(cli: Cli) -> None:
    """cli.rs 30: the launcher starts the server itself (port 0 → the kernel's choice)."""
    seen: dict[str, Any] = {}

    def runner(loaded: Any, **kwargs: Any) -> int:
        seen.update(kwargs, bind_config=loaded.config.server.bind)
        kwargs["announce"]("http://127.0.0.1:54321")
        return 0

    busy = httpx.URL("http://127.0.0.1")
    with serving(Starlette()) as url:  # occupies a port that serves no dashboard
        port = url.rsplit(":", 1)[1]
        context = _context(cli)
        context.env = {**context.env, "IMAGEGEN_BRIDGE__SERVER__BIND": f"127.0.0.1:{port}"}
        code = dashboard_command(
            context, bind=None, open_browser=False, no_open=True, attach_only=False, runner=runner
        )
    assert code == 0 and busy.host == "127.0.0.1"
    assert seen["bind"] == "127.0.0.1:0" and seen["bind_config"] == "127.0.0.1:0"
    report = json.loads(_stdout(context))
    assert report["mode"] == "started" and report["authentication"] == "none"
    assert report["bind"] == "127.0.0.1:54321" and isinstance(report["pid"], int)


@pytest.mark.parametrize("bearer", [None, "DASH_TOKEN"])
def test_dashboard_reports_authentication(cli: Cli, bearer: str | None) -> None:
    def runner(loaded: Any, **kwargs: Any) -> int:
        kwargs["announce"]("http://127.0.0.1:1111")
        return 0

    context = _context(cli)
    if bearer:
        context.env = {**context.env, "IMAGEGEN_BRIDGE__SERVER__BEARER_TOKEN_ENV": bearer}
    with serving(Starlette()) as url:
        pass
    free = url.removeprefix("http://")
    dashboard_command(
        context, bind=free, open_browser=False, no_open=True, attach_only=False, runner=runner
    )
    report = json.loads(_stdout(context))
    assert report["authentication"] == ("bearer" if bearer else "none")
