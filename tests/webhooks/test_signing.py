"""Signatures the ``openai`` SDK verifies unchanged (Standard Webhooks, as OpenAI signs)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import openai
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.webhooks.signing import (
    check_secret,
    new_secret,
    secret_hint,
    sign,
    signed_headers,
)

BODY = json.dumps(
    {
        "id": "evt_1",
        "object": "event",
        "created_at": 1_700_000_000,
        "type": "response.completed",
        "data": {"id": "resp_1"},
    }
).encode()


def verify_plain(secret: str, headers: dict[str, str], body: bytes, tolerance: int = 300) -> bool:
    """docs/webhooks.md's plain-Python verifier, word for word."""
    msg_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    if abs(time.time() - int(timestamp)) > tolerance:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(expected, part.split(",", 1)[1])
        for part in headers["webhook-signature"].split()
        if part.startswith("v1,")
    )


def test_the_sdk_unwraps_a_signed_event() -> None:
    secret = new_secret()
    headers = signed_headers("wh_123", int(time.time()), BODY, [secret])
    event = openai.OpenAI(api_key="x", webhook_secret=secret).webhooks.unwrap(BODY, headers)
    assert (event.id, event.type, event.data.id) == ("evt_1", "response.completed", "resp_1")
    assert headers["webhook-signature"].startswith("v1,")
    assert verify_plain(secret, headers, BODY)


def test_a_wrong_secret_a_changed_body_or_an_old_timestamp_is_refused() -> None:
    secret, other = new_secret(), new_secret()
    hooks = openai.OpenAI(api_key="x", webhook_secret=other).webhooks
    headers = signed_headers("wh_123", int(time.time()), BODY, [secret])
    with pytest.raises(openai.InvalidWebhookSignatureError):
        hooks.unwrap(BODY, headers)
    with pytest.raises(openai.InvalidWebhookSignatureError):
        hooks.unwrap(BODY + b" ", headers, secret=secret)
    old = signed_headers("wh_123", int(time.time()) - 3_600, BODY, [secret])
    with pytest.raises(openai.InvalidWebhookSignatureError):
        hooks.unwrap(BODY, old, secret=secret)
    assert not verify_plain(other, headers, BODY)


def test_during_a_rotation_both_secrets_verify() -> None:
    old, new = new_secret(), new_secret()
    headers = signed_headers("wh_9", int(time.time()), BODY, [new, old])
    assert len(headers["webhook-signature"].split()) == 2
    for secret in (old, new):
        openai.OpenAI(api_key="x", webhook_secret=secret).webhooks.verify_signature(BODY, headers)


def test_signature_is_hmac_sha256_of_id_timestamp_body() -> None:
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    mac = hmac.new(b"k" * 32, b"wh_1.42." + BODY, hashlib.sha256).digest()
    assert sign(secret, "wh_1", 42, BODY) == "v1," + base64.b64encode(mac).decode()


def test_secrets_and_hints() -> None:
    secret = new_secret()
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) == 32
    assert secret_hint(secret) == "whsec_…" + secret[-4:]
    assert check_secret(secret, "x") == secret
    for bad in ("plain", "whsec_***", "whsec_" + base64.b64encode(b"short").decode()):
        with pytest.raises(BridgeError) as caught:
            check_secret(bad, "server.webhooks.endpoints.a.secret_env")
        assert caught.value.code is ErrorCode.CONFIGURATION
        assert bad not in caught.value.message
