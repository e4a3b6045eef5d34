"""``python -m imagebridge.mcp`` argument handling (the serving itself: test_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebridge.mcp.__main__ import main


def test_usage_mistakes_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bind", "127.0.0.1:9000"]) == 2
    assert "only to --transport streamable-http" in capsys.readouterr().err


def test_a_bad_configuration_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IMAGEGEN_BRIDGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("IMAGEGEN_BRIDGE_CONFIG", raising=False)
    assert main(["--set", "no.such.key=1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert capsys.readouterr().out == ""


@pytest.fixture
def never_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test instead of serving: a wrong bind check must not open a public port."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the server would have started")

    monkeypatch.setattr("imagebridge.mcp.server.run", refuse)


@pytest.mark.usefixtures("never_serve")
def test_a_public_bind_is_refused_before_serving(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--transport", "streamable-http", "--bind", "0.0.0.0:8788"]) == 1
    captured = capsys.readouterr()
    assert "loopback" in captured.err
    assert captured.out == ""


@pytest.mark.usefixtures("never_serve")
def test_the_cli_command_refuses_a_public_bind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imagebridge.cli.app import main as cli_main

    monkeypatch.setenv("IMAGEGEN_BRIDGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    code = cli_main(["mcp", "--transport", "streamable-http", "--bind", "[::]:8788"])
    assert code == 2
    captured = capsys.readouterr()
    assert "loopback" in captured.err
    assert captured.out == ""


def test_the_cli_command_passes_remote_and_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from imagebridge.cli.app import main as cli_main
    from imagebridge.config import BridgeConfig
    from imagebridge.mcp import McpOptions

    seen: list[tuple[BridgeConfig, McpOptions]] = []

    def record(config: BridgeConfig, options: McpOptions, **kwargs: object) -> None:
        seen.append((config, options))

    monkeypatch.setattr("imagebridge.mcp.server.run", record)
    monkeypatch.setenv("IMAGEGEN_BRIDGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("IMAGEGEN_BRIDGE_TOKEN", "secret")
    code = cli_main(
        ["mcp", "--remote", "http://127.0.0.1:8787", "--set", 'default_provider="mock"']
    )
    assert code == 0
    [(config, options)] = seen
    assert config.default_provider == "mock"
    assert options.remote == "http://127.0.0.1:8787"
    assert options.token == "secret"
    assert options.transport == "stdio"
