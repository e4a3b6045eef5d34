"""In-memory idempotency, and the behaviours the original's idempotency.rs tests check."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import tomllib

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.request import GenerationParameters, ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.idempotency import (
    IdempotencyConfig,
    IdempotencyCoordinator,
    IdempotencyLease,
    request_fingerprint,
)
from tests.support.fixture_files import ORIGINAL_CONFIG


def response(response_id: str, padding: str = "") -> ImageResponse:
    params = GenerationParameters()
    return ImageResponse(
        id=response_id,
        created=1,
        provider="p",
        model="m",
        requested=params,
        effective=params,
        revised_prompt=padding or None,
    )


async def begin(
    coordinator: IdempotencyCoordinator, key: str, fingerprint: str
) -> IdempotencyLease | ImageResponse:
    return await coordinator.begin("scope", key, fingerprint, Deadline.after(5), CancelToken())


async def test_replays_completed_response_and_rejects_conflicts() -> None:
    coordinator = IdempotencyCoordinator(IdempotencyConfig())
    lease = await begin(coordinator, "k", "f1")
    assert isinstance(lease, IdempotencyLease)
    coordinator.complete(lease, response("original"))
    replay = await begin(coordinator, "k", "f1")
    assert isinstance(replay, ImageResponse) and replay.id == "original"
    with pytest.raises(BridgeError) as caught:
        await begin(coordinator, "k", "f2")
    assert caught.value.code is ErrorCode.IDEMPOTENCY_CONFLICT


async def test_followers_receive_the_leader_result() -> None:
    coordinator = IdempotencyCoordinator(IdempotencyConfig())
    lease = await begin(coordinator, "k", "f")
    assert isinstance(lease, IdempotencyLease)
    follower = asyncio.ensure_future(begin(coordinator, "k", "f"))
    await asyncio.sleep(0)
    coordinator.complete(lease, response("leader"))
    result = await follower
    assert isinstance(result, ImageResponse) and result.id == "leader"


async def test_unknown_outcome_is_retained_and_cannot_elect_a_second_leader() -> None:
    coordinator = IdempotencyCoordinator(IdempotencyConfig())
    lease = await begin(coordinator, "k", "f")
    assert isinstance(lease, IdempotencyLease)
    coordinator.fail(
        lease, BridgeError(ErrorCode.TIMEOUT, "deadline", retryable=True).mark_unknown_outcome()
    )
    with pytest.raises(BridgeError) as caught:
        await begin(coordinator, "k", "f")
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.retryable is False and caught.value.details["outcome"] == "unknown"
    with pytest.raises(BridgeError) as conflict:
        await begin(coordinator, "k", "other")
    assert conflict.value.code is ErrorCode.IDEMPOTENCY_CONFLICT


async def test_completed_response_bytes_are_bounded_and_oversize_keeps_a_tombstone() -> None:
    one = len(response("a").model_dump_json()) + 256
    coordinator = IdempotencyCoordinator(IdempotencyConfig(max_completed_bytes=one + 10))
    first = await begin(coordinator, "a", "f")
    assert isinstance(first, IdempotencyLease)
    coordinator.complete(first, response("a"))
    second = await begin(coordinator, "b", "f")
    assert isinstance(second, IdempotencyLease)
    coordinator.complete(second, response("b"))
    assert coordinator.completed_bytes <= one + 10
    assert len(coordinator) == 1  # the first was evicted
    third = await begin(coordinator, "c", "f")
    assert isinstance(third, IdempotencyLease)
    coordinator.complete(third, response("c", padding="x" * 10_000))
    with pytest.raises(BridgeError) as caught:
        await begin(coordinator, "c", "f")
    assert caught.value.details["outcome"] == "completed_unreplayable"
    assert caught.value.retryable is False


async def test_known_failures_are_forgotten_so_a_retry_re_executes() -> None:
    coordinator = IdempotencyCoordinator(IdempotencyConfig())
    lease = await begin(coordinator, "k", "f")
    assert isinstance(lease, IdempotencyLease)
    coordinator.fail(lease, BridgeError(ErrorCode.UPSTREAM, "known", retryable=True))
    again = await begin(coordinator, "k", "f")
    assert isinstance(again, IdempotencyLease)


async def test_capacity_is_bounded_and_ttls_expire() -> None:
    now = [0.0]
    coordinator = IdempotencyCoordinator(
        IdempotencyConfig(max_entries=1, completed_ttl_secs=10, in_flight_ttl_secs=5),
        clock=lambda: now[0],
    )
    lease = await begin(coordinator, "a", "f")
    assert isinstance(lease, IdempotencyLease)
    with pytest.raises(BridgeError) as caught:
        await begin(coordinator, "b", "f")
    assert caught.value.code is ErrorCode.OVERLOADED and caught.value.retryable
    now[0] = 6.0  # the pending leader expired
    assert isinstance(await begin(coordinator, "b", "f"), IdempotencyLease)


async def test_follower_deadline_and_cancellation() -> None:
    coordinator = IdempotencyCoordinator(IdempotencyConfig())
    lease = await begin(coordinator, "k", "f")
    assert isinstance(lease, IdempotencyLease)
    with pytest.raises(BridgeError) as caught:
        await coordinator.begin("scope", "k", "f", Deadline.after(0.01), CancelToken())
    assert caught.value.code is ErrorCode.TIMEOUT
    token = CancelToken()
    token.cancel()
    with pytest.raises(BridgeError) as cancelled:
        await coordinator.begin("scope", "k", "f", Deadline.after(5), token)
    assert cancelled.value.code is ErrorCode.CANCELLED


async def test_scopes_are_independent_and_keys_are_not_retained() -> None:
    coordinator = IdempotencyCoordinator(IdempotencyConfig())
    secret = "customer-key-123"
    a = await coordinator.begin("scope-a", secret, "f", Deadline.after(5), CancelToken())
    b = await coordinator.begin("scope-b", secret, "other", Deadline.after(5), CancelToken())
    assert isinstance(a, IdempotencyLease) and isinstance(b, IdempotencyLease)
    assert secret not in repr(coordinator.__dict__)


def test_fingerprint_is_canonical() -> None:
    first = ImageRequest.model_validate(
        {"prompt": "x", "operation": "generate", "timeout_ms": 10, "idempotency_key": "a"}
    )
    second = ImageRequest.model_validate(
        {"operation": "generate", "prompt": "x", "parameters": {"n": 1, "size": "auto"}}
    )
    assert request_fingerprint(first) == request_fingerprint(second)
    third = ImageRequest.model_validate(
        {"operation": "generate", "prompt": "x", "parameters": {"aspect_ratio": "1920:1080"}}
    )
    fourth = ImageRequest.model_validate(
        {"operation": "generate", "prompt": "x", "parameters": {"aspect_ratio": "16:9"}}
    )
    assert request_fingerprint(third) == request_fingerprint(fourth)
    assert len(request_fingerprint(first)) == 64
    assert time.time() > 0


async def test_each_kind_of_entry_lives_for_its_own_ttl() -> None:
    now = [0.0]
    coordinator = IdempotencyCoordinator(
        IdempotencyConfig(completed_ttl_secs=10, unknown_ttl_secs=20, in_flight_ttl_secs=5),
        clock=lambda: now[0],
    )
    done = await begin(coordinator, "done", "f")
    unknown = await begin(coordinator, "unknown", "f")
    assert isinstance(done, IdempotencyLease) and isinstance(unknown, IdempotencyLease)
    coordinator.complete(done, response("first"))
    coordinator.fail(unknown, BridgeError(ErrorCode.UPSTREAM, "?").mark_unknown_outcome())
    now[0] = 9.0
    replay = await begin(coordinator, "done", "f")
    assert isinstance(replay, ImageResponse) and replay.id == "first"
    now[0] = 10.0  # the completed response expired: the key runs again
    assert isinstance(await begin(coordinator, "done", "f"), IdempotencyLease)
    with pytest.raises(BridgeError) as still:
        await begin(coordinator, "unknown", "f")
    assert still.value.details["outcome"] == "unknown"
    now[0] = 20.0  # the tombstone expired too
    assert isinstance(await begin(coordinator, "unknown", "f"), IdempotencyLease)


async def test_waiters_of_an_expired_leader_get_a_retryable_timeout() -> None:
    now = [0.0]
    coordinator = IdempotencyCoordinator(
        IdempotencyConfig(in_flight_ttl_secs=5), clock=lambda: now[0]
    )
    assert isinstance(await begin(coordinator, "k", "f"), IdempotencyLease)
    follower = asyncio.ensure_future(begin(coordinator, "k", "f"))
    await asyncio.sleep(0)
    now[0] = 5.0
    assert isinstance(await begin(coordinator, "other", "f"), IdempotencyLease)  # cleans up
    with pytest.raises(BridgeError) as caught:
        await follower
    assert caught.value.code is ErrorCode.TIMEOUT and caught.value.retryable
    assert caught.value.message == "idempotent operation expired"


async def test_entry_capacity_evicts_the_least_recently_used_completed_response() -> None:
    coordinator = IdempotencyCoordinator(IdempotencyConfig(max_entries=2))
    for key in ("a", "b"):
        lease = await begin(coordinator, key, "f")
        assert isinstance(lease, IdempotencyLease)
        coordinator.complete(lease, response(key))
    assert isinstance(await begin(coordinator, "a", "f"), ImageResponse)  # a is now fresher
    assert isinstance(await begin(coordinator, "c", "f"), IdempotencyLease)
    assert len(coordinator) == 2
    kept = await begin(coordinator, "a", "f")
    assert isinstance(kept, ImageResponse) and kept.id == "a"
    assert isinstance(await begin(coordinator, "b", "f"), IdempotencyLease)  # b was evicted


@pytest.mark.parametrize("scope", ["", "x" * 257, "tab\there"])
async def test_an_invalid_scope_is_refused(scope: str) -> None:
    coordinator = IdempotencyCoordinator(IdempotencyConfig())
    with pytest.raises(BridgeError) as caught:
        await coordinator.begin(scope, "k", "f", Deadline.after(5), CancelToken())
    assert caught.value.code is ErrorCode.INVALID_REQUEST


def test_default_limits_are_the_original_configs_values() -> None:
    configured = tomllib.loads(ORIGINAL_CONFIG.read_text())["runtime"]["idempotency"]
    assert dataclasses.asdict(IdempotencyConfig()) == configured
