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
