"""``imagegen-bridge login`` and ``accounts list|status|remove`` against a mock issuer."""

from __future__ import annotations

import json
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from imagebridge.providers.codex.auth import load_codex_credentials
from tests.cli.conftest import SCRIPT, Cli
from tests.support.mock_issuer import ISSUED_ACCOUNT_ID, ISSUED_EMAIL, MockIssuer


@pytest.fixture
def issuer() -> Iterator[MockIssuer]:
    with MockIssuer() as mock:
        yield mock


def _sets(issuer: MockIssuer) -> list[str]:
    return [arg for item in issuer.config_sets() for arg in ("--set", item)]


def _secrets(issuer: MockIssuer, home: Path) -> list[str]:
    document = json.loads((home / "auth.json").read_text())
    tokens = document["tokens"]
    return [
        tokens["access_token"],
        tokens["refresh_token"],
        tokens["id_token"],
        ISSUED_ACCOUNT_ID,
        ISSUED_EMAIL,
    ]


def _assert_private_codex_home(home: Path) -> None:
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "auth.json").stat().st_mode) == 0o600
    document = json.loads((home / "auth.json").read_text())
    assert document["auth_mode"] == "chatgpt"
    assert set(document["tokens"]) == {"id_token", "access_token", "refresh_token", "account_id"}
    assert document["tokens"]["account_id"] == ISSUED_ACCOUNT_ID
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", document["last_refresh"])
    # what the Codex transports (and a codex child with CODEX_HOME=home) read
    assert load_codex_credentials(home).account_id == ISSUED_ACCOUNT_ID


def test_device_code_login_stores_a_private_codex_home(cli: Cli, issuer: MockIssuer) -> None:
    issuer.pending_polls = 2
    result = cli(*_sets(issuer), "--json", "login", "--account", "work")
    assert result.code == 0, result.stderr
    home = cli.data / "accounts" / "work"
    summary = result.json()
    assert summary["name"] == "work"
    assert summary["plan"] == "plus"
    assert summary["state"] == "signed_in"
    assert summary["account"].startswith("sha256:")
    assert issuer.calls["usercode"] == 1
    assert issuer.calls["device_poll"] == 3  # two pending answers, then the code
    assert issuer.calls["exchange"] == 1
    assert f"{issuer.origin}/codex/device" in result.stderr
    assert "ABCD-1234" in result.stderr
    _assert_private_codex_home(home)
    for secret in _secrets(issuer, home):
        assert secret not in result.stdout + result.stderr


def test_browser_login_takes_the_code_from_the_loopback_callback(
    cli: Cli, issuer: MockIssuer
) -> None:
    child = subprocess.Popen(
        [str(SCRIPT), *_sets(issuer), "--json", "login", "--browser", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cli.cwd,
        env=cli.process_env(),
        text=True,
    )
    try:
        assert child.stderr is not None
        url = ""
        for _ in range(20):
            line = child.stderr.readline()
            if line.strip().startswith(f"{issuer.origin}/oauth/authorize?"):
                url = line.strip()
                break
        assert url, "no authorize URL printed"
        query = parse_qs(urlsplit(url).query)
        assert query["code_challenge_method"] == ["S256"]
        assert query["response_type"] == ["code"]
        assert "offline_access" in query["scope"][0]
        # play the browser: the issuer redirects to the loopback callback with a code
        with httpx.Client(timeout=10) as browser:
            # a forged callback (wrong state) is refused and the flow keeps waiting
            callback = query["redirect_uri"][0].replace("localhost", "127.0.0.1")
            forged = browser.get(callback, params={"code": "x", "state": "forged"})
            assert forged.status_code == 400
            redirect = browser.get(url, follow_redirects=False)
            assert redirect.status_code == 302
            location = redirect.headers["location"].replace("localhost", "127.0.0.1")
            landed = browser.get(location)
            assert landed.status_code == 200
            assert "Signed in" in landed.text
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert json.loads(out)["name"] == "default"
    assert issuer.calls["exchange"] == 1  # the verifier matched the challenge
    home = cli.data / "accounts" / "default"
    _assert_private_codex_home(home)
    for secret in _secrets(issuer, home):
        assert secret not in out + err


def test_accounts_list_status_and_remove(cli: Cli, issuer: MockIssuer) -> None:
    assert cli(*_sets(issuer), "--json", "login", "--account", "a").code == 0
    assert cli(*_sets(issuer), "--json", "login", "--account", "b").code == 0
    listed = cli("--json", "--set", 'accounts.active="b"', "accounts", "list").json()
    assert listed["accounts"] == ["a", "b"]
    assert listed["active"] == "b"

    status = cli("--json", "accounts", "status")
    assert status.code == 0
    entries = status.json()["accounts"]
    assert [entry["name"] for entry in entries] == ["a", "b"]
    for entry in entries:
        assert entry["plan"] == "plus"
        assert entry["expires_in_seconds"] > 3000
        assert entry["refresh_token"] is True
        assert re.fullmatch(r"sha256:[0-9a-f]{12}", entry["account"])
    for name in ("a", "b"):
        for secret in _secrets(issuer, cli.data / "accounts" / name):
            assert secret not in status.stdout + status.stderr

    refused = cli("--json", "accounts", "remove", "a")
    assert refused.code == 2
    assert (cli.data / "accounts" / "a" / "auth.json").exists()
    removed = cli("--json", "accounts", "remove", "a", "--yes")
    assert removed.code == 0
    assert removed.json() == {"removed": "a"}
    assert not (cli.data / "accounts" / "a").exists()
    assert cli("--json", "accounts", "list").json()["accounts"] == ["b"]
    missing = cli("--json", "accounts", "status", "--account", "a")
    assert missing.code != 0
    assert missing.error()["code"] == "invalid_request"


def test_an_unsafe_account_name_is_refused(cli: Cli, issuer: MockIssuer) -> None:
    result = cli(*_sets(issuer), "--json", "login", "--account", "../escape")
    assert result.code != 0
    assert result.error()["code"] == "invalid_request"
    assert issuer.calls["usercode"] == 0
    assert not (cli.data / "escape").exists()


def test_auth_doctor_checks_the_active_own_login(cli: Cli, issuer: MockIssuer) -> None:
    codex = ["--set", "providers.codex_responses.enabled=true", "--set", 'accounts.active="work"']
    missing = cli("--json", *codex, "auth-doctor")
    assert missing.code != 0
    assert "imagegen-bridge login --account work" in missing.stdout + missing.stderr
    assert cli(*_sets(issuer), "--json", "login", "--account", "work").code == 0
    # $CODEX_HOME holds no login at all: only the own one can make this pass
    assert not (cli.root / "codex-home" / "auth.json").exists()
    present = cli("--json", *codex, "auth-doctor")
    assert present.code == 0, present.stdout + present.stderr
    assert present.json()["authenticated"] is True
    assert issuer.calls["refresh"] == 0  # a check never spends the refresh token
