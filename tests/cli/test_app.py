"""The command line as a process: help, version, usage errors, signals, config loading.

Ports cli.rs 1, 4, 7, 9 (a config file), 23, and the exit-code rows that need a real
process (usage errors and Ctrl-C).
"""

from __future__ import annotations

import hashlib
import json
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from imagebridge._version import __version__
from tests.cli.conftest import EXAMPLE_CONFIG, SCRIPT, Cli


def test_help_and_version_work_without_configuration(cli: Cli) -> None:
    """cli.rs 1."""
    helped = cli.subprocess("--help")
    assert helped.code == 0
    assert "Image generation from your own Codex/ChatGPT login" in helped.stdout
    assert "--local-artifact-paths" in helped.stdout
    for command in ("generate", "edit", "setup", "doctor", "preset", "jobs", "dashboard"):
        assert f"  {command} " in helped.stdout
    version = cli.subprocess("--version")
    assert version.code == 0 and version.stdout == f"imagegen-bridge {__version__}\n"
    dashboard = cli.subprocess("dashboard", "--help")
    assert "--attach-only" in dashboard.stdout and "--no-open" in dashboard.stdout
    assert not cli.data.exists()


def test_the_alias_and_module_entry_points(cli: Cli) -> None:
    alias = subprocess.run(
        [str(SCRIPT.with_name("imagebridge")), "--version"],
        capture_output=True, env=cli.process_env(), check=False,
    )  # fmt: skip
    assert alias.stdout.decode() == f"imagegen-bridge {__version__}\n"
    module = subprocess.run(
        [str(SCRIPT.with_name("python")), "-m", "imagebridge", "--version"],
        capture_output=True, env=cli.process_env(), check=False,
    )  # fmt: skip
    assert module.stdout.decode() == f"imagegen-bridge {__version__}\n"


def test_usage_errors_exit_two_in_a_real_process(cli: Cli) -> None:
    """cli.rs 4 (and clap's own usage errors)."""
    for args in (
        ("generate", "x", "--quality", "impossible"),
        ("no-such-command",),
        ("generate", "--no-such-flag"),
        ("--json", "--plain", "config", "check"),
        (),
    ):
        result = cli.subprocess(*args)
        assert result.code == 2, args
    unsupported = cli.subprocess("generate", "x", "--quality", "impossible")
    assert "unsupported value `impossible`" in unsupported.stderr
    assert unsupported.stderr.startswith("error: ")


def test_usage_errors_are_json_with_json(cli: Cli) -> None:
    result = cli("generate", "x", "--json", "--count", "0")
    assert result.code == 2
    assert result.error()["code"] == "invalid_request"
    assert "unsupported value `0`" in result.error()["message"]


def test_global_flags_are_accepted_after_the_subcommand(cli: Cli) -> None:
    result = cli("config", "show", "--json", "--set", "runtime.default_timeout_ms=1234")
    assert result.code == 0 and result.json()["runtime"]["default_timeout_ms"] == 1234


def test_newcomer_generate_in_a_real_process(cli: Cli) -> None:
    result = cli.subprocess("--json", "generate", "a red fox", "--provider", "mock",
                            "-o", "fox.png", "--size", "48x48")  # fmt: skip
    assert result.code == 0, result.stderr
    image = result.json()["data"][0]
    saved = cli.artifacts / "fox.png"
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == image["sha256"]
    with Image.open(saved) as decoded:
        decoded.verify()


