"""Run the CLI the way a user does, in a sealed temporary world.

``cli`` runs :func:`imagebridge.cli.app.main` in-process (fast; stdout/stderr captured);
``cli.subprocess`` runs the installed console script as a child process for the checks
that need a real process (exit status, signals, startup). Both see only the environment
built here: a temporary data directory, HOME, XDG directories and working directory, and
the mock provider as default (the codex providers are disabled: tests stay offline).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from imagebridge.cli.app import main
from imagebridge.storage import PostgresOptions
from tests.support.fixture_files import ORIGINAL_CONFIG
from tests.support.images import encoded_png
from tests.support.postgres import APP_DATABASE, APP_ROLE, PostgresServer

EXAMPLE_CONFIG = ORIGINAL_CONFIG
OFFLINE = {
    "IMAGEGEN_BRIDGE__DEFAULT_PROVIDER": "mock",
    "IMAGEGEN_BRIDGE__PROVIDERS__CODEX_RESPONSES__ENABLED": "false",
    "IMAGEGEN_BRIDGE__PROVIDERS__CODEX_APP_SERVER__ENABLED": "false",
}
SCRIPT = Path(sys.executable).with_name("imagegen-bridge")


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def error(self) -> dict[str, Any]:
        """The JSON error on stderr (``--json`` mode)."""
        value: dict[str, Any] = json.loads(self.stderr.strip().splitlines()[-1])
        return value


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@dataclass
class Cli:
    root: Path
    cwd: Path
    data: Path
    env: dict[str, str]
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def artifacts(self) -> Path:
        return self.data / "artifacts"

    def __call__(
        self,
        *args: str,
        stdin: bytes | None = None,
        tty_stdout: bool = False,
        env: dict[str, str] | None = None,
    ) -> Result:
        """``imagegen-bridge ARGS…`` in-process."""
        with self.monkeypatch.context() as patch:
            for key in list(os.environ):
                if key.startswith(("IMAGEGEN_BRIDGE", "XDG_")):
                    patch.delenv(key)
            for key, value in {**self.env, **(env or {})}.items():
                patch.setenv(key, value)
            patch.chdir(self.cwd)
            stream = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
            patch.setattr(sys, "stdin", stream)
            self.capsys.readouterr()
            if tty_stdout:
                fake = _Tty()
                patch.setattr(sys, "stdout", fake)
                code = main(list(args))
                captured = self.capsys.readouterr()
                return Result(code, fake.getvalue(), captured.err)
            code = main(list(args))
            captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def subprocess(
        self,
        *args: str,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> Result:
        """``imagegen-bridge ARGS…`` as a child process."""
        completed = subprocess.run(
            [str(SCRIPT), *args],
            input=stdin or b"",
            capture_output=True,
            cwd=self.cwd,
            env=self.process_env(env),
            timeout=timeout,
            check=False,
        )
        return Result(
            completed.returncode,
            completed.stdout.decode("utf-8", "replace"),
            completed.stderr.decode("utf-8", "replace"),
        )

    def process_env(self, env: dict[str, str] | None = None) -> dict[str, str]:
        base = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("IMAGEGEN_BRIDGE") and not key.startswith("XDG_")
        }
        return {**base, **self.env, **(env or {})}

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.cwd / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    cwd = tmp_path / "work"
    cwd.mkdir()
    data = tmp_path / "data"
    env = {
        "IMAGEGEN_BRIDGE_DATA_DIR": str(data),
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "CODEX_HOME": str(tmp_path / "codex-home"),
        **OFFLINE,
    }
    return Cli(tmp_path, cwd, data, env, monkeypatch, capsys)


def keyed_png() -> bytes:
    """A red square on a flat green background (for chroma-key tests)."""
    from PIL import Image

    image = Image.new("RGB", (32, 32), (0, 255, 0))
    image.paste((200, 0, 0), (8, 8, 24, 24))
    return encoded_png(image)


def fake_executable(directory: Path, name: str, script: str) -> Path:
    """A small shell script on PATH (codex, xdg-open …)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + script + "\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def issues_of(result: Result, *, json_mode: bool = True) -> list[tuple[str, str]]:
    error = result.error() if json_mode else {}
    return [(issue["field"], issue["code"]) for issue in error.get("details", {}).get("issues", [])]


# -- PostgreSQL stores (the session's throwaway server, tests/support/postgres.py) -------------

PG_PASSWORD_ENV = "IMAGEBRIDGE_TEST_PG_PASSWORD"


def postgres_location(server: PostgresServer) -> str:
    """The test database as a config value: a URL without a password (config refuses one)."""
    return f"postgresql://{APP_ROLE}@{server.host}:{server.port}/{APP_DATABASE}"


def postgres_toml(server: PostgresServer, schema: str, *, sessions: bool = True) -> str:
    """A config file keeping durable jobs (and, with ``sessions``, session bindings) in
    PostgreSQL, in ``schema``, with the password read from :data:`PG_PASSWORD_ENV`."""
    url = postgres_location(server)
    lines = ["version = 1"]
    if sessions:
        lines += ["[providers.codex_app_server]", f'session_database = "{url}"']
    lines += [
        "[server.jobs]",
        f'database = "{url}"',
        f'postgres_schema = "{schema}"',
        f'postgres_password_env = "{PG_PASSWORD_ENV}"',
    ]
    return "\n".join(lines) + "\n"


def postgres_env(server: PostgresServer) -> dict[str, str]:
    return {PG_PASSWORD_ENV: server.password}


def postgres_options_for(server: PostgresServer, schema: str) -> PostgresOptions:
    return PostgresOptions(schema=schema, password=server.password)
