"""The account pool on the app-server transport: one codex child per account, sessions at home.

Each account is a codex home; the fake codex keeps its threads in its home (as codex does)
and logs which home every message reached, so a test sees which child ran each turn.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from tests.support.codex_backend import write_codex_auth

from .bridge import BridgeHarness, image_request

NAMES = ("alpha", "beta")


def pool_sets(bridge: BridgeHarness, *names: str) -> list[str]:
    sets: list[str] = []
    for name in names or NAMES:
        home = bridge.tmp_path / f"home-{name}"
        write_codex_auth(home, access_token=f"tok-{name}-SECRET", account_id=f"acct-{name}")
        sets.append(f'accounts.pool.{name}.codex_home="{home}"')
    return sets


def turns_by_home(bridge: BridgeHarness) -> Counter[str]:
    return Counter(
        entry["home"]
        for entry in bridge.log()
        if entry.get("received", {}).get("method") == "turn/start"
    )


def persistent(key: str) -> dict[str, Any]:
    return {"session": {"mode": "persistent", "key": key}}


async def test_each_account_runs_its_own_child_and_a_fan_out_spreads(
    bridge: BridgeHarness,
) -> None:
    app = bridge.app(*pool_sets(bridge))
    response = await app.runtime.execute(image_request(parameters={"n": 4}))
    assert len(response.data) == 4
    await bridge.settle(app)
    assert turns_by_home(bridge) == {"home-alpha": 2, "home-beta": 2}
    clients = bridge.provider(app).clients
    assert len(clients) == 2
    assert {client.codex_home for client in clients} == {
        bridge.tmp_path / "home-alpha",
        bridge.tmp_path / "home-beta",
    }


async def test_a_persistent_session_stays_on_its_account(bridge: BridgeHarness) -> None:
    app = bridge.app(*pool_sets(bridge))
    first = await app.runtime.execute(image_request(**persistent("poster")))
    for _ in range(3):
        again = await app.runtime.execute(image_request(**persistent("poster")))
        assert again.session is not None and again.session.reused
        assert first.session is not None and again.session.thread_id == first.session.thread_id
    await bridge.settle(app)
    [(home, count)] = turns_by_home(bridge).items()  # every turn on one account
    assert count == 4

    provider = bridge.provider(app)
    session = await provider.get_session("poster")
    # the binding's account prefix stays inside the bridge
    assert first.session is not None and session.thread_id == first.session.thread_id
    owner = home.removeprefix("home-")
    other = next(name for name in NAMES if name != owner)

    # The session's account runs out of quota: its call fails, it never moves.
    account = provider.pool.account(owner)
    assert account is not None
    account.exhausted_until = time.time() + 600
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request(**persistent("poster")))
    assert caught.value.code is ErrorCode.RATE_LIMITED
    assert caught.value.details["account"] == owner
    assert 590_000 <= caught.value.details["retry_after_ms"] <= 600_000

    # An isolated call goes to the other account meanwhile.
    await app.runtime.execute(image_request())
    await bridge.settle(app)
    assert turns_by_home(bridge) == {home: 4, f"home-{other}": 1}


async def test_a_session_bound_to_an_account_no_longer_configured_fails_clearly(
    bridge: BridgeHarness,
) -> None:
    first_app = bridge.app(*pool_sets(bridge))
    created = await first_app.runtime.execute(image_request(**persistent("poster")))
    await bridge.settle(first_app)
    [home] = turns_by_home(bridge)
    owner = home.removeprefix("home-")
    await first_app.aclose()

    other = next(name for name in NAMES if name != owner)
    second_app = bridge.app(*pool_sets(bridge, other))
    with pytest.raises(BridgeError) as caught:
        await second_app.runtime.execute(image_request(**persistent("poster")))
    assert caught.value.code is ErrorCode.SESSION
    assert caught.value.details["account"] == owner
    assert created.session is not None
    assert turns_by_home(bridge) == {home: 1}  # nothing ran on the other account


async def test_an_explicit_thread_runs_on_the_account_that_has_it(bridge: BridgeHarness) -> None:
    first_app = bridge.app(*pool_sets(bridge))
    created = await first_app.runtime.execute(image_request(**persistent("poster")))
    assert created.session is not None
    thread_id = created.session.thread_id
    await bridge.settle(first_app)
    [home] = turns_by_home(bridge)

    second_app = bridge.app(*pool_sets(bridge))  # a restart: no memory of the thread
    body: dict[str, Any] = {"session": {"mode": "thread", "thread_id": thread_id}}
    response = await second_app.runtime.execute(image_request(**body))
    assert response.session is not None and response.session.thread_id == thread_id
    await bridge.settle(second_app)
    assert turns_by_home(bridge) == {home: 2}


async def test_own_logins_are_not_given_to_a_codex_child(bridge: BridgeHarness) -> None:
    sets = [*pool_sets(bridge, "beta"), "accounts.pool.mine.weight=9"]  # mine: an own login
    app = bridge.app(*sets)
    response = await app.runtime.execute(image_request(parameters={"n": 2}))
    assert len(response.data) == 2
    await bridge.settle(app)
    assert turns_by_home(bridge) == {"home-beta": 2}
    detail = await bridge.provider(app).diagnostics()
    mine = next(a for a in detail["accounts"]["accounts"] if a["name"] == "mine")
    assert (mine["ready"], mine["reason"]) == (False, "own_login_not_for_app_server")


async def test_an_isolated_call_refused_for_quota_moves_to_the_next_account(
    bridge: BridgeHarness,
) -> None:
    bridge.scenario(by_home={"home-alpha": {"turns": [{"mode": "usage_limit"}]}})
    app = bridge.app(*pool_sets(bridge), 'accounts.policy="primary_first"')
    response = await app.runtime.execute(image_request())
    assert "account_failover_used" in response.warnings
    [switch] = [n for n in response.normalizations if n.field == "routing.account"]
    assert (switch.requested, switch.effective) == ("alpha", "beta")
    await bridge.settle(app)
    assert turns_by_home(bridge) == {"home-alpha": 1, "home-beta": 1}

    await app.runtime.execute(image_request())  # alpha waits for its reset
    await bridge.settle(app)
    assert turns_by_home(bridge) == {"home-alpha": 1, "home-beta": 2}


async def test_a_session_call_refused_for_quota_is_not_moved(bridge: BridgeHarness) -> None:
    bridge.scenario(by_home={"home-alpha": {"turns": [{"mode": "usage_limit"}]}})
    app = bridge.app(*pool_sets(bridge), 'accounts.policy="primary_first"')
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request(**persistent("poster")))
    assert caught.value.code is ErrorCode.RATE_LIMITED
    assert caught.value.details["account"] == "alpha"
    await bridge.settle(app)
    assert turns_by_home(bridge) == {"home-alpha": 1}


async def test_a_deadline_on_an_account_names_it(bridge: BridgeHarness) -> None:
    bridge.scenario(by_home={"home-alpha": {"turns": [{"mode": "hang"}]}})
    app = bridge.app(*pool_sets(bridge), 'accounts.policy="primary_first"')
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request(timeout_ms=700))
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.outcome_unknown
    assert caught.value.details["account"] == "alpha"
    await bridge.settle(app)
    assert turns_by_home(bridge) == {"home-alpha": 1}  # an unknown outcome never moves
