"""Global flags are accepted anywhere, like clap's ``global`` arguments."""

from __future__ import annotations

from imagebridge.cli.argv import hoist_global_flags


def test_flags_after_the_subcommand_move_in_front() -> None:
    hoisted = hoist_global_flags(["generate", "a fox", "--json", "-q", "--set", "k=1", "-n", "2"])
    assert hoisted.argv == ["--json", "-q", "--set", "k=1", "generate", "a fox", "-n", "2"]
    assert hoisted.json


def test_equals_forms_and_values_are_kept_together() -> None:
    hoisted = hoist_global_flags(["serve", "--config=x.toml", "--remote", "http://h", "--plain"])
    assert hoisted.argv == ["--config=x.toml", "--remote", "http://h", "--plain", "serve"]
    assert not hoisted.json


def test_nothing_after_double_dash_is_touched() -> None:
    hoisted = hoist_global_flags(["generate", "--", "--json"])
    assert hoisted.argv == ["generate", "--", "--json"]
    assert not hoisted.json


def test_subcommand_flags_stay_in_place() -> None:
    args = ["preset", "delete", "x", "--dry-run", "--force"]
    assert hoist_global_flags(args).argv == args
