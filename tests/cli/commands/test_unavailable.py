"""``update`` and ``gateway``: the original's commands answer with what to do here.

Every form below is one the original's CLI accepted for ``update`` and ``gateway``, with
every flag it accepted, so a script written for the original gets this answer
and never a usage error about one of its flags.
"""

from __future__ import annotations

import pytest

from imagebridge._version import __version__
from tests.cli.conftest import Cli

UPDATE_FORMS = [
    ("update",),
    ("update", "--help"),
    ("update", "check"),
    ("update", "install"),
    ("update", "install", "-n", "--yes"),
    ("update", "install", "--dry-run"),
    ("update", "rollback", "-n", "--yes"),
    ("update", "docker", "--compose-file", "compose.package.yaml", "--env-file", ".env",
     "--dry-run", "--yes", "--active-passive", "--coordination-file",
     "deploy/coord/active-slot", "--slot-file", ".imagegen-bridge-active-slot",
     "--readiness-timeout-secs", "180"),
]  # fmt: skip
GATEWAY_FORMS = [
    ("gateway",),
    ("gateway", "--bind", "127.0.0.1:8787", "--blue", "http://imagegen-bridge-blue:8787",
     "--green", "http://imagegen-bridge-green:8787", "--state-file", "/coord/active-slot",
     "--hold-timeout-ms", "2100000", "--probe-interval-ms", "250", "--max-connections",
     "256", "--max-body-bytes", "83886080", "--forward-timeout-ms", "1860000",
     "--response-idle-timeout-ms", "60000"),
]  # fmt: skip


@pytest.mark.parametrize("args", UPDATE_FORMS, ids=" ".join)
def test_update_says_how_to_upgrade_the_python_package(cli: Cli, args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.code == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: `update` is not part of the Python imagebridge")
    assert f"({__version__} installed)" in lines[0]
    assert "suggestion: pip install -U imagebridge" in lines
    assert "suggestion: pipx upgrade imagebridge" in lines
    assert "suggestion: uv tool upgrade imagebridge" in lines
    assert "No such" not in result.stderr


@pytest.mark.parametrize("args", GATEWAY_FORMS, ids=lambda a: " ".join(a)[:40])
def test_gateway_points_at_serve_and_the_deployment_guide(cli: Cli, args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.code == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: `gateway` is not part of the Python imagebridge")
    suggestions = [line for line in lines if line.startswith("suggestion: ")]
    assert any("imagegen-bridge serve" in s and "activation_lock" in s for s in suggestions)
    assert any("docs/deployment.md" in s for s in suggestions)


def test_json_mode_gives_a_stable_machine_readable_error(cli: Cli) -> None:
    result = cli("update", "check", "--json")
    assert result.code == 2 and result.stdout == ""
    error = result.error()
    assert error["code"] == "invalid_request" and error["retryable"] is False
    assert error["details"] == {
        "kind": "unavailable_command",
        "command": "update",
        "current_version": __version__,
    }
    assert error["suggestions"][0] == "pip install -U imagebridge"
    gateway = cli("--json", "gateway", "--bind", "127.0.0.1:1").error()
    assert gateway["details"]["command"] == "gateway"


def test_the_answer_needs_no_configuration_and_writes_nothing(cli: Cli) -> None:
    """Like the original, these run before any config is read: a broken one is no obstacle."""
    (cli.cwd / "imagegen-bridge.toml").write_text("not = [valid toml")
    result = cli("--config", str(cli.cwd / "missing.toml"), "update", "install", "--yes")
    assert result.code == 2
    assert "`update` is not part of the Python imagebridge" in result.stderr
    assert not cli.data.exists()


def test_a_real_process_exits_two_with_the_message(cli: Cli) -> None:
    result = cli.subprocess("gateway", "--bind", "127.0.0.1:8787")
    assert result.code == 2
    assert result.stderr.startswith("error: `gateway` is not part of the Python imagebridge")


def test_they_stay_out_of_help_and_completion(cli: Cli) -> None:
    helped = cli("--help").stdout
    assert "  update " not in helped and "  gateway " not in helped
    completed = cli.subprocess(
        env={
            "_IMAGEGEN_BRIDGE_COMPLETE": "complete_bash",
            "COMP_WORDS": "imagegen-bridge ",
            "COMP_CWORD": "1",
        }
    )
    offered = completed.stdout.split()
    assert "generate" in offered
    assert "update" not in offered and "gateway" not in offered
