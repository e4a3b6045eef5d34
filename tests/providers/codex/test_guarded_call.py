"""One upstream call, guarded: how far it got decides how its failure is reported.

A call interrupted once it may have reached the backend has an unknown outcome (never retried
or rerouted); one interrupted before it was sent may be retried. Only a 401 on an own login
before any answer is refreshed and repeated. The POST records what the answer said before any
body is read: its request id and its rate-limit headers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.provider import ProviderContext
from imagebridge.providers.codex.auth import CodexCredentials, load_codex_credentials_async
from imagebridge.providers.codex.guarded_call import (
    CallResult,
    CallState,
    guard,
    post,
    refreshable,
    settle,
)
from imagebridge.providers.codex.inputs import CodexInputs
from imagebridge.providers.codex.pool import AccountPool, AccountSpec, PoolAccount

CREDENTIALS = CodexCredentials(access_token="tok-secret-123", account_id="acct-secret-456")
URL = "https://chatgpt.example/backend-api/codex/responses"


def context(seconds: float = 5.0, cancellation: CancelToken | None = None) -> ProviderContext:
    return ProviderContext(
        request_id="req_1",
        deadline=Deadline.after(seconds),
        cancellation=cancellation or CancelToken(),
    )


async def never_answers() -> CallResult:
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


# -- the guard -------------------------------------------------------------------------------


async def test_a_deadline_after_the_call_was_sent_leaves_its_outcome_unknown() -> None:
    state = CallState(dispatched=True)
    with pytest.raises(BridgeError) as caught:
        await guard(never_answers(), state, context(0.05))
    error = caught.value
    assert error.code is ErrorCode.TIMEOUT
    assert error.outcome_unknown
    assert not error.retryable  # the image may exist and be billed


async def test_a_deadline_before_the_call_was_sent_may_be_retried() -> None:
    with pytest.raises(BridgeError) as caught:
        await guard(never_answers(), CallState(), context(0.05))
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.retryable
    assert not caught.value.outcome_unknown


async def test_a_cancellation_during_a_sent_call_is_cancelled_with_an_unknown_outcome() -> None:
    token = CancelToken()
    asyncio.get_running_loop().call_later(0.05, token.cancel)
    with pytest.raises(BridgeError) as caught:
        await guard(never_answers(), CallState(dispatched=True), context(cancellation=token))
    assert caught.value.code is ErrorCode.CANCELLED
    assert caught.value.outcome_unknown


async def test_an_unexpected_failure_of_the_call_is_internal_with_an_unknown_outcome() -> None:
    async def broken() -> CallResult:
        raise KeyError("a bug in the answer's parsing")

    with pytest.raises(BridgeError) as caught:
        await guard(broken(), CallState(dispatched=True), context())
    assert caught.value.code is ErrorCode.INTERNAL
    assert caught.value.outcome_unknown
    assert "a bug" not in caught.value.message


async def test_a_bridge_error_of_the_call_is_passed_on_unchanged() -> None:
    refused = BridgeError(ErrorCode.RATE_LIMITED, "slow down", retryable=True)

    async def refusing() -> CallResult:
        raise refused

    with pytest.raises(BridgeError) as caught:
        await guard(refusing(), CallState(dispatched=True), context())
    assert caught.value is refused
    assert not refused.outcome_unknown


# -- settling a failure ----------------------------------------------------------------------


def request(**parameters: Any) -> ImageRequest:
    return ImageRequest.model_validate(
        {"operation": "generate", "prompt": "a fox", "parameters": parameters}
    )


def test_an_unreadable_answer_after_the_backend_accepted_the_work_has_an_unknown_outcome() -> None:
    error = BridgeError(ErrorCode.PROTOCOL, "the stream ended early")
    state = CallState(dispatched=True, answered=True, request_id="upstream-1")
    settled = settle(error, state, request(), CodexInputs(), provider="codex-responses")
    assert settled.outcome_unknown
    assert settled.upstream_request_id == "upstream-1"
    assert settled.provider == "codex-responses"


def test_a_refusal_before_any_answer_keeps_its_known_outcome() -> None:
    error = BridgeError(ErrorCode.PROTOCOL, "a 400 the bridge could not read")
    settled = settle(error, CallState(dispatched=True), request(), CodexInputs(), provider="p")
    assert not settled.outcome_unknown


def test_a_safety_refusal_says_which_moderation_was_asked_and_whether_images_went_along() -> None:
    error = BridgeError(ErrorCode.SAFETY_REJECTED, "refused")
    inputs = CodexInputs(sources=(("image/png", b"\x89PNG"),))
    settled = settle(error, CallState(), request(moderation="low"), inputs, provider="p")
    assert settled.details["requested_moderation"] == "low"
    assert settled.details["input_images_present"] is True


# -- which 401 is refreshed ------------------------------------------------------------------


class OwnLogin:
    """A loader of a login the bridge owns (it can refresh)."""

    async def __call__(self) -> CodexCredentials:
        return CREDENTIALS

    async def refresh_rejected(self, rejected: CodexCredentials) -> CodexCredentials:
        return CREDENTIALS


def account(loader: Any) -> PoolAccount:
    return AccountPool.single(AccountSpec("default", loader)).default


def unauthorized() -> BridgeError:
    return BridgeError(ErrorCode.AUTHENTICATION, "refused", details={"http_status": 401})


def test_only_a_401_on_an_own_login_before_any_answer_is_refreshed() -> None:
    own = CallState(dispatched=True, credentials=CREDENTIALS, account=account(OwnLogin()))
    assert refreshable(unauthorized(), own)

    borrowed = CallState(
        dispatched=True, credentials=CREDENTIALS, account=account(load_codex_credentials_async)
    )
    assert not refreshable(unauthorized(), borrowed)  # codex owns a borrowed login

    answered = CallState(
        dispatched=True, answered=True, credentials=CREDENTIALS, account=account(OwnLogin())
    )
    assert not refreshable(unauthorized(), answered)

    forbidden = BridgeError(ErrorCode.PERMISSION_DENIED, "no", details={"http_status": 403})
    assert not refreshable(forbidden, own)


# -- the POST --------------------------------------------------------------------------------


@pytest.fixture
def learned() -> list[httpx.Headers]:
    return []


def client(status: int, body: bytes, headers: dict[str, str]) -> httpx.AsyncClient:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer tok-secret-123"
        return httpx.Response(status, content=body, headers=headers)

    return httpx.AsyncClient(transport=httpx.MockTransport(answer))


async def test_a_refused_post_is_classified_after_its_headers_were_read(
    learned: list[httpx.Headers],
) -> None:
    headers = {"x-oai-request-id": "upstream-42", "x-codex-primary-used-percent": "99"}
    body = b'{"error": {"code": "rate_limit_exceeded", "message": "tok-secret-123 slow down"}}'
    state = CallState()
    async with client(429, body, headers) as http:
        with pytest.raises(BridgeError) as caught:
            async with post(
                http,
                URL,
                {"authorization": "Bearer tok-secret-123"},
                b"{}",
                CREDENTIALS,
                state,
                context(),
                learn=learned.append,
                max_error_body_bytes=1024,
            ):
                raise AssertionError("a refused answer is never yielded")
    error = caught.value
    assert error.code is ErrorCode.RATE_LIMITED
    assert "tok-secret-123" not in str(error.to_dict())
    assert (state.dispatched, state.answered, state.request_id) == (True, False, "upstream-42")
    assert [h["x-codex-primary-used-percent"] for h in learned] == ["99"]


async def test_an_accepted_post_yields_its_answer(learned: list[httpx.Headers]) -> None:
    state = CallState()
    async with (
        client(200, b"data: {}\n\n", {"x-request-id": "upstream-7"}) as http,
        post(
            http,
            URL,
            {"authorization": "Bearer tok-secret-123"},
            b"{}",
            CREDENTIALS,
            state,
            context(),
            learn=learned.append,
            max_error_body_bytes=1024,
        ) as response,
    ):
        assert state.answered
        assert await response.aread() == b"data: {}\n\n"
    assert state.request_id == "upstream-7"
    assert len(learned) == 1