def test_ctrl_c_cancels_cleanly_and_reports_the_unknown_outcome(cli: Cli) -> None:
    process = subprocess.Popen(
        [str(SCRIPT), "generate", "slow [mock:latency=20000]", "--size", "16x16"],
        cwd=cli.cwd,
        env=cli.process_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        ready, _, _ = select.select([process.stderr], [], [], 30)
        assert ready, "the generation never started"
        started = process.stderr.readline().decode()
        assert started.startswith("started: generate")
        begun = time.monotonic()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
        assert time.monotonic() - begun < 10, "cancellation must not wait for the provider"
        stderr = process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert "error: request was cancelled during provider execution" in stderr
    assert "outcome: unknown" in stderr
    assert not list(cli.artifacts.glob("*.png")) if cli.artifacts.exists() else True


def test_the_originals_example_config_loads(cli: Cli) -> None:
    cli.write("imagegen-bridge.toml", EXAMPLE_CONFIG.read_text())
    result = cli("--json", "config", "show")
    assert result.code == 0, result.stderr
    origins = cli("--json", "config", "origins").json()
    assert any(origin["source"] == "file" for origin in origins)


def test_a_misspelt_key_is_rejected_naming_the_key(cli: Cli) -> None:
    cli.write("imagegen-bridge.toml", 'defualt_provider = "mock"\n')
    human = cli("config", "check")
    assert human.code == 2
    assert "field: defualt_provider" in human.stderr
    machine = cli("--json", "config", "check")
    assert machine.error()["details"] == {"field": "defualt_provider", "reason": "unknown_key"}


def test_config_check_is_non_mutating_and_machine_readable(cli: Cli) -> None:
    """cli.rs 7."""
    before = sorted(Path(cli.root).rglob("*"))
    result = cli("--json", "config", "check")
    assert result.code == 0 and result.json() == {"valid": True, "issues": []}
    assert sorted(Path(cli.root).rglob("*")) == before


def test_config_check_lists_semantic_issues(cli: Cli) -> None:
    result = cli("--json", "--set", 'server.bind="0.0.0.0:8787"', "config", "check")
    assert result.code == 2
    body = result.json()
    assert body["valid"] is False
    assert {"field": "server.bearer_token_env", "code": "required_for_remote_bind"} in [
        {"field": issue["field"], "code": issue["code"]} for issue in body["issues"]
    ]


def test_config_output_never_resolves_referenced_secrets(cli: Cli) -> None:
    """cli.rs 23."""
    env = {"MY_BRIDGE_TOKEN": "super-secret-value"}
    result = cli("--json", "--set", "server.bearer_token_env=MY_BRIDGE_TOKEN", "config", "show",
                 env=env)  # fmt: skip
    assert result.code == 0
    assert result.json()["server"]["bearer_token_env"] == "MY_BRIDGE_TOKEN"
    assert "super-secret-value" not in result.stdout


def test_a_generation_blocked_by_an_invalid_config(cli: Cli) -> None:
    result = cli("--json", "--set", "runtime.request.max_outputs=0", "generate", "x")
    assert result.code == 2 and result.error()["code"] == "configuration"


def test_plain_prints_compact_json_for_structured_commands(cli: Cli) -> None:
    result = cli("--plain", "config", "check")
    assert result.stdout == '{"valid":true,"issues":[]}\n'
    assert json.loads(result.stdout)["valid"] is True


def test_missing_subcommand_prints_help_and_exits_two(cli: Cli) -> None:
    result = cli("preset")
    assert result.code == 2
    assert result.stderr.startswith("Usage: imagegen-bridge preset")
    assert "create  Store a new preset." in result.stderr


def test_echoed_bad_values_are_escaped(cli: Cli) -> None:
    result = cli("generate", "x", "--quality", "bad\x1b[31m")
    assert result.code == 2
    assert "\x1b" not in result.stderr and "bad\\x1b[31m" in result.stderr


def test_newcomer_command_works_with_the_default_configuration(cli: Cli) -> None:
    """No overrides at all: the Codex providers stay enabled (and idle), mock is chosen."""
    env = {
        key: value
        for key, value in cli.process_env().items()
        if not key.startswith("IMAGEGEN_BRIDGE__")
    }
    completed = subprocess.run(
        [str(SCRIPT), "generate", "a red fox", "--provider", "mock", "-o", "fox.png",
         "--size", "32x32"],
        cwd=cli.cwd, env=env, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    saved = cli.artifacts / "fox.png"
    assert str(saved) in completed.stdout.decode()
    with Image.open(saved) as decoded:
        assert decoded.size == (32, 32)


def test_a_public_bind_without_a_bearer_only_blocks_listening(cli: Cli) -> None:
    public = ("--set", 'server.bind="0.0.0.0:8787"')
    assert cli("--json", *public, "generate", "x", "--dry-run").code == 0
    assert cli("--json", *public, "preset", "list").code == 0
    assert cli("--json", *public, "serve").code == 2
    assert cli("--json", *public, "config", "check").code == 2


def test_sessions_is_a_hidden_alias_of_session(cli: Cli) -> None:
    result = cli("--json", "sessions", "get", "k")
    assert result.code == 4 and result.error()["code"] == "session"
    assert "  sessions " not in cli("--help").stdout


# Every flag of every command of the original (global flags and per-command ones), each
# with a value the original accepts. ``update`` and ``gateway`` are covered by
# tests/cli/commands/test_unavailable.py.
_GENERATION_FLAGS = (
    "--negative-prompt", "blur", "--provider", "mock", "--model", "mock-image-1",
    "--fallback", "other:m2", "--fallback", "third", "--fallback-policy", "on_error",
    "-n", "2", "--count", "255", "--size", "64x64", "--aspect-ratio", "3:2",
    "--resolution", "2k", "--quality", "medium", "--format", "webp", "--compression", "100",
    "--background", "transparent", "--transparency", "chroma_key", "--chroma-key", "#00FF00",
    "--chroma-transparent-threshold", "254", "--chroma-opaque-threshold", "1", "--no-despill",
    "--moderation", "low", "--partial-images", "3", "--failure-policy", "best_effort",
    "--batch-execution", "parallel", "--input-fidelity", "high", "--action", "edit",
    "--response-format", "metadata", "--filename-prefix", "Fox Portrait", "-o", "a/b.webp",
    "--collision", "suffix", "--metadata", "sidecar_and_embedded", "--compatibility",
    "best_effort", "--negative-prompt-mode", "reject", "--revised-prompt", "require",
    "--session", "thread", "--session-key", "k", "--thread-id", "t", "--idempotency-key",
    "idem", "--timeout-ms", "1", "--user", "u", "--preset", "p", "--reference", "r.png",
    "--dry-run", "--preview", "--open",
)  # fmt: skip
ORIGINAL_SURFACE: list[tuple[str, ...]] = [
    ("--config", "c.toml", "--set", "a.b=1", "--set", "c=x", "--unset", "d", "--json",
     "-q", "--allow-inline", "--local-artifact-paths", "generate", "x"),
    ("--plain", "--quiet", "config", "show"),
    ("setup", "--state-root", "s", "--output-root", "o", "--yes", "--non-interactive",
     "-n", "--live-probe"),
    ("setup", "--no-input", "--dry-run"),
    ("doctor", "--provider", "mock", "--live-probe", "--yes", "--non-interactive"),
    ("doctor", "--no-input"),
    ("auth-doctor", "--provider", "mock"),
    ("generate", "a fox", *_GENERATION_FLAGS),
    ("generate", "-p", "-", "--output-dir", "d"),
    ("generate", "--prompt", "a fox"),
    ("generate", "--request", "-"),
    ("edit", "a fox", "-i", "a.png", "--images", "b.png", "--mask", "m.png",
     *_GENERATION_FLAGS),
    ("edit", "--request", "req.json"),
    ("background", "remove", "in.png", "-o", "out.png", "--key", "#00ff00",
     "--transparent-threshold", "12", "--opaque-threshold", "96", "--no-despill", "--force"),
    ("background", "remove", "in.png", "--output", "out.webp", "--key", "auto"),
    ("serve", "--bind", "127.0.0.1:8787"),
    ("dashboard", "--bind", "127.0.0.1:8787", "--open", "--attach-only"),
    ("dashboard", "--no-open"),
    ("providers", "list"),
    ("providers", "capabilities", "--provider", "mock", "--model", "mock-image-1"),
    ("providers", "readiness"),
    ("session", "get", "key", "--provider", "mock"),
    ("session", "delete", "key", "--provider", "mock", "--dry-run"),
    ("session", "delete", "key", "--force"),
    ("preset", "list", "--limit", "100"),
    ("preset", "get", "name"),
    ("preset", "create", "name", "--from", "-", "--description", "d"),
    ("preset", "update", "name", "--from", "t.json", "--description", "d"),
    ("preset", "delete", "name", "--dry-run"),
    ("preset", "delete", "name", "--force"),
    ("config", "check"),
    ("config", "origins"),
    ("artifacts", "cleanup", "--dry-run"),
    ("artifacts", "cleanup", "--force"),
    ("artifacts", "repair", "--dry-run"),
    ("artifacts", "repair", "--force"),
    ("schema", "--kind", "openapi", "-o", "-", "--check", "openapi.json"),
    ("schema", "--kind", "json-schema", "--output", "s.json"),
    # The original also takes `elvish`, which click/typer cannot complete: a documented
    # usage error (tests/cli/test_docs.py).
    *[("completions", shell) for shell in ("bash", "fish", "powershell", "zsh")],
    ("man", "-o", "-"),
    ("man", "--output", "m.1"),
]  # fmt: skip


@pytest.mark.parametrize("argv", ORIGINAL_SURFACE, ids=lambda a: " ".join(a)[:60])
def test_every_flag_of_the_originals_commands_is_accepted(argv: tuple[str, ...]) -> None:
    """Parses (and converts every value) exactly as a run would, without running anything:
    a flag or value the original accepts must never be a usage error here."""
    import typer

    from imagebridge.cli.app import build_app
    from imagebridge.cli.argv import hoist_global_flags

    args = hoist_global_flags(argv).argv
    command: Any = typer.main.get_command(build_app())
    context = command.make_context("imagegen-bridge", list(args))
    remaining = [*context._protected_args, *context.args]
    while remaining and hasattr(command, "get_command"):
        name, *rest = remaining
        command = command.get_command(context, name)
        assert command is not None, f"no command {name!r}"
        context = command.make_context(name, rest, parent=context)
        remaining = [*getattr(context, "_protected_args", []), *context.args]
    assert remaining == [], f"unparsed: {remaining}"
    assert not hasattr(command, "get_command"), "stopped at a group"
