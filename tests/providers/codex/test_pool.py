"""Several ChatGPT logins behind one bridge: the account pool over the Codex backend mock.

Each account is its own codex home with its own token; the mock answers each token with
its own plan state and scripts (:meth:`CodexBackend.login`), so a test can see which
account every upstream call ran on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.errors import ErrorCode
from tests.support.codex_backend import CodexBackend, CodexBridge, write_codex_auth

TOKENS = {
    "alpha": "tok-alpha-SECRET-1f0c",
    "beta": "tok-beta-SECRET-2a9d",
    "gamma": "tok-gamma-SECRET-3e47",
}
ACCOUNT_IDS = {name: f"acct-{name}-SECRET-77" for name in TOKENS}
Factory = Callable[..., Awaitable[CodexBridge]]


@pytest.fixture
def pool_bridge(
    codex_bridge_factory: Factory, tmp_path: Path
) -> Callable[..., Awaitable[CodexBridge]]:
    """A bridge whose pool holds ``names`` (each a codex home with its own token)."""

    async def build(*sets: str, names: tuple[str, ...] = ("alpha", "beta")) -> CodexBridge:
        accounts: list[str] = []
        for name in names:
            home = tmp_path / f"home-{name}"
            write_codex_auth(home, access_token=TOKENS[name], account_id=ACCOUNT_IDS[name])
            accounts.append(f'accounts.pool.{name}.codex_home="{home}"')
        return await codex_bridge_factory(*accounts, *sets)

    return build


def calls(backend: CodexBackend, route: Any = "responses") -> dict[str, int]:
    return {name: backend.calls_by(token, route) for name, token in TOKENS.items()}


# -- spreading ------------------------------------------------------------------------------


async def test_a_fan_out_of_six_spreads_over_two_accounts(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    response = await bridge.run(parameters={"n": 6})

    assert len(response.data) == 6
    assert calls(bridge.backend) == {"alpha": 3, "beta": 3, "gamma": 0}
    assert "account_failover_used" not in response.warnings


async def test_a_fan_out_of_six_spreads_over_three_accounts_on_images_too(
    pool_bridge: Any,
) -> None:
    bridge = await pool_bridge(names=("alpha", "beta", "gamma"))
    response = await bridge.run(parameters={"n": 6}, routing={"provider": "codex-images"})

    assert len(response.data) == 6
    assert calls(bridge.backend, "images_generations") == {"alpha": 2, "beta": 2, "gamma": 2}


async def test_sequential_calls_alternate_when_quota_is_equal(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    for _ in range(4):
        await bridge.run()
    assert calls(bridge.backend) == {"alpha": 2, "beta": 2, "gamma": 0}


async def test_round_robin_follows_the_weights(pool_bridge: Any) -> None:
    bridge = await pool_bridge('accounts.policy="round_robin"', "accounts.pool.alpha.weight=2")
    for _ in range(6):
        await bridge.run()
    assert calls(bridge.backend) == {"alpha": 4, "beta": 2, "gamma": 0}


async def test_primary_first_uses_the_heaviest_account_while_it_is_ready(
    pool_bridge: Any,
) -> None:
    bridge = await pool_bridge('accounts.policy="primary_first"', "accounts.pool.beta.weight=5")
    response = await bridge.run(parameters={"n": 3})
    assert len(response.data) == 3
    assert calls(bridge.backend) == {"alpha": 0, "beta": 3, "gamma": 0}

    bridge.backend.login(TOKENS["beta"]).script("http_429")
    await bridge.run()
    assert calls(bridge.backend) == {"alpha": 1, "beta": 4, "gamma": 0}


async def test_the_quota_policy_prefers_the_account_with_most_image_quota_left(
    pool_bridge: Any,
) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["alpha"]).quota.image_used_percent = 80.0
    bridge.backend.login(TOKENS["beta"]).quota.image_used_percent = 30.0
    await bridge.provider().diagnostics()  # reads wham/usage of every account

    for _ in range(3):
        await bridge.run()
    assert calls(bridge.backend) == {"alpha": 0, "beta": 3, "gamma": 0}


async def test_accounts_below_the_minimum_are_skipped(pool_bridge: Any) -> None:
    bridge = await pool_bridge(
        'accounts.policy="primary_first"',
        "accounts.pool.alpha.weight=9",
        "accounts.min_remaining_percent=10",
    )
    bridge.backend.login(TOKENS["alpha"]).quota.image_used_percent = 95.0
    bridge.backend.login(TOKENS["beta"]).quota.image_used_percent = 20.0
    await bridge.provider().diagnostics()

    await bridge.run()
    assert calls(bridge.backend) == {"alpha": 0, "beta": 1, "gamma": 0}
    [alpha, _] = (await bridge.provider().diagnostics())["accounts"]["accounts"]
    assert (alpha["name"], alpha["ready"], alpha["reason"]) == ("alpha", False, "below_minimum")


# -- failover --------------------------------------------------------------------------------


async def test_a_quota_refusal_moves_the_call_and_skips_the_account_until_its_reset(
    pool_bridge: Any,
) -> None:
    bridge = await pool_bridge()
    alpha = bridge.backend.login(TOKENS["alpha"])
    alpha.quota.limit_resets_in_s = 600
    alpha.quota.primary_resets_in_s = 600
    alpha.script("http_429")

    response = await bridge.run()

    assert calls(bridge.backend) == {"alpha": 1, "beta": 1, "gamma": 0}
    assert "account_failover_used" in response.warnings
    failed = [a for a in response.attempts if a.outcome.value == "failed"]
    assert [(a.provider, a.error_code) for a in failed] == [
        ("codex-responses", ErrorCode.RATE_LIMITED)
    ]
    [switch] = [n for n in response.normalizations if n.field == "routing.account"]
    assert (switch.requested, switch.effective) == ("alpha", "beta")
    assert switch.reason == "account_quota_refused"

    for _ in range(3):  # alpha is out until its reset: nothing more is sent to it
        await bridge.run()
    assert calls(bridge.backend) == {"alpha": 1, "beta": 4, "gamma": 0}

    pool = bridge.provider().pool
    pool.clock = lambda: time.time() + 700  # past alpha's reset
    await bridge.run(parameters={"n": 2})
    assert calls(bridge.backend)["alpha"] == 2


async def test_an_in_stream_usage_limit_also_moves_the_call(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["alpha"]).script("usage_limit_in_stream")
    response = await bridge.run()
    assert calls(bridge.backend) == {"alpha": 1, "beta": 1, "gamma": 0}
    assert "account_failover_used" in response.warnings


async def test_a_refused_login_moves_the_call_to_the_next_account(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["alpha"]).set_default("http_401")
    response = await bridge.run()
    assert calls(bridge.backend) == {"alpha": 1, "beta": 1, "gamma": 0}
    [switch] = [n for n in response.normalizations if n.field == "routing.account"]
    assert switch.reason == "account_login_refused"

    await bridge.provider().diagnostics()  # reading the file again does not clear a 401
    await bridge.run()  # alpha is skipped for the refusal cooldown
    assert calls(bridge.backend) == {"alpha": 1, "beta": 2, "gamma": 0}


async def test_an_unreadable_login_is_skipped(pool_bridge: Any, tmp_path: Path) -> None:
    bridge = await pool_bridge()
    auth = tmp_path / "home-alpha" / "auth.json"
    saved = auth.read_bytes()
    auth.unlink()
    response = await bridge.run(parameters={"n": 2})
    assert len(response.data) == 2
    assert calls(bridge.backend) == {"alpha": 0, "beta": 2, "gamma": 0}

    auth.write_bytes(saved)
    auth.chmod(0o600)
    await bridge.provider().check_ready()  # the readiness probe reads it again: back in
    await bridge.run(parameters={"n": 2})  # alpha, not read yet, ranks with beta: they share
    assert calls(bridge.backend) == {"alpha": 1, "beta": 3, "gamma": 0}


async def test_a_refused_account_moves_the_call_to_the_next_account(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["alpha"]).script("http_403")
    response = await bridge.run()
    assert calls(bridge.backend) == {"alpha": 1, "beta": 1, "gamma": 0}
    assert "account_failover_used" in response.warnings


async def test_a_plan_refusing_every_carrier_moves_to_an_account_whose_plan_accepts(
    pool_bridge: Any,
) -> None:
    bridge = await pool_bridge('providers.codex_responses.responses_model_fallbacks=["gpt-5.4"]')
    bridge.backend.login(TOKENS["alpha"]).refused_models.update({"gpt-5.5", "gpt-5.4"})

    response = await bridge.run()

    assert calls(bridge.backend) == {"alpha": 2, "beta": 1, "gamma": 0}
    assert {"account_failover_used", "responses_model_fallback_used"} <= set(response.warnings)
    failed = [(a.model, a.error_code) for a in response.attempts if a.outcome.value == "failed"]
    assert failed == [("gpt-5.5", ErrorCode.UPSTREAM), ("gpt-5.4", ErrorCode.UPSTREAM)]
    [switch] = [n for n in response.normalizations if n.field == "routing.account"]
    assert switch.reason == "account_plan_refused"
    [beta_call] = [
        r for r in bridge.backend.requests_for("responses") if r.sent_token(TOKENS["beta"])
    ]
    assert beta_call.body["model"] == "gpt-5.5"  # beta starts at the first carrier again

    await bridge.run()  # alpha's plan is skipped on this transport for the cooldown
    assert calls(bridge.backend) == {"alpha": 2, "beta": 2, "gamma": 0}


async def test_an_unknown_outcome_is_never_retried_on_another_account(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["alpha"]).script("disconnect_mid_stream")

    error = await bridge.fail()

    assert error.outcome_unknown
    assert error.details["account"] == "alpha"
    assert calls(bridge.backend) == {"alpha": 1, "beta": 0, "gamma": 0}


async def test_a_deadline_on_an_account_names_it_and_stays_there(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["alpha"]).script("stall")

    error = await bridge.fail(timeout_ms=700)

    assert error.code is ErrorCode.TIMEOUT
    assert error.outcome_unknown and not error.retryable
    assert error.details["account"] == "alpha"
    assert calls(bridge.backend) == {"alpha": 1, "beta": 0, "gamma": 0}


async def test_a_deadline_mid_stream_on_an_account_names_it(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["beta"]).script("stall_mid_stream")
    bridge.backend.login(TOKENS["alpha"]).quota.image_used_percent = 90.0
    await bridge.provider().diagnostics()  # beta, with more quota left, takes the call

    error = await bridge.fail(timeout_ms=700)

    assert error.code is ErrorCode.TIMEOUT
    assert error.outcome_unknown
    assert error.details["account"] == "beta"


async def test_a_server_error_stays_on_its_account(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["alpha"]).script("http_500", "http_500")

    error = await bridge.fail()

    assert error.code is ErrorCode.UPSTREAM
    assert error.details["account"] == "alpha"
    assert calls(bridge.backend) == {"alpha": 2, "beta": 0, "gamma": 0}  # its one retry


async def test_every_account_exhausted_is_a_429_with_retry_after_at_the_earliest_reset(
    pool_bridge: Any,
) -> None:
    bridge = await pool_bridge()
    for name, wait in (("alpha", 900), ("beta", 400)):
        login = bridge.backend.login(TOKENS[name])
        login.quota.limit_resets_in_s = wait
        login.quota.primary_resets_in_s = wait
        login.script("http_429")

    error = await bridge.fail()

    assert error.code is ErrorCode.RATE_LIMITED
    assert error.details["quota_exhausted"] is True
    assert 390_000 <= error.details["retry_after_ms"] <= 400_000
    assert abs(error.details["resets_at"] - (time.time() + 400)) <= 5
    assert [entry["account"] for entry in error.details["accounts_tried"]] == ["alpha", "beta"]
    assert set(error.details["accounts"]) == {"alpha", "beta"}

    before = sum(calls(bridge.backend).values())
    again = await bridge.fail()  # known exhausted: answered without an upstream call
    assert again.code is ErrorCode.RATE_LIMITED
    assert sum(calls(bridge.backend).values()) == before


async def test_an_open_account_breaker_is_skipped(pool_bridge: Any) -> None:
    bridge = await pool_bridge(
        "runtime.circuit_breakers.codex-responses.failure_threshold=2",
        "providers.codex_responses.max_transient_attempts=1",
    )
    bridge.backend.login(TOKENS["alpha"]).script("http_500", "http_500")
    await bridge.fail()  # alpha
    await bridge.run()  # beta: the provider's breaker starts over, alpha's does not
    await bridge.fail()  # alpha again: its breaker opens

    for _ in range(2):
        await bridge.run()
    assert calls(bridge.backend) == {"alpha": 2, "beta": 3, "gamma": 0}
    [alpha, beta] = (await bridge.provider().diagnostics())["accounts"]["accounts"]
    assert (alpha["reason"], alpha["breaker"]["state"]) == ("breaker_open", "open")
    assert beta["ready"] is True


async def test_an_account_at_its_concurrency_limit_is_passed_over(pool_bridge: Any) -> None:
    bridge = await pool_bridge(
        'accounts.policy="primary_first"',
        "accounts.pool.alpha.weight=3",
        "accounts.pool.alpha.max_concurrent=1",
    )
    response = await bridge.run(parameters={"n": 4})
    assert len(response.data) == 4
    counted = calls(bridge.backend)
    assert counted["alpha"] >= 1 and counted["beta"] >= 1 and sum(counted.values()) == 4


# -- seeing it ---------------------------------------------------------------------------------


async def test_diagnostics_show_every_account_without_secrets(pool_bridge: Any) -> None:
    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["alpha"]).quota.image_used_percent = 25.0
    await bridge.run()

    detail = await bridge.provider().diagnostics()

    pool = detail["accounts"]
    assert (pool["policy"], pool["ready"]) == ("quota", 2)
    alpha = pool["accounts"][0]
    assert alpha["name"] == "alpha" and alpha["login"] == "codex_home"
    assert alpha["login_id"].startswith("sha256:") and len(alpha["login_id"]) == 19
    assert alpha["quota"]["image_remaining_percent"] == 75.0
    assert alpha["quota"]["image_windows"][0]["limit"] == "image_gen"
    assert sum(a["calls_24h"] for a in pool["accounts"]) == 1
    text = json.dumps(detail)
    for secret in (*TOKENS.values(), *ACCOUNT_IDS.values(), "mock-user@example.invalid"):
        assert secret not in text


async def test_without_a_pool_nothing_changes(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.script("http_429")
    error = await codex_bridge.fail()
    assert error.code is ErrorCode.RATE_LIMITED
    assert "account" not in error.details
    response = await codex_bridge.run()  # a single account is never skipped
    assert response.data
    assert "accounts" not in await codex_bridge.provider().diagnostics()


async def test_metrics_label_each_account(pool_bridge: Any) -> None:
    from imagebridge.server.metrics import BridgeMetrics

    bridge = await pool_bridge()
    bridge.backend.login(TOKENS["beta"]).script("http_500", "http_500")
    await bridge.run()  # alpha
    await bridge.fail()  # beta, after its one retry
    text = BridgeMetrics(bridge.runtime, lambda: bridge.app.providers).render().decode()

    calls_total = "imagegen_bridge_account_calls_total"
    assert calls_total + '{account="alpha",provider="codex-responses",result="success"} 1.0' in text
    assert calls_total + '{account="beta",provider="codex-responses",result="error"} 1.0' in text
    assert 'imagegen_bridge_account_ready{account="alpha",provider="codex-responses"} 1.0' in text
    for secret in (*TOKENS.values(), *ACCOUNT_IDS.values()):
        assert secret not in text


# -- own logins in the pool ----------------------------------------------------------------------


async def test_an_own_login_in_the_pool_is_refreshed_once_on_a_401_and_stays_in_rotation(
    pool_bridge: Any, tmp_path: Path
) -> None:
    from imagebridge.providers.codex.login.store import OwnLogin
    from tests.support.mock_issuer import MockIssuer

    with MockIssuer() as issuer:
        login = OwnLogin.under(tmp_path / "accounts", "work")
        stale = issuer.seed_login(login, refresh_token="rt_SECRET_pool", expires_in_s=3600)
        fresh = "tok-SECRET-pool-after-refresh"
        issuer.next_access_tokens.append(fresh)
        bridge = await pool_bridge(
            *issuer.config_sets(),
            f'accounts.directory="{login.home.parent}"',
            'accounts.pool.work.login="work"',
            'accounts.policy="primary_first"',
            "accounts.pool.work.weight=5",
            names=("alpha",),
        )
        bridge.backend.login(stale).script("http_401")

        response = await bridge.run()

        assert issuer.calls["refresh"] == 1  # refreshed once, the call repeated on "work"
        assert "account_failover_used" not in response.warnings
        assert bridge.backend.calls_by(stale) == 1 and bridge.backend.calls_by(fresh) == 1
        assert calls(bridge.backend)["alpha"] == 0
        [work] = [
            a
            for a in (await bridge.provider().diagnostics())["accounts"]["accounts"]
            if a["name"] == "work"
        ]
        assert (work["login"], work["ready"]) == ("own", True)
