"""A ``url`` output minted by one instance is served by another on the same database and root.

Two bridge processes share one PostgreSQL database and one artifact root (the deployment of
docs/deployment.md). Instance A is configured with instance B's address as
``artifacts.public_base_url`` (B stands in for the load balancer), so A's links point at B:
B must accept A's signature (the key lives in the shared root) and serve A's artifact.
"""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from tests.multiinstance.bridges import SharedDatabase, bridge_processes, start_bridge
from tests.support.postgres import PostgresServer

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]


def test_a_link_minted_by_one_instance_is_served_by_the_other(
    postgres_server: PostgresServer, postgres_schema: str, tmp_path: Path
) -> None:
    database = SharedDatabase(
        url=f"postgresql://bridge@{postgres_server.host}:{postgres_server.port}/imagebridge_test",
        schema=postgres_schema,
        password=postgres_server.password,
    )
    root = f'artifacts.root="{tmp_path / "artifacts"}"'
    with bridge_processes() as started:
        serving = start_bridge("inst-b", database, tmp_path / "b", root)
        started.append(serving)
        minting = start_bridge(
            "inst-a",
            database,
            tmp_path / "a",
            root,
            f'artifacts.public_base_url="{serving.url}/"',
        )
        started.append(minting)
        body = {"prompt": "a fox on two hosts", "size": "16x16", "n": 2}
        with httpx.Client(base_url=minting.url, timeout=60) as client:
            linked = client.post("/v1/images/generations", json={**body, "response_format": "url"})
            inline = client.post("/v1/images/generations", json=body)
        assert linked.status_code == 200, linked.text
        urls = [item["url"] for item in linked.json()["data"]]
        expected = [base64.b64decode(item["b64_json"]) for item in inline.json()["data"]]
        assert len(urls) == 2 and all(url.startswith(serving.url + "/") for url in urls)
        fetched = [httpx.get(url, timeout=30) for url in urls]
        assert [response.status_code for response in fetched] == [200, 200]
        assert [response.content for response in fetched] == expected
        # and the minting instance serves its own link too, under its own address
        own = httpx.get(urls[0].replace(serving.url, minting.url), timeout=30)
        assert own.content == expected[0]
