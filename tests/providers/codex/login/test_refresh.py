"""Own logins are refreshed before expiry, once per rejected token, under a cross-process
lock, and written back atomically with private modes."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import credentials_from_document
from imagebridge.providers.codex.login.issuer import Issuer
from imagebridge.providers.codex.login.refresh import RefreshPolicy, refresh_now
from imagebridge.providers.codex.login.store import OwnLogin
from tests.support.mock_issuer import CLIENT_ID, ISSUED_ACCOUNT_ID, MockIssuer

REFRESH_SECRET = "rt_SECRET_seeded_0001"


@pytest.fixture
def issuer() -> Any:
    with MockIssuer() as mock:
        yield mock


def _issuer(mock: MockIssuer) -> Issuer:
    return Issuer(issuer=mock.origin, token_url=mock.token_url, client_id=CLIENT_ID, timeout_s=10)


def _stored_login(
    tmp_path: Path, mock: MockIssuer, *, expires_in_s: float, name: str = "work"
) -> tuple[OwnLogin, str]:
    """An own login whose access token expires in ``expires_in_s``."""
    login = OwnLogin.under(tmp_path / "accounts", name)
    access = mock.seed_login(login, refresh_token=REFRESH_SECRET, expires_in_s=expires_in_s)
    return login, access


def _document(login: OwnLogin) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(login.auth_file.read_text())
    return loaded


def test_a_fresh_login_is_read_without_calling_the_issuer(
    tmp_path: Path, issuer: MockIssuer
) -> None:
    login, access = _stored_login(tmp_path, issuer, expires_in_s=3600)
    before = login.auth_file.read_bytes()
    credentials = refresh_now(login, _issuer(issuer), RefreshPolicy(margin_s=300))
    assert credentials.access_token == access
    assert issuer.calls["refresh"] == 0
    assert login.auth_file.read_bytes() == before


def test_a_login_within_the_margin_is_refreshed_and_written_back(
    tmp_path: Path, issuer: MockIssuer
) -> None:
    login, access = _stored_login(tmp_path, issuer, expires_in_s=120)
    credentials = refresh_now(login, _issuer(issuer), RefreshPolicy(margin_s=300))
    assert issuer.calls["refresh"] == 1
    assert credentials.access_token != access
    assert credentials.access_token == issuer.issued_access_tokens[-1]
    document = _document(login)
    assert document["tokens"]["access_token"] == credentials.access_token
    assert document["tokens"]["refresh_token"] != REFRESH_SECRET  # the spent one is replaced
    assert document["tokens"]["account_id"] == ISSUED_ACCOUNT_ID
    assert document["auth_mode"] == "chatgpt"
    assert credentials_from_document(document).access_token == credentials.access_token
    # a second read finds the fresh token: no second refresh
    refresh_now(login, _issuer(issuer), RefreshPolicy(margin_s=300))
    assert issuer.calls["refresh"] == 1


def test_the_written_login_is_private(tmp_path: Path, issuer: MockIssuer) -> None:
    login, _ = _stored_login(tmp_path, issuer, expires_in_s=10)
    refresh_now(login, _issuer(issuer), RefreshPolicy(margin_s=300))
    assert stat.S_IMODE(login.home.stat().st_mode) == 0o700
    assert stat.S_IMODE(login.auth_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(login.lock_file.stat().st_mode) == 0o600
    leftovers = [p.name for p in login.home.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_rejected_token_is_refreshed_once_and_a_changed_file_is_used_instead(
    tmp_path: Path, issuer: MockIssuer
) -> None:
    login, access = _stored_login(tmp_path, issuer, expires_in_s=3600)
    first = refresh_now(login, _issuer(issuer), RefreshPolicy(), rejected_token=access)
    assert issuer.calls["refresh"] == 1
    assert first.access_token != access
    # another caller still holding the old token: the file already moved on
    second = refresh_now(login, _issuer(issuer), RefreshPolicy(), rejected_token=access)
    assert issuer.calls["refresh"] == 1
    assert second.access_token == first.access_token


def test_a_spent_refresh_token_is_an_authentication_error_without_the_token(
    tmp_path: Path, issuer: MockIssuer
) -> None:
    login, _ = _stored_login(tmp_path, issuer, expires_in_s=10)
    issuer._spend(REFRESH_SECRET)  # someone else used it
    before = login.auth_file.read_bytes()
    with pytest.raises(BridgeError) as caught:
        refresh_now(login, _issuer(issuer), RefreshPolicy(margin_s=300))
    assert caught.value.code is ErrorCode.AUTHENTICATION
    assert caught.value.details["issuer_code"] == "refresh_token_reused"
    assert not caught.value.retryable
    assert REFRESH_SECRET not in json.dumps(caught.value.to_dict())
    assert login.auth_file.read_bytes() == before


_CHILD = """
import json, sys, time
from imagebridge.config import load_config
from imagebridge.application.codex import codex_credentials_loader
import asyncio
sets = json.loads(sys.argv[1])
start_at = float(sys.argv[2])
loader = codex_credentials_loader(load_config(env={}, sets=sets).require_valid())
while time.time() < start_at:
    time.sleep(0.005)
credentials = asyncio.run(loader())
import hashlib
print(hashlib.sha256(credentials.access_token.encode()).hexdigest())
"""


def test_two_bridge_processes_refreshing_the_same_login_make_one_refresh_call(
    tmp_path: Path, issuer: MockIssuer
) -> None:
    login, _ = _stored_login(tmp_path, issuer, expires_in_s=60)
    issuer.refresh_delay_s = 0.5  # the first refresh is still running when the second looks
    sets = [
        *issuer.config_sets(),
        f'accounts.directory="{login.home.parent}"',
        'accounts.active="work"',
        "accounts.refresh_margin_secs=300",
        "providers.codex_app_server.enabled=false",
    ]
    start_at = time.time() + 1.5
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, json.dumps(sets), str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [child.communicate(timeout=60) for child in children]
    assert [child.returncode for child in children] == [0, 0], outputs
    assert issuer.calls["refresh"] == 1
    hashes = {out.strip() for out, _ in outputs}
    assert len(hashes) == 1  # both use the one refreshed token
    assert _document(login)["tokens"]["access_token"] == issuer.issued_access_tokens[-1]
    for out, err in outputs:
        assert REFRESH_SECRET not in out + err
        assert issuer.issued_access_tokens[-1] not in out + err
