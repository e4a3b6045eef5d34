"""The Codex HTTP transports with an own login: one refresh after a 401, then one retried
call; never a loop; and a borrowed ``$CODEX_HOME`` is never written or refreshed."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from imagebridge.contract.errors import ErrorCode
from imagebridge.providers.codex.login.store import OwnLogin
from tests.support.codex_backend import BRIDGE_TOKEN, CodexBridge
from tests.support.mock_issuer import MockIssuer

ROUTES = {"codex-responses": "responses", "codex-images": "images_generations"}
SEEDED_REFRESH = "rt_SECRET_provider_seed"


@pytest.fixture
def issuer() -> Iterator[MockIssuer]:
    with MockIssuer() as mock:
        yield mock


def _own_login(tmp_path: Path, issuer: MockIssuer) -> tuple[OwnLogin, str]:
    login = OwnLogin.under(tmp_path / "accounts", "work")
    stale = issuer.seed_login(
        login, refresh_token=SEEDED_REFRESH, expires_in_s=3600, label="stale-SECRET"
    )
    return login, stale


def _sets(login: OwnLogin, issuer: MockIssuer) -> list[str]:
    return [
        *issuer.config_sets(),
        f'accounts.directory="{login.home.parent}"',
        'accounts.active="work"',
    ]


@pytest.mark.parametrize("provider", sorted(ROUTES))
async def test_a_401_refreshes_once_and_the_retried_call_succeeds(
    provider: str,
    tmp_path: Path,
    issuer: MockIssuer,
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    login, stale = _own_login(tmp_path, issuer)
    fresh = "tok-SECRET-after-refresh-" + provider
    issuer.next_access_tokens.append(fresh)
    bridge = await codex_bridge_factory(*_sets(login, issuer), f'default_provider="{provider}"')
    bridge.backend.expected_token = fresh  # the stale token gets a 401
    with caplog.at_level(logging.DEBUG):
        response = await bridge.run()
    assert len(response.data) == 1
    assert issuer.calls["refresh"] == 1
    sent = bridge.backend.requests_for(ROUTES[provider])  # type: ignore[arg-type]
    assert [request.sent_token(stale) for request in sent] == [True, False]
    assert sent[1].sent_token(fresh)
    for secret in (stale, fresh, SEEDED_REFRESH):
        assert secret not in caplog.text


@pytest.mark.parametrize("provider", sorted(ROUTES))
async def test_a_second_401_after_the_refresh_is_an_authentication_error(
    provider: str,
    tmp_path: Path,
    issuer: MockIssuer,
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
) -> None:
    login, _ = _own_login(tmp_path, issuer)
    bridge = await codex_bridge_factory(*_sets(login, issuer), f'default_provider="{provider}"')
    bridge.backend.expected_token = "tok-nobody-has-this"
    error = await bridge.fail()
    assert error.code is ErrorCode.AUTHENTICATION
    assert error.details["http_status"] == 401
    assert issuer.calls["refresh"] == 1  # one refresh, no loop
    assert bridge.backend.calls(ROUTES[provider]) == 2  # type: ignore[arg-type]


async def test_a_borrowed_home_is_never_written_nor_refreshed(
    tmp_path: Path,
    issuer: MockIssuer,
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
) -> None:
    # no accounts.active: the transports borrow $CODEX_HOME (written by the fixture)
    bridge = await codex_bridge_factory(*issuer.config_sets())
    auth_file = bridge.codex_home / "auth.json"
    before = (auth_file.read_bytes(), auth_file.stat().st_mtime_ns)
    entries_before = sorted(path.name for path in bridge.codex_home.iterdir())
    bridge.backend.expected_token = "tok-the-backend-wants-another"
    error = await bridge.fail()
    assert error.code is ErrorCode.AUTHENTICATION
    assert bridge.backend.calls("responses") == 1  # not repeated: nothing could refresh
    assert issuer.calls["refresh"] == 0
    assert (auth_file.read_bytes(), auth_file.stat().st_mtime_ns) == before
    assert sorted(path.name for path in bridge.codex_home.iterdir()) == entries_before
    # and a working borrowed login still works as before
    bridge.backend.expected_token = BRIDGE_TOKEN
    assert len((await bridge.run()).data) == 1
    assert (auth_file.read_bytes(), auth_file.stat().st_mtime_ns) == before


async def test_an_own_login_near_expiry_is_refreshed_before_the_call(
    tmp_path: Path,
    issuer: MockIssuer,
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
) -> None:
    login = OwnLogin.under(tmp_path / "accounts", "work")
    expiring = issuer.seed_login(login, refresh_token=SEEDED_REFRESH, expires_in_s=60)
    fresh = "tok-SECRET-refreshed-early"
    issuer.next_access_tokens.append(fresh)
    bridge = await codex_bridge_factory(*_sets(login, issuer), "accounts.refresh_margin_secs=300")
    bridge.backend.expected_token = fresh
    assert len((await bridge.run()).data) == 1
    assert issuer.calls["refresh"] == 1
    [sent] = bridge.backend.requests_for("responses")
    assert sent.sent_token(fresh)
    assert not sent.sent_token(expiring)


async def test_a_missing_own_login_names_the_command_that_creates_it(
    tmp_path: Path,
    issuer: MockIssuer,
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
) -> None:
    bridge = await codex_bridge_factory(
        *issuer.config_sets(),
        f'accounts.directory="{tmp_path / "accounts"}"',
        'accounts.active="nobody"',
    )
    error = await bridge.fail()
    assert error.code is ErrorCode.AUTHENTICATION
    assert "imagegen-bridge login --account nobody" in " ".join(error.suggestions)
    assert bridge.backend.calls("responses") == 0
