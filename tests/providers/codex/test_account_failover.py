"""One call on the account pool: it moves to the next account only after a refusal at the
door, and an error that ends it says where it failed and who refused before."""

from __future__ import annotations

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.cancellation import Deadline
from imagebridge.engine.provider import ProviderContext
from imagebridge.providers.codex.account_failover import CallTally, serve_on_accounts
from imagebridge.providers.codex.auth import load_codex_credentials_async
from imagebridge.providers.codex.guarded_call import CallResult, CallState
from imagebridge.providers.codex.pool import AccountLease, AccountPool, AccountSpec
from tests.support.fakes import image_item
from tests.support.images import png_bytes

PROVIDER = "codex-responses"
RESULT = CallResult(image=image_item(0, png_bytes()), revised_prompt=None, usage=None)


def pool(*names: str) -> AccountPool:
    return AccountPool([AccountSpec(name, load_codex_credentials_async) for name in names])


def context() -> ProviderContext:
    return ProviderContext(request_id="req_1", deadline=Deadline.after(5.0))


def quota_refusal() -> BridgeError:
    return BridgeError(
        ErrorCode.RATE_LIMITED,
        "usage limit reached",
        retryable=True,
        details={"http_status": 429, "quota_exhausted": True, "retry_after_ms": 600_000},
    )


class Script:
    """Answers each account's call with the error scripted for it, else the result."""

    def __init__(self, errors: dict[str, BridgeError], *, answered: bool = False) -> None:
        self.errors = errors
        self.answered = answered
        self.accounts: list[str] = []

    async def __call__(
        self, lease: AccountLease, states: list[CallState], tally: CallTally
    ) -> CallResult:
        self.accounts.append(lease.name)
        states.append(CallState(dispatched=True, answered=self.answered, account=lease.account))
        tally.calls += 1
        error = self.errors.get(lease.name)
        if error is not None:
            raise error
        return RESULT


async def test_a_refusal_at_the_door_moves_the_call_to_the_next_account() -> None:
    accounts = pool("alpha", "beta")
    run = Script({"alpha": quota_refusal()})
    served = await serve_on_accounts(accounts, PROVIDER, context(), run)
    assert run.accounts == ["alpha", "beta"]
    assert (served.account, served.calls, served.result) == ("beta", 2, RESULT)
    assert [(entry.account, entry.reason) for entry in served.tried] == [("alpha", "quota")]


async def test_an_unknown_outcome_stays_on_its_account_and_names_it() -> None:
    accounts = pool("alpha", "beta")
    unknown = BridgeError(ErrorCode.TIMEOUT, "deadline").mark_unknown_outcome()
    run = Script({"alpha": unknown})
    with pytest.raises(BridgeError) as caught:
        await serve_on_accounts(accounts, PROVIDER, context(), run)
    assert run.accounts == ["alpha"]  # never sent again elsewhere: it may have been billed
    assert caught.value.details["account"] == "alpha"
    assert "accounts_tried" not in caught.value.details


async def test_a_failure_after_a_refusal_lists_the_accounts_that_refused() -> None:
    accounts = pool("alpha", "beta")
    server_error = BridgeError(ErrorCode.UPSTREAM, "bad gateway", retryable=True)
    run = Script({"alpha": quota_refusal(), "beta": server_error})
    with pytest.raises(BridgeError) as caught:
        await serve_on_accounts(accounts, PROVIDER, context(), run)
    assert caught.value.details["account"] == "beta"
    assert caught.value.details["accounts_tried"] == [
        {"account": "alpha", "error_code": "rate_limited", "reason": "quota"}
    ]


async def test_when_every_account_refused_the_error_counts_the_calls_made() -> None:
    accounts = pool("alpha", "beta")
    run = Script({"alpha": quota_refusal(), "beta": quota_refusal()})
    with pytest.raises(BridgeError) as caught:
        await serve_on_accounts(accounts, PROVIDER, context(), run)
    assert run.accounts == ["alpha", "beta"]
    assert caught.value.details["provider_attempts"] == 2
    assert [entry["account"] for entry in caught.value.details["accounts_tried"]] == [
        "alpha",
        "beta",
    ]


async def test_without_a_pool_a_refusal_is_the_callers_answer_and_names_no_account() -> None:
    single = AccountPool.single(AccountSpec("default", load_codex_credentials_async))
    run = Script({"default": quota_refusal()})
    with pytest.raises(BridgeError) as caught:
        await serve_on_accounts(single, PROVIDER, context(), run)
    assert run.accounts == ["default"]
    assert caught.value.details["quota_exhausted"] is True
    assert "account" not in caught.value.details
