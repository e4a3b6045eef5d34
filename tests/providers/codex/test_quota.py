"""Quota windows from ``wham/usage`` and ``x-codex-*`` headers, with a short cache."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import CodexCredentials, load_codex_credentials_async
from imagebridge.providers.codex.quota import (
    CodexQuotaClient,
    QuotaSnapshot,
    QuotaWindow,
    derive_usage_url,
)
from imagebridge.providers.codex.wire import parse_rate_limit_headers, parse_usage_payload
from tests.support.codex_backend import (
    Behaviour,
    CodexBackend,
    codex_backend_fixture,  # noqa: F401 - registers the `codex_backend` fixture
    write_codex_auth,
)

TOKEN = "tok-SECRET-quota-93c1"
ACCOUNT = "acct-SECRET-quota-12"
NOW = 1_800_000_000.0
IDENTIFYING = ("acct-mock-secret-0001", "user-mock-secret", "mock-user@example.invalid")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


async def credentials() -> CodexCredentials:
    return CodexCredentials(TOKEN, ACCOUNT)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def quota_client(
    http: httpx.AsyncClient, backend: CodexBackend, clock: FakeClock | None = None, **kwargs: Any
) -> CodexQuotaClient:
    return CodexQuotaClient(
        http,
        backend.usage_url,
        kwargs.pop("cache_ms", 30_000),
        kwargs.pop("credentials_loader", credentials),
        monotonic=clock or FakeClock(),
        **kwargs,
    )


def dumped(value: Any) -> str:
    return json.dumps(value.to_dict()) + repr(value)


# -- parsing headers -------------------------------------------------------------------------


def test_rate_limit_headers_become_windows() -> None:
    headers = httpx.Headers(
        {
            "X-Codex-Primary-Used-Percent": "37.5",
            "x-codex-primary-window-minutes": "300",
            "x-codex-primary-reset-at": str(int(NOW) + 60),
            "x-codex-primary-reset-after-seconds": "9999",
            "x-codex-secondary-used-percent": "4",
            "x-codex-secondary-window-minutes": "10080",
            "x-codex-secondary-reset-after-seconds": "120",
            "x-codex-plan-type": "Plus",
            "x-codex-credits-balance": "12.5",
        }
    )
    snapshot = parse_rate_limit_headers(headers, now=NOW)
    assert snapshot == QuotaSnapshot(
        windows=(
            QuotaWindow("primary", 37.5, 300, int(NOW) + 60),
            QuotaWindow("secondary", 4.0, 10080, int(NOW) + 120),
        ),
        plan_type="plus",
        source="headers",
        observed_at=NOW,
    )


def test_no_rate_limit_headers_means_no_snapshot() -> None:
    assert parse_rate_limit_headers({"content-type": "text/event-stream"}) is None
    assert parse_rate_limit_headers({"x-codex-primary-window-minutes": "300"}) is None


@pytest.mark.parametrize("bad", ["nan", "-1", "abc", "inf", "1" * 40, ""])
def test_unusable_header_values_are_ignored(bad: str) -> None:
    headers = {
        "x-codex-primary-used-percent": bad,
        "x-codex-secondary-used-percent": "10",
        "x-codex-secondary-window-minutes": bad,
        "x-codex-secondary-reset-at": bad,
    }
    snapshot = parse_rate_limit_headers(headers, now=NOW)
    assert snapshot is not None
    assert snapshot.windows == (QuotaWindow("secondary", 10.0, None, None),)


def test_percent_is_clamped_and_full_windows_mean_exhausted() -> None:
    snapshot = parse_rate_limit_headers({"x-codex-primary-used-percent": "250"}, now=NOW)
    assert snapshot is not None
    assert snapshot.windows[0].used_percent == 100.0
    assert snapshot.exhausted is True


def test_separate_image_limit_headers_are_their_own_windows() -> None:
    headers = {"x-image-gen-primary-used-percent": "80", "x-codex-primary-used-percent": "5"}
    snapshot = parse_rate_limit_headers(headers, now=NOW)
    assert snapshot is not None
    assert [window.name for window in snapshot.windows] == ["primary", "image_gen.primary"]
    assert snapshot.window("image_gen.primary") == QuotaWindow(
        "image_gen.primary", 80.0, limit="image_gen"
    )
    assert snapshot.image_limit_exhausted is False


def test_windows_are_labelled_by_their_length_not_their_position() -> None:
    """Team plans put the 7-day window first (sub2api #1886)."""
    headers = {
        "x-codex-primary-used-percent": "40",
        "x-codex-primary-window-minutes": "10080",
        "x-codex-secondary-used-percent": "12",
        "x-codex-secondary-window-minutes": "300",
        "x-image-gen-primary-used-percent": "100",
        "x-image-gen-primary-window-minutes": "1440",
        "x-codex-other-primary-used-percent": "1",
        "x-codex-other-primary-window-minutes": "90",
    }
    snapshot = parse_rate_limit_headers(headers, now=NOW)
    assert snapshot is not None
    assert [(w.name, w.limit, w.label) for w in snapshot.windows] == [
        ("secondary", "codex", "5h"),
        ("primary", "codex", "7d"),
        ("codex_other.primary", "codex_other", "90m"),
        ("image_gen.primary", "image_gen", "1d"),
    ]
    assert snapshot.image_limit_exhausted is True
    assert snapshot.to_dict()["windows"][0] == {
        "name": "secondary",
        "limit": "codex",
        "label": "5h",
        "used_percent": 12.0,
        "window_minutes": 300,
        "resets_at": None,
    }


@pytest.mark.parametrize("plan", ["someone@example.com", "plus plan", "x" * 40, "acct 1234"])
def test_plan_type_that_could_identify_someone_is_dropped(plan: str) -> None:
    headers = {"x-codex-primary-used-percent": "1", "x-codex-plan-type": plan}
    snapshot = parse_rate_limit_headers(headers, now=NOW)
    assert snapshot is not None and snapshot.plan_type is None


# -- parsing wham/usage -------------------------------------------------------------------------


USAGE = {
    "account_id": "acct-mock-secret-0001",
    "user_id": "user-mock-secret",
    "email": "mock-user@example.invalid",
    "plan_type": "pro",
    "rate_limit": {
        "allowed": True,
        "limit_reached": False,
        "primary_window": {
            "used_percent": 6,
            "limit_window_seconds": 18_000,
            "reset_at": 1_800_000_100,
        },
        "secondary_window": {
            "used_percent": 24.5,
            "limit_window_seconds": 604_800,
            "reset_after_seconds": 50,
        },
    },
    "additional_rate_limits": [
        {"limit_name": "Image_Gen", "rate_limit": {"primary_window": {"used_percent": 3}}},
        {"limit_name": "bad name!", "rate_limit": {"primary_window": {"used_percent": 3}}},
        "junk",
    ],
    "credits": {"has_credits": True, "balance": 5.39},
}


def test_usage_payload_keeps_only_non_identifying_fields() -> None:
    snapshot = parse_usage_payload(USAGE, now=NOW)
    assert snapshot.windows == (
        QuotaWindow("primary", 6.0, 300, 1_800_000_100),
        QuotaWindow("secondary", 24.5, 10_080, int(NOW) + 50),
        QuotaWindow("image_gen.primary", 3.0, None, None, limit="image_gen"),
    )
    assert (snapshot.plan_type, snapshot.limit_reached, snapshot.source) == (
        "pro",
        False,
        "usage_endpoint",
    )
    assert snapshot.exhausted is False
    for value in IDENTIFYING:
        assert value not in dumped(snapshot)
    assert "5.39" not in dumped(snapshot)


def test_usage_payload_with_limit_reached_is_exhausted() -> None:
    snapshot = parse_usage_payload({"rate_limit": {"limit_reached": True}}, now=NOW)
    assert (snapshot.windows, snapshot.exhausted) == ((), True)


@pytest.mark.parametrize("payload", [[], "text", None, 3])
def test_usage_payload_must_be_an_object(payload: Any) -> None:
    with pytest.raises(BridgeError) as caught:
        parse_usage_payload(payload)
    assert caught.value.code is ErrorCode.PROTOCOL


def test_header_reading_merges_over_a_usage_reading() -> None:
    base = parse_usage_payload(USAGE, now=NOW)
    newer = parse_rate_limit_headers({"x-codex-primary-used-percent": "50"}, now=NOW + 5)
    assert newer is not None
    merged = base.merged_with(newer)
    assert [(w.name, w.used_percent) for w in merged.windows] == [
        ("primary", 50.0),
        ("secondary", 24.5),
        ("image_gen.primary", 3.0),
    ]
    assert (merged.plan_type, merged.limit_reached, merged.observed_at) == ("pro", False, NOW + 5)


def test_usage_url_derivation_is_re_exported() -> None:
    assert derive_usage_url("https://chatgpt.com/backend-api/codex/responses") == (
        "https://chatgpt.com/backend-api/wham/usage"
    )


# -- the client against the mock backend ------------------------------------------------


async def test_get_reads_wham_usage_with_the_login(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    snapshot = await quota_client(http, codex_backend).get()
    assert [(w.name, w.used_percent, w.window_minutes) for w in snapshot.windows] == [
        ("primary", 12.0, 300),
        ("secondary", 40.0, 10_080),
    ]
    assert snapshot.plan_type == "plus"
    (request,) = codex_backend.requests
    assert (request.method, request.route, request.body) == ("GET", "usage", None)
    assert request.sent_token(TOKEN) and request.sent_account_id(ACCOUNT)
    assert request.headers["originator"] == "imagegen-bridge"
    for value in IDENTIFYING:
        assert value not in dumped(snapshot)


async def test_readings_are_cached_for_cache_ms(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    clock = FakeClock()
    client = quota_client(http, codex_backend, clock, cache_ms=1_000)
    first = await client.get()
    clock.now += 0.9
    assert await client.get() is first
    assert codex_backend.calls("usage") == 1
    clock.now += 0.2
    await client.get()
    assert codex_backend.calls("usage") == 2
    await client.get(force=True)
    assert codex_backend.calls("usage") == 3


async def test_zero_cache_asks_every_time(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    client = quota_client(http, codex_backend, cache_ms=0)
    await client.get()
    await client.get()
    assert codex_backend.calls("usage") == 2


async def test_concurrent_gets_share_one_request(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    codex_backend.script(Behaviour.slow_ok(0.1), route="usage")
    client = quota_client(http, codex_backend)
    results = await asyncio.gather(*(client.get() for _ in range(5)))
    assert codex_backend.calls("usage") == 1
    assert all(result is results[0] for result in results)


async def test_headers_of_a_generation_refresh_the_reading(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    client = quota_client(http, codex_backend)
    await client.get()
    codex_backend.quota.primary_used_percent = 77.0
    response = await http.post(codex_backend.responses_url, json={})
    snapshot = client.update_from_headers(response.headers)
    assert snapshot is not None
    assert snapshot.window("primary") == QuotaWindow(
        "primary", 77.0, 300, int(response.headers["x-codex-primary-reset-at"])
    )
    assert snapshot.source == "headers"
    assert await client.get() is snapshot
    assert codex_backend.calls("usage") == 1


async def test_headers_alone_can_answer_get(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    client = quota_client(http, codex_backend)
    assert client.update_from_headers({"content-type": "text/plain"}) is None
    assert client.update_from_headers({"x-codex-primary-used-percent": "9"}) is not None
    assert (await client.get()).window("primary") == QuotaWindow("primary", 9.0)
    assert codex_backend.calls("usage") == 0


def test_update_from_headers_never_raises() -> None:
    async def never() -> CodexCredentials:  # pragma: no cover - not called
        raise AssertionError

    client = CodexQuotaClient(
        httpx.AsyncClient(), "https://chatgpt.com/backend-api/wham/usage", 1, never
    )
    assert client.update_from_headers({"x-codex-primary-used-percent": "\x00"}) is None
    assert client.update_from_headers({"x-codex-primary-reset-at": "1e400"}) is None


@pytest.mark.parametrize(
    ("kind", "native"),
    [
        ("http_401", ErrorCode.AUTHENTICATION),
        ("http_403", ErrorCode.PERMISSION_DENIED),
        ("http_429", ErrorCode.RATE_LIMITED),
        ("http_500", ErrorCode.UPSTREAM),
        ("http_502", ErrorCode.UPSTREAM),
        ("malformed_json", ErrorCode.PROTOCOL),
        ("disconnect_before_first_byte", ErrorCode.UPSTREAM),
        ("stall", ErrorCode.TIMEOUT),
    ],
)
async def test_failures_are_bridge_errors_and_unavailable_status(
    codex_backend: CodexBackend, http: httpx.AsyncClient, kind: str, native: ErrorCode
) -> None:
    codex_backend.set_default(kind, route="usage")
    client = quota_client(http, codex_backend, timeout_s=0.3)
    with pytest.raises(BridgeError) as caught:
        await client.get()
    codex_backend.release()
    assert caught.value.code is native
    assert caught.value.details["route"] == "wham/usage"
    status = await client.status(force=True)
    codex_backend.release()
    assert status.state == "unavailable"
    assert status.to_dict()["status"] == "unavailable"
    assert status.error_code == native.value
    for secret in (TOKEN, ACCOUNT):
        assert secret not in json.dumps(status.to_dict())
        assert secret not in repr(caught.value) + json.dumps(caught.value.to_dict())


async def test_failure_is_remembered_briefly(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    clock = FakeClock()
    codex_backend.script("http_500", route="usage")
    client = quota_client(http, codex_backend, clock, error_cache_ms=5_000)
    for _ in range(3):
        with pytest.raises(BridgeError):
            await client.get()
    assert codex_backend.calls("usage") == 1
    clock.now += 5.1
    assert (await client.get()).windows
    assert codex_backend.calls("usage") == 2


async def test_status_keeps_the_last_good_reading_when_unavailable(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    client = quota_client(http, codex_backend, cache_ms=0)
    good = await client.status()
    assert good.state == "available" and good.snapshot is not None
    codex_backend.script("http_503", route="usage")
    bad = await client.status()
    assert (bad.state, bad.snapshot, bad.error_code) == ("unavailable", good.snapshot, "upstream")
    assert bad.to_dict()["quota"]["windows"][0]["name"] == "primary"


async def test_missing_login_is_an_authentication_error_without_a_call(
    codex_backend: CodexBackend, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    loader = partial(load_codex_credentials_async, tmp_path)
    client = quota_client(http, codex_backend, credentials_loader=loader)
    status = await client.status()
    assert (status.state, status.error_code) == ("unavailable", "authentication")
    assert codex_backend.calls("usage") == 0
    write_codex_auth(tmp_path, access_token=TOKEN, account_id=ACCOUNT)
    assert (await client.get(force=True)).windows
    assert codex_backend.requests[0].sent_token(TOKEN)


async def test_for_endpoint_derives_the_usage_url(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    client = CodexQuotaClient.for_endpoint(
        http, codex_backend.responses_url, credentials_loader=credentials
    )
    assert client.usage_url == codex_backend.usage_url
    assert (await client.get()).plan_type == "plus"
    override = CodexQuotaClient.for_endpoint(
        http, "https://chatgpt.com/backend-api/codex/responses", usage_url=codex_backend.usage_url
    )
    assert override.usage_url == codex_backend.usage_url


def test_usage_url_must_be_safe_for_a_token() -> None:
    with pytest.raises(BridgeError) as caught:
        CodexQuotaClient(httpx.AsyncClient(), "http://example.com/backend-api/wham/usage")
    assert caught.value.code is ErrorCode.CONFIGURATION


async def test_oversized_usage_body_is_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"plan_type": "plus", "pad": "x" * 4_096})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        quota = CodexQuotaClient(
            client,
            "https://chatgpt.com/backend-api/wham/usage",
            0,
            credentials,
            max_body_bytes=1_024,
        )
        with pytest.raises(BridgeError) as caught:
            await quota.get()
    assert caught.value.code is ErrorCode.PROTOCOL


async def test_redirects_are_not_followed() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(302, headers={"Location": "https://evil.example/steal"})

    async with httpx.AsyncClient(
        transport=httpx.MockTransport(handler), follow_redirects=True
    ) as client:
        quota = CodexQuotaClient(
            client, "https://chatgpt.com/backend-api/wham/usage", 0, credentials
        )
        with pytest.raises(BridgeError) as caught:
            await quota.get()
    assert seen == ["https://chatgpt.com/backend-api/wham/usage"]
    assert caught.value.details["http_status"] == 302
