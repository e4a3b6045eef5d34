"""The real-codex harness's own guarantees: its leak check can fail, and it skips only without node.

These need neither node nor codex: they prove that the checks the real-codex tests rely on
are not vacuous.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import real_codex
from tests.support.real_codex import RealCodexHarness, record_pids


@pytest.fixture
def harness(tmp_path: Path) -> RealCodexHarness:
    return RealCodexHarness(tmp_path, Path("/bin/true"), isolated_network=False)


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait(timeout=5)


def sleeper(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A child that sleeps, returned once it runs: until its ``exec``, ``/proc/<pid>/environ``
    still shows the parent's environment, without the ``env`` it was given."""
    command = [sys.executable, "-c", "import time; print(flush=True); time.sleep(30)"]
    child = subprocess.Popen(command, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.readline()  # printed after the exec: the environment is the child's own
    return child


async def test_a_process_carrying_the_codex_home_is_found_and_fails_the_check(
    harness: RealCodexHarness, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    record_pids(harness.state, codex=999_999_999)  # recorded and long gone
    stray = sleeper({"CODEX_HOME": str(harness.home)})
    sleepers.append(stray)

    assert harness.leftovers() == [stray.pid]
    with pytest.raises(AssertionError, match=str(stray.pid)):
        await harness.assert_no_process_left(timeout=0.2)
    assert stray.wait(timeout=5) == -9  # the check killed what it found


async def test_a_recorded_codex_pid_still_running_fails_the_check(
    harness: RealCodexHarness, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    codex = sleeper()  # no CODEX_HOME: found only through the recorded PID
    sleepers.append(codex)
    record_pids(harness.state, launcher=999_999_998, codex=codex.pid)

    assert harness.started_pids() == {"launcher": [999_999_998], "codex": [codex.pid]}
    with pytest.raises(AssertionError, match=str(codex.pid)):
        await harness.assert_no_process_left(timeout=0.2)


async def test_the_check_passes_once_every_process_is_gone(
    harness: RealCodexHarness, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    codex = sleeper({"CODEX_HOME": str(harness.home)})
    record_pids(harness.state, codex=codex.pid)
    codex.kill()
    codex.wait(timeout=5)

    await harness.assert_no_process_left(timeout=0.2)


async def test_the_check_refuses_to_pass_when_no_codex_was_recorded(
    harness: RealCodexHarness,
) -> None:
    with pytest.raises(AssertionError, match="never recorded a codex PID"):
        await harness.assert_no_process_left(timeout=0.2)


def test_only_a_missing_node_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert real_codex.skip_reason() is not None
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(real_codex, "CODEX_CACHE", Path("/nonexistent/codex-cli"))
    monkeypatch.delenv("IMAGEBRIDGE_CODEX_BIN", raising=False)
    assert real_codex.skip_reason() is None  # node is here: the tests run (and fail)
    assert "install-test-deps" in (real_codex.missing_codex_reason() or "")


def test_a_codex_of_another_version_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packages = {}
    for version in real_codex.CODEX_VERSIONS:
        modules = tmp_path / version / "node_modules"
        package = modules / "@openai" / "codex"
        package.mkdir(parents=True)
        (package / "package.json").write_text(json.dumps({"version": "0.170.0"}))
        binary = modules / "@openai" / "codex-linux-x64" / "vendor" / "x" / "bin"
        binary.mkdir(parents=True)
        (binary / "codex").write_text("#!/bin/sh\n")
        (binary / "codex").chmod(0o755)
        packages[version] = package
    monkeypatch.setattr(real_codex, "CODEX_CACHE", tmp_path)
    monkeypatch.delenv("IMAGEBRIDGE_CODEX_BIN", raising=False)

    first, second = real_codex.CODEX_VERSIONS
    assert "0.170.0" in (real_codex.missing_codex_reason() or "")
    (packages[first] / "package.json").write_text(json.dumps({"version": first}))
    assert real_codex.missing_codex_reason(first) is None
    assert second in (real_codex.missing_codex_reason() or "")  # both are required
    (packages[second] / "package.json").write_text(json.dumps({"version": second}))
    assert real_codex.missing_codex_reason() is None
    assert real_codex.find_codex_binary(second) == (
        packages[second].parent / "codex-linux-x64" / "vendor" / "x" / "bin" / "codex"
    )
