"""``python -m imagebridge.server`` as a real process: start, serve, log, stop gracefully."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from imagebridge.config import load_config
from imagebridge.contract.errors import BridgeError
from imagebridge.server.serve import _listen, check_bind, uvicorn_config
from tests.server.conftest import ServeFactory
from tests.server.doubles import mock_of, with_mock
from tests.server.lifecycle.process import MOCK_ONLY, Process
from tests.support.fakes import FakeProvider
from tests.support.waiting import wait_until

SECRET_PROMPT = "serve-secret-prompt"


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGEGEN_BRIDGE")}
    env["IMAGEGEN_BRIDGE_DATA_DIR"] = str(tmp_path / "data")
    return env


@pytest.fixture
def running(tmp_path: Path, environment: dict[str, str]) -> Iterator[tuple[Process, str]]:
    args = ["--bind", "127.0.0.1:0"]
    for item in MOCK_ONLY:
        args += ["--set", item]
    process = Process(args, tmp_path, environment)
    try:
        url = process.wait_line(r"listening on (http://127\.0\.0\.1:\d+)").group(1)
        yield process, url
    finally:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait(timeout=10)


def test_serves_logs_json_and_stops_gracefully_on_sigterm(running: tuple[Process, str]) -> None:
    process, url = running
    result: dict[str, httpx.Response] = {}
    body = {
        "operation": "generate",
        "prompt": f"[mock:latency=1200] {SECRET_PROMPT}",
        "parameters": {"size": "8x8"},
    }

    def slow_request() -> None:
        with httpx.Client(timeout=30) as client:
            result["slow"] = client.post(f"{url}/v1/images", json=body)

    worker = threading.Thread(target=slow_request)
    worker.start()
    with httpx.Client(timeout=10) as client:
        assert client.get(f"{url}/health/live").status_code == 200
    time.sleep(0.4)  # let the slow request reach the provider
    process.popen.send_signal(signal.SIGTERM)
    worker.join(timeout=20)
    assert result["slow"].status_code == 200  # in-flight work finished during the drain
    assert process.popen.wait(timeout=20) == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health/live", timeout=2)
    lines = [json.loads(line) for line in process.drain() if line.startswith("{")]
    completions = [line for line in lines if line.get("message") == "request completed"]
    image_lines = [line for line in completions if line.get("route") == "/v1/images"]
    assert image_lines, lines
    entry = image_lines[0]
    assert entry["status"] == 200 and entry["provider"] == "mock" and entry["code"] == "none"
    assert re.fullmatch(r"[0-9a-f]{32}", entry["trace_id"])
    assert entry["request_id"] == result["slow"].headers["x-request-id"]
    assert {"total_ms", "provider_ms", "queue_ms"} <= set(entry)
    assert SECRET_PROMPT not in "\n".join(process.seen)


def run_to_exit(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    sets = [arg for item in MOCK_ONLY for arg in ("--set", item)]
    return subprocess.run(
        [sys.executable, "-m", "imagebridge.server", *args, *sets],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_refuses_a_remote_bind_without_a_bearer(
    tmp_path: Path, environment: dict[str, str]
) -> None:
    process = run_to_exit(tmp_path, environment, "--bind", "0.0.0.0:0")
    assert process.returncode == 2
    error = json.loads(process.stderr.strip().splitlines()[-1])
    assert error["code"] == "configuration"
    assert error["details"]["field"] == "server.bearer_token_env"


def test_check_bind_rules(tmp_path: Path) -> None:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    plain = load_config(env=env, sets=MOCK_ONLY, cwd=tmp_path).config
    assert check_bind(plain, "127.0.0.1:8787", {}) == ("127.0.0.1", 8787)
    assert check_bind(plain, "[::1]:0", {}) == ("::1", 0)
    with pytest.raises(BridgeError) as no_token_env:
        check_bind(plain, "0.0.0.0:8787", {})
    assert no_token_env.value.details["issue"] == "required_for_remote_bind"
    guarded = load_config(
        env=env, sets=[*MOCK_ONLY, 'server.bearer_token_env="TOKEN_VAR"'], cwd=tmp_path
    ).config
    for missing in ({}, {"TOKEN_VAR": ""}):
        with pytest.raises(BridgeError) as caught:
            check_bind(guarded, "0.0.0.0:8787", missing)
        assert caught.value.code.value == "configuration"
        assert "TOKEN_VAR" not in caught.value.message
        # ...but a suggestion names the variable to set (the container image's first start).
        assert any("Set TOKEN_VAR " in hint for hint in caught.value.suggestions)
    assert check_bind(guarded, "0.0.0.0:8787", {"TOKEN_VAR": "t"}) == ("0.0.0.0", 8787)
    with pytest.raises(BridgeError):
        check_bind(plain, "localhost:8787", {})


def test_listener_sockets_are_tcp_so_asyncio_disables_nagle() -> None:
    """asyncio sets TCP_NODELAY only when the listening socket says IPPROTO_TCP; without it
    every small response waits ~40 ms for a delayed ACK."""
    sock = _listen("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


def test_a_failed_start_is_reported_not_swallowed(
    tmp_path: Path, environment: dict[str, str]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    database = f'server.jobs.database="{blocker}/jobs.sqlite3"'
    process = run_to_exit(tmp_path, environment, "--bind", "127.0.0.1:0", "--set", database)
    assert process.returncode == 2, process.stderr
    error = json.loads(process.stderr.strip().splitlines()[-1])
    assert error["code"] in {"configuration", "internal"}
    assert "listening on" not in process.stderr


def test_the_grace_is_the_configured_milliseconds(tmp_path: Path) -> None:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    for grace_ms, seconds in ((1_500, 1.5), (200, 0.2), (10_000, 10.0)):
        sets = [*MOCK_ONLY, f"runtime.shutdown_grace_ms={grace_ms}"]
        config = load_config(env=env, sets=sets, cwd=tmp_path).config
        assert uvicorn_config(object(), config).timeout_graceful_shutdown == seconds


def test_stopping_cuts_work_beyond_the_grace_and_shuts_providers_down(
    serve: ServeFactory,
) -> None:
    """In-flight work gets ``runtime.shutdown_grace_ms``, then is cancelled (never left
    running), and every provider's ``shutdown`` runs once."""
    extra = FakeProvider("extra")
    server = serve("runtime.shutdown_grace_ms=300", providers=with_mock(extra))
    mock = mock_of(server)
    outcome: dict[str, object] = {}

    def slow_request() -> None:
        body = {
            "operation": "generate",
            "prompt": "[mock:latency=20000] outlives the grace",
            "parameters": {"size": "8x8"},
        }
        try:
            with server.client(timeout=30) as client:
                outcome["status"] = client.post("/v1/images", json=body).status_code
        except httpx.HTTPError as error:
            outcome["error"] = type(error).__name__

    worker = threading.Thread(target=slow_request)
    worker.start()
    assert wait_until(lambda: mock.in_flight == 1, timeout=10)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 8  # the grace (+ the runtime's own), not 20 s
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert outcome.get("status") != 200, outcome
    assert mock.calls == 1 and mock.in_flight == 0  # the provider call ended with the server
    assert extra.shutdown_calls == 1


def test_the_server_runs_on_uvloop_and_httptools(tmp_path: Path) -> None:
    """``uvicorn[standard]`` is a dependency: the served default is its faster loop and
    HTTP parser (bench/gateway.py), picked by uvicorn's ``auto`` settings."""
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    config = load_config(env=env, sets=MOCK_ONLY, cwd=tmp_path).config

    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("never called")

    settings = uvicorn_config(app, config)
    settings.load()

    assert settings.http_protocol_class.__name__ == "HttpToolsProtocol"
    loop_factory = settings.get_loop_factory()
    assert loop_factory is not None
    assert loop_factory.__module__.startswith("uvloop")
