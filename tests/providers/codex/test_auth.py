"""Borrowing the codex CLI's ChatGPT login: checks in order, fresh reads, no leaks."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex import auth as codex_auth
from imagebridge.providers.codex.auth import (
    CODEX_LOGIN_SUGGESTION,
    CodexCredentials,
    codex_auth_path,
    codex_home_path,
    load_codex_credentials,
    load_codex_credentials_async,
)
from tests.support.codex_backend import make_jwt, write_codex_auth

SECRET = "sk-SECRET-ACCESS-TOKEN-7f3a9c"
SECRET_ACCOUNT = "acct-SECRET-ACCOUNT-41d2"


def _write(path: Path, document: object, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    path.chmod(mode)
    return path


def _document(**tokens: object) -> dict[str, object]:
    return {"auth_mode": "chatgpt", "tokens": {"access_token": SECRET, **tokens}}


def _reason(error: BridgeError) -> str:
    return str(error.details["reason"])


def _failure(home: Path) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        load_codex_credentials(home)
    return caught.value


# -- locating the file ------------------------------------------------------------------------


def test_codex_home_comes_from_codex_home_variable(tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(tmp_path / "custom"), "HOME": str(tmp_path / "user")}
    assert codex_home_path(env) == tmp_path / "custom"
    assert codex_auth_path(None, env) == tmp_path / "custom" / "auth.json"


def test_blank_codex_home_falls_back_to_dot_codex_under_home(tmp_path: Path) -> None:
    env = {"CODEX_HOME": "  ", "HOME": str(tmp_path)}
    assert codex_home_path(env) == tmp_path / ".codex"


def test_explicit_codex_home_wins_over_environment(tmp_path: Path) -> None:
    write_codex_auth(tmp_path / "explicit", access_token="tok-explicit", account_id=None)
    write_codex_auth(tmp_path / "env", access_token="tok-env", account_id=None)
    env = {"CODEX_HOME": str(tmp_path / "env")}
    assert load_codex_credentials(tmp_path / "explicit", env).access_token == "tok-explicit"
    assert load_codex_credentials(None, env).access_token == "tok-env"


def test_explicit_auth_file_path_is_honoured(tmp_path: Path) -> None:
    path = _write(tmp_path / "elsewhere.json", _document(account_id="acct-1"))
    credentials = load_codex_credentials(auth_file=path)
    assert (credentials.access_token, credentials.account_id) == (SECRET, "acct-1")


# -- successful reads -------------------------------------------------------------------------


def test_reads_token_and_account_id(tmp_path: Path) -> None:
    write_codex_auth(tmp_path, access_token="tok-1", account_id="acct-1")
    assert load_codex_credentials(tmp_path) == CodexCredentials("tok-1", "acct-1")


def test_reads_the_file_fresh_on_every_call(tmp_path: Path) -> None:
    write_codex_auth(tmp_path, access_token="tok-before", account_id=None)
    assert load_codex_credentials(tmp_path).access_token == "tok-before"
    write_codex_auth(tmp_path, access_token="tok-after", account_id=None)
    assert load_codex_credentials(tmp_path).access_token == "tok-after"


def test_never_writes_the_file(tmp_path: Path) -> None:
    path = write_codex_auth(tmp_path, access_token=make_jwt({"exp": 1}), account_id=None)
    before = (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_mode)
    load_codex_credentials(tmp_path)
    assert (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_mode) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["auth.json"]


def test_surrounding_whitespace_around_the_token_is_trimmed(tmp_path: Path) -> None:
    _write(tmp_path / "auth.json", {"auth_mode": "chatgpt", "tokens": {"access_token": " t\n"}})
    assert load_codex_credentials(tmp_path).access_token == "t"


def test_world_readable_file_is_accepted(tmp_path: Path) -> None:
    write_codex_auth(tmp_path, access_token="tok", mode=0o644)
    assert load_codex_credentials(tmp_path).access_token == "tok"


@pytest.mark.parametrize("blank", ["", "   ", None])
def test_blank_account_id_is_absent(tmp_path: Path, blank: str | None) -> None:
    _write(tmp_path / "auth.json", _document(account_id=blank))
    assert load_codex_credentials(tmp_path).account_id is None


def test_account_id_falls_back_to_the_access_token_claims(tmp_path: Path) -> None:
    token = make_jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-from-jwt"}})
    write_codex_auth(tmp_path, access_token=token, account_id=None)
    assert load_codex_credentials(tmp_path).account_id == "acct-from-jwt"


def test_account_id_in_the_file_wins_over_the_claims(tmp_path: Path) -> None:
    token = make_jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-from-jwt"}})
    write_codex_auth(tmp_path, access_token=token, account_id="acct-from-file")
    assert load_codex_credentials(tmp_path).account_id == "acct-from-file"


@pytest.mark.parametrize(
    "token",
    [
        "not-a-jwt",
        "a.%%%.c",
        "a.bm90LWpzb24.c",  # payload "not-json"
        make_jwt({"https://api.openai.com/auth": "not-an-object"}),
        make_jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "  "}}),
        make_jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "bad id\n"}}),
        make_jwt({"other": 1}),
    ],
)
def test_unusable_claims_leave_the_account_id_absent(tmp_path: Path, token: str) -> None:
    write_codex_auth(tmp_path, access_token=token, account_id=None)
    credentials = load_codex_credentials(tmp_path)
    assert credentials.access_token == token
    assert credentials.account_id is None


async def test_async_loader_reads_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_codex_auth(tmp_path, access_token="tok-async", account_id="acct-async")
    threads: list[int] = []
    real = codex_auth.load_codex_credentials

    def spy(*args: object, **kwargs: object) -> CodexCredentials:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(codex_auth, "load_codex_credentials", spy)
    credentials = await load_codex_credentials_async(tmp_path)
    assert credentials == CodexCredentials("tok-async", "acct-async")
    assert threads and threads[0] != threading.get_ident()


# -- failures, in the order of the checks -------------------------------------------------------


def test_missing_file_is_an_authentication_error_with_login_suggestion(tmp_path: Path) -> None:
    error = _failure(tmp_path)
    assert error.code is ErrorCode.AUTHENTICATION
    assert error.retryable is False
    assert _reason(error) == "missing"
    assert error.suggestions == [CODEX_LOGIN_SUGGESTION]


def test_symlink_is_refused_even_to_a_valid_file(tmp_path: Path) -> None:
    target = write_codex_auth(tmp_path / "real", access_token="tok")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "auth.json").symlink_to(target)
    assert _reason(_failure(tmp_path / "home")) == "not_regular_file"


def test_directory_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "auth.json").mkdir()
    assert _reason(_failure(tmp_path)) == "not_regular_file"


@pytest.mark.timeout(10)
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "auth.json", 0o600)
    assert _reason(_failure(tmp_path)) == "not_regular_file"


def test_file_over_one_mebibyte_is_refused(tmp_path: Path) -> None:
    document = _document()
    document["padding"] = "x" * (1024 * 1024)
    _write(tmp_path / "auth.json", document)
    assert _reason(_failure(tmp_path)) == "too_large"


def test_size_limit_is_a_parameter(tmp_path: Path) -> None:
    write_codex_auth(tmp_path, access_token="tok")
    size = (tmp_path / "auth.json").stat().st_size
    assert load_codex_credentials(tmp_path, max_bytes=size).access_token == "tok"
    with pytest.raises(BridgeError) as caught:
        load_codex_credentials(tmp_path, max_bytes=size - 1)
    assert _reason(caught.value) == "too_large"


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666, 0o660])
def test_group_or_other_writable_file_is_refused(tmp_path: Path, mode: int) -> None:
    write_codex_auth(tmp_path, access_token="tok", mode=mode)
    assert _reason(_failure(tmp_path)) == "insecure_permissions"


def test_size_is_checked_before_permissions(tmp_path: Path) -> None:
    document = _document()
    document["padding"] = "x" * (1024 * 1024)
    _write(tmp_path / "auth.json", document, mode=0o666)
    assert _reason(_failure(tmp_path)) == "too_large"


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe{}", b"[1, 2]", b"", b'"text"'])
def test_unparseable_or_non_object_json_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "auth.json"
    path.write_bytes(content)
    path.chmod(0o600)
    assert _reason(_failure(tmp_path)) == "invalid_json"


def test_permissions_are_checked_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_bytes(b"{not json")
    path.chmod(0o666)
    assert _reason(_failure(tmp_path)) == "insecure_permissions"


@pytest.mark.parametrize("mode", ["apikey", "ChatGPT", None, 1])
def test_only_chatgpt_auth_mode_is_accepted(tmp_path: Path, mode: object) -> None:
    _write(tmp_path / "auth.json", {"auth_mode": mode, "tokens": {"access_token": "t"}})
    assert _reason(_failure(tmp_path)) == "not_chatgpt"


def test_api_key_login_is_refused(tmp_path: Path) -> None:
    _write(tmp_path / "auth.json", {"OPENAI_API_KEY": SECRET, "tokens": None})
    assert _reason(_failure(tmp_path)) == "not_chatgpt"


@pytest.mark.parametrize("tokens", [None, "string", ["list"]])
def test_tokens_must_be_an_object(tmp_path: Path, tokens: object) -> None:
    _write(tmp_path / "auth.json", {"auth_mode": "chatgpt", "tokens": tokens})
    assert _reason(_failure(tmp_path)) == "missing_tokens"


@pytest.mark.parametrize("token", [None, "", "   ", 12, ["x"]])
def test_access_token_must_be_a_non_blank_string(tmp_path: Path, token: object) -> None:
    _write(tmp_path / "auth.json", {"auth_mode": "chatgpt", "tokens": {"access_token": token}})
    assert _reason(_failure(tmp_path)) == "missing_access_token"


@pytest.mark.parametrize("token", ["has space", "line\nbreak", "tab\tinside", "ünicode"])
def test_token_that_cannot_be_a_header_is_malformed(tmp_path: Path, token: str) -> None:
    _write(tmp_path / "auth.json", {"auth_mode": "chatgpt", "tokens": {"access_token": token}})
    assert _reason(_failure(tmp_path)) == "malformed_access_token"


@pytest.mark.parametrize("account", ["acct\r\nX-Injected: 1", 42, "a" * 300])
def test_account_id_that_cannot_be_a_header_is_malformed(tmp_path: Path, account: object) -> None:
    _write(tmp_path / "auth.json", _document(account_id=account))
    assert _reason(_failure(tmp_path)) == "malformed_account_id"


# -- secrecy ------------------------------------------------------------------------------------


def test_repr_and_str_redact_token_and_account_id() -> None:
    credentials = CodexCredentials(SECRET, SECRET_ACCOUNT)
    for text in (repr(credentials), str(credentials), f"{credentials}", f"{[credentials]}"):
        assert SECRET not in text
        assert SECRET_ACCOUNT not in text
        assert "<redacted>" in text
    assert "account_id=None" in repr(CodexCredentials(SECRET))


def _secret_failure_cases(tmp_path: Path) -> dict[str, Path]:
    """One CODEX_HOME per failure mode, each file holding the secrets somewhere."""
    cases: dict[str, Path] = {}

    def home(name: str) -> Path:
        cases[name] = tmp_path / name
        cases[name].mkdir()
        return cases[name] / "auth.json"

    _write(home("not_chatgpt"), {"auth_mode": "apikey", "tokens": {"access_token": SECRET}})
    _write(home("insecure"), _document(account_id=SECRET_ACCOUNT), mode=0o666)
    path = home("invalid_json")
    path.write_text(f'{{"tokens": {{"access_token": "{SECRET}"', encoding="utf-8")
    path.chmod(0o600)
    big = _document(account_id=SECRET_ACCOUNT)
    big["padding"] = "x" * (1024 * 1024)
    _write(home("too_large"), big)
    bad_token = f"{SECRET}\nX-Leak: 1"
    _write(home("malformed"), {"auth_mode": "chatgpt", "tokens": {"access_token": bad_token}})
    _write(home("bad_account"), _document(account_id=f"{SECRET_ACCOUNT}\r\nX: 1"))
    _write(home("no_tokens"), {"auth_mode": "chatgpt", "tokens": SECRET})
    target = _write(tmp_path / "target.json", _document(account_id=SECRET_ACCOUNT))
    home("symlink").symlink_to(target)
    cases["missing"] = tmp_path / f"missing-{SECRET}"
    return cases


def test_secrets_and_path_never_leak_from_any_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cases = _secret_failure_cases(tmp_path)
    seen_reasons = set()
    for name, home in cases.items():
        error = _failure(home)
        seen_reasons.add(_reason(error))
        rendered = " ".join(
            [
                str(error),
                repr(error),
                json.dumps(error.to_dict()),
                repr(error.__cause__),
                repr(error.__context__),
                " ".join(error.suggestions),
            ]
        )
        for secret in (SECRET, SECRET_ACCOUNT, str(home), str(tmp_path)):
            assert secret not in rendered, (name, secret)
        assert error.code is ErrorCode.AUTHENTICATION
    assert len(seen_reasons) == len(cases)
    assert SECRET not in caplog.text
    assert SECRET_ACCOUNT not in caplog.text


def test_exception_chain_hides_the_parser_error(tmp_path: Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text(f'{{"access_token": "{SECRET}" oops}}', encoding="utf-8")
    path.chmod(0o600)
    error = _failure(tmp_path)
    assert error.__cause__ is None
    assert error.__suppress_context__ is True
