"""``schema``, ``completions`` and ``man`` (cli.rs 24, 25): no configuration needed."""

from __future__ import annotations

import json

import pytest

from imagebridge.contract.schema import contract_json_schema
from tests.cli.conftest import Cli


def test_json_schema_is_the_contract_schema(cli: Cli) -> None:
    result = cli("schema")
    assert result.code == 0
    assert json.loads(result.stdout) == contract_json_schema()


def test_generated_schemas_match_checked_in_files(cli: Cli) -> None:
    """cli.rs 25: ``--check`` reports current files and exits 2 on stale ones."""
    for kind in ("json-schema", "openapi"):
        assert cli("schema", "--kind", kind, "-o", f"{kind}.json").code == 0
        current = cli("--json", "schema", "--kind", kind, "--check", f"{kind}.json")
        assert current.code == 0, current.stderr
        assert current.json() == {
            "current": True,
            "kind": kind,
            "path": str(cli.cwd / f"{kind}.json"),
        }
    document = json.loads((cli.cwd / "openapi.json").read_text())
    assert document["openapi"] == "3.1.0" and "/v1/images" in document["paths"]
    cli.write("stale.json", json.dumps({"$schema": "old"}))
    stale = cli("--json", "schema", "--check", "stale.json")
    assert stale.code == 2 and stale.json()["current"] is False
    assert cli("schema", "--check", "a", "-o", "b").code == 2


def test_schema_needs_no_configuration(cli: Cli) -> None:
    cli.write("imagegen-bridge.toml", "this is = not [valid toml\n")
    assert cli("schema", "-o", "-").code == 0
    assert cli("config", "check").code == 2


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "powershell"])
def test_completions_are_generated(cli: Cli, shell: str) -> None:
    """cli.rs 24 (completions)."""
    result = cli("completions", shell)
    assert result.code == 0
    assert "_IMAGEGEN_BRIDGE_COMPLETE" in result.stdout
    assert "imagegen-bridge" in result.stdout


def test_unsupported_shell_is_a_usage_error(cli: Cli) -> None:
    assert cli("completions", "elvish").code == 2


def test_completion_runtime_answers_subcommands(cli: Cli) -> None:
    result = cli.subprocess(env={
        "_IMAGEGEN_BRIDGE_COMPLETE": "complete_bash",
        "_TYPER_COMPLETE_ARGS": "imagegen-bridge pre",
        "COMP_WORDS": "imagegen-bridge pre",
        "COMP_CWORD": "1",
    })  # fmt: skip
    assert "preset" in result.stdout


def test_manual_page_is_roff(cli: Cli) -> None:
    """cli.rs 24 (man)."""
    result = cli("man")
    assert result.code == 0
    assert result.stdout.startswith(".TH imagegen-bridge 1")
    for section in (".SH NAME", ".SH GLOBAL OPTIONS", ".SH COMMANDS", ".SH EXIT STATUS"):
        assert section in result.stdout
    assert ".SS preset create" in result.stdout and ".SS generate" in result.stdout
    assert "\\-\\-local\\-artifact\\-paths" in result.stdout
    assert cli("man", "-o", "bridge.1").code == 0
    assert (cli.cwd / "bridge.1").read_text() == result.stdout
