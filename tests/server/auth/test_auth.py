"""The browser-origin guard and the exact bearer comparison."""

from __future__ import annotations

import hashlib

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.server.auth import ANONYMOUS_SCOPE, AccessPolicy, check_browser_origin

HOST = (b"host", b"127.0.0.1:8787")


def headers(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
    return [HOST, *((k.encode(), v.encode()) for k, v in pairs)]


@pytest.mark.parametrize(
    "pairs",
    [
        (),
        (("sec-fetch-site", "same-origin"),),
        (("sec-fetch-site", "none"),),
        (("origin", "http://127.0.0.1:8787"),),
        (("origin", "HTTP://127.0.0.1:8787/"),),
        (("origin", "https://127.0.0.1:8787"), ("sec-fetch-site", "same-origin")),
    ],
)
def test_same_origin_and_non_browser_requests_pass(pairs: tuple[tuple[str, str], ...]) -> None:
    check_browser_origin(headers(*pairs))


@pytest.mark.parametrize(
    "pairs",
    [
        (("sec-fetch-site", "cross-site"),),
        (("sec-fetch-site", "same-site"),),
        (("sec-fetch-site", "same-origin"), ("sec-fetch-site", "same-origin")),
        (("origin", "null"),),
        (("origin", "https://attacker.example"),),
        (("origin", "http://127.0.0.1:8787/path"),),
        (("origin", "http://127.0.0.1:8787?q=1"),),
        (("origin", "ftp://127.0.0.1:8787"),),
        (("origin", "http://127.0.0.1:8788"),),
        (("origin", "http://127.0.0.1:8787"), ("origin", "http://127.0.0.1:8787")),
    ],
)
def test_cross_origin_browser_requests_are_refused(pairs: tuple[tuple[str, str], ...]) -> None:
    with pytest.raises(BridgeError) as caught:
        check_browser_origin(headers(*pairs))
    assert caught.value.code is ErrorCode.PERMISSION_DENIED


def test_origin_without_host_is_refused() -> None:
    with pytest.raises(BridgeError):
        check_browser_origin([(b"origin", b"http://127.0.0.1:8787")])


def test_open_policy_grants_the_anonymous_scope() -> None:
    assert AccessPolicy.open().authorize(headers()) == ANONYMOUS_SCOPE
    assert not AccessPolicy.open().authentication_required


def test_token_policy_scopes_by_token_hash() -> None:
    policy = AccessPolicy.with_token("s3cret")
    expected = f"bearer:{hashlib.sha256(b's3cret').hexdigest()}"
    assert policy.authorize(headers(("authorization", "Bearer s3cret"))) == expected
    for bad in ("bearer s3cret", "Bearer s3cret2", "Bearer", "s3cret", "Basic s3cret"):
        with pytest.raises(BridgeError) as caught:
            policy.authorize(headers(("authorization", bad)))
        assert caught.value.code is ErrorCode.AUTHENTICATION
    with pytest.raises(BridgeError):
        policy.authorize(
            headers(("authorization", "Bearer s3cret"), ("authorization", "Bearer s3cret"))
        )


def test_origin_guard_runs_before_the_bearer() -> None:
    policy = AccessPolicy.with_token("s3cret")
    with pytest.raises(BridgeError) as caught:
        policy.authorize(headers(("origin", "https://evil.example")))
    assert caught.value.code is ErrorCode.PERMISSION_DENIED
