"""Issue 31 on two bridge processes sharing one PostgreSQL database: a key's daily quota
is exact across instances, and a revocation on one refuses the key on the other at once.

40 requests of n = 1 on a key with 10 images a day, 20 through each instance, at once:
exactly 10 succeed, 30 are 429 with ``Retry-After``, and the shared mock call log (one line
per provider call, from either process) has exactly 10 lines.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.multiinstance.bridges import SharedDatabase, bridge_processes, start_bridge
from tests.support.postgres import PostgresServer

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

ADMIN_ENV = "MULTI_INSTANCE_ADMIN_TOKEN"
ADMIN = "multi-admin-SECRET-7"
BODY = {"operation": "generate", "prompt": "a fox", "parameters": {"size": "16x16"}}


def _post(url: str, secret: str) -> httpx.Response:
    headers = {"authorization": f"Bearer {secret}"}
    return httpx.post(f"{url}/v1/images", json=BODY, headers=headers, timeout=120)


def test_a_quota_is_exact_and_a_revocation_immediate_across_two_instances(
    postgres_server: PostgresServer,
    postgres_schema: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ADMIN_ENV, ADMIN)
    database = SharedDatabase.on(postgres_server, postgres_schema)
    call_log = tmp_path / "calls.log"
    shared = (
        f'artifacts.root="{tmp_path / "artifacts"}"',
        f'providers.mock.call_log="{call_log}"',
        "providers.mock.latency_ms=200",
        "server.keys.enabled=true",
        f'server.bearer_token_env="{ADMIN_ENV}"',
    )
    admin = {"authorization": f"Bearer {ADMIN}"}
    with bridge_processes() as started:
        first = start_bridge("keys-a", database, tmp_path / "a", *shared)
        started.append(first)
        second = start_bridge("keys-b", database, tmp_path / "b", *shared)
        started.append(second)
        created = httpx.post(
            f"{first.url}/v1/keys",
            json={"name": "team", "images_per_day": 10},
            headers=admin,
            timeout=30,
        )
        assert created.status_code == 201, created.text
        key_id, secret = created.json()["key"]["id"], created.json()["secret"]

        urls = [(first if n % 2 else second).url for n in range(40)]
        with ThreadPoolExecutor(max_workers=40) as pool:
            responses = list(pool.map(_post, urls, [secret] * 40))

        statuses = [r.status_code for r in responses]
        assert statuses.count(200) == 10 and statuses.count(429) == 30
        for refused in (r for r in responses if r.status_code == 429):
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["error"]["imagegen_bridge"]["details"]["reason"] == "key_quota"
        assert len(call_log.read_text().splitlines()) == 10

        usage = httpx.get(f"{second.url}/v1/usage", headers=admin, timeout=30).json()["data"]
        assert sum(row["delivered"] for row in usage) == 10

        revoked = httpx.delete(f"{first.url}/v1/keys/{key_id}", headers=admin, timeout=30)
        assert revoked.status_code == 200
        refused = httpx.get(  # the very next request: no cache stands between the instances
            f"{second.url}/v1/providers",
            headers={"authorization": f"Bearer {secret}"},
            timeout=30,
        )
        assert refused.status_code == 401
        for bridge in (first, second):
            assert secret not in "\n".join(bridge.output)
