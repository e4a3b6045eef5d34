"""``[accounts]``, ``[accounts.login]`` and ``[accounts.pool.<name>]``: checked names,
issuer URLs and pool settings, strict keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebridge.config import load_config
from imagebridge.contract.errors import BridgeError


def _issues(tmp_path: Path, *sets: str) -> list[tuple[str, str]]:
    loaded = load_config(env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}, sets=list(sets))
    return [(issue.field, issue.code) for issue in loaded.issues]


def test_loopback_http_issuer_and_a_safe_active_name_are_accepted(tmp_path: Path) -> None:
    assert (
        _issues(
            tmp_path,
            'accounts.login.issuer="http://127.0.0.1:9"',
            'accounts.login.token_url="http://127.0.0.1:9/oauth/token"',
            'accounts.active="work-2"',
        )
        == []
    )


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ('accounts.login.issuer="http://auth.example.com"', "accounts.login.issuer"),
        ('accounts.login.token_url="ftp://127.0.0.1/x"', "accounts.login.token_url"),
        ('accounts.login.token_url="https://a.example/t?x=1"', "accounts.login.token_url"),
        ('accounts.active="../other"', "accounts.active"),
        ('accounts.login.client_id=" "', "accounts.login.client_id"),
        ("accounts.login.http_timeout_ms=0", "accounts.login.http_timeout_ms"),
    ],
)
def test_bad_values_are_reported_on_their_key(tmp_path: Path, setting: str, field: str) -> None:
    assert field in {issue_field for issue_field, _ in _issues(tmp_path, setting)}


def test_an_unknown_key_under_accounts_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(BridgeError):
        load_config(env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}, sets=["accounts.issuer=1"])


def test_a_pool_of_homes_and_logins_is_accepted(tmp_path: Path) -> None:
    sets = [
        'accounts.policy="round_robin"',
        "accounts.min_remaining_percent=15",
        f'accounts.pool.personal.codex_home="{tmp_path / "codex"}"',
        'accounts.pool.work.login="work-login"',
        "accounts.pool.work.weight=3",
        "accounts.pool.work.max_concurrent=2",
        "accounts.pool.team.enabled=false",
    ]
    loaded = load_config(env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}, sets=sets)
    assert loaded.issues == []
    pool = loaded.config.accounts.pool_accounts()
    assert list(pool) == ["personal", "work"]  # configured order, enabled only
    assert pool["work"].max_concurrent_value == 2


@pytest.mark.parametrize(
    ("sets", "issue"),
    [
        (['accounts.policy="fastest"'], ("accounts.policy", "invalid")),
        (
            ["accounts.min_remaining_percent=101"],
            ("accounts.min_remaining_percent", "out_of_range"),
        ),
        (["accounts.refusal_cooldown_secs=0"], ("accounts.refusal_cooldown_secs", "out_of_range")),
        (["accounts.pool.Work.weight=1"], ("accounts.pool", "invalid_key")),
        (["accounts.pool.a.weight=0"], ("accounts.pool.a.weight", "out_of_range")),
        (["accounts.pool.a.max_concurrent=0"], ("accounts.pool.a.max_concurrent", "out_of_range")),
        (['accounts.pool.a.login="../x"'], ("accounts.pool.a.login", "invalid")),
        (
            ['accounts.pool.a.login="a"', 'accounts.pool.a.codex_home="/tmp/x"'],
            ("accounts.pool.a.codex_home", "conflict"),
        ),
        (
            ['accounts.pool.a.login="b"', "accounts.pool.b.weight=1"],
            ("accounts.pool.b", "duplicate"),
        ),
        (["accounts.pool.a.enabled=false"], ("accounts.pool", "required")),
        (['accounts.active="a"', "accounts.pool.b.weight=1"], ("accounts.active", "conflict")),
    ],
)
def test_bad_pool_settings_have_stable_codes(
    tmp_path: Path, sets: list[str], issue: tuple[str, str]
) -> None:
    assert issue in _issues(tmp_path, *sets)


def test_an_unknown_key_in_a_pool_account_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(BridgeError):
        load_config(
            env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)},
            sets=['accounts.pool.a.token="x"'],
        )
