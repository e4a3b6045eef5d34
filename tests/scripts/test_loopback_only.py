"""``scripts/loopback-only``: the command it runs sees loopback and nothing else.

The real-codex tier and ``scripts/check``'s whole pytest run go through it, so that a wrong
SSRF guard or a codex child looking for its real backend cannot reach any real address.
These tests never connect anywhere: they read the namespace's interface table.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.interfaces import current_interfaces, interfaces

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "loopback-only"


def available() -> bool:
    return (
        subprocess.run([str(SCRIPT), "--check"], capture_output=True, check=False).returncode == 0
    )


def test_check_says_whether_a_namespace_can_be_made() -> None:
    done = subprocess.run([str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1)
    assert (done.returncode == 1) == ("cannot create a network namespace" in done.stderr)


def test_without_a_command_it_is_a_usage_error() -> None:
    done = subprocess.run([str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "usage" in done.stderr


def test_the_command_sees_only_loopback_and_knows_it() -> None:
    if not available():
        if os.environ.get("IMAGEBRIDGE_REQUIRE_LOOPBACK_ONLY") == "1":
            pytest.fail("scripts/check found namespaces usable, but loopback-only fails now")
        pytest.skip("no network namespace can be created here (needs root or user namespaces)")
    script = "cat /proc/net/dev; echo ==; echo $IMAGEBRIDGE_LOOPBACK_ONLY; ip -o addr show lo"
    done = subprocess.run(
        [str(SCRIPT), "sh", "-c", script], capture_output=True, text=True, check=True
    )
    table, flag = done.stdout.split("==\n", 1)
    assert interfaces(table) == {"lo"}
    assert flag.splitlines()[0] == "1"
    assert "127.0.0.1/8" in flag


def test_the_arguments_reach_the_command_unchanged() -> None:
    if not available():
        pytest.skip("no network namespace can be created here")
    done = subprocess.run(
        [str(SCRIPT), "printf", "%s|", "two words", "", "$HOME"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == "two words||$HOME|"


def test_the_suite_runs_inside_the_namespace_when_scripts_check_says_so() -> None:
    if os.environ.get("IMAGEBRIDGE_REQUIRE_LOOPBACK_ONLY") != "1":
        pytest.skip("run outside scripts/check's loopback-only namespace")
    assert os.environ.get("IMAGEBRIDGE_LOOPBACK_ONLY") == "1"
    assert current_interfaces() == {"lo"}
