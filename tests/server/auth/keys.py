"""Named keys for the server tests: the admin token, the settings that turn keys on, and a
key made through the admin API (tests/server/auth/test_keys.py and the tiers that run a
key's quota through other paths: keep-on-disconnect, retry-join, a database away)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.server.conftest import LiveServer

ADMIN = "admin-token-SECRET-1"
ENV = {"BRIDGE_ADMIN": ADMIN}
KEYS_ON = ("server.keys.enabled=true", 'server.bearer_token_env="BRIDGE_ADMIN"')
BODY = {"operation": "generate", "prompt": "a paper fox", "routing": {"provider": "mock"}}


def admin(server: LiveServer) -> httpx.Client:
    return server.client(headers={"authorization": f"Bearer {ADMIN}"})


def create_key(server: LiveServer, name: str, **limits: Any) -> tuple[str, str]:
    """A new key with ``limits``: its id and its secret (shown once)."""
    with admin(server) as client:
        response = client.post("/v1/keys", json={"name": name, **limits})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["secret"].startswith("ibk_") and body["key"]["prefix"] == body["secret"][:12]
    return body["key"]["id"], body["secret"]


def as_key(server: LiveServer, secret: str) -> httpx.Client:
    return server.client(headers={"authorization": f"Bearer {secret}"})


async def burst(server: LiveServer, secret: str, count: int) -> list[httpx.Response]:
    """``count`` image requests on the key at once."""
    limits = httpx.Limits(max_connections=count)
    async with server.async_client(
        headers={"authorization": f"Bearer {secret}"}, limits=limits, timeout=120
    ) as client:
        return await asyncio.gather(*(client.post("/v1/images", json=BODY) for _ in range(count)))
