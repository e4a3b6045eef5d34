"""``[accounts]`` and ``[accounts.login]``: checked names and issuer URLs, strict keys."""

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
