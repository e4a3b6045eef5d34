"""The SDK's retry lands on the other instance and joins the generation (issue 39).

Two bridge processes share one PostgreSQL database and one artifact root; Debian's nginx
alternates between them with ``proxy_read_timeout 5s`` (tests/support/nginx.py). The newest
``openai`` SDK, with its default retries, asks for an 8 s generation: nginx sends the first
attempt to instance A and answers the SDK 504 after 5 s; A keeps the generation going. The
SDK's retry (``x-stainless-retry-count: 1``) goes to instance B, which finds A's running
record in the shared database, waits for it by reading it, and answers A's kept image: the
provider ran once (the mock's call log, shared by both processes, has one line).
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import httpx
import openai
import pytest

from tests.multiinstance.bridges import SharedDatabase, bridge_processes, start_bridge
from tests.support.nginx import nginx_proxy, require_nginx
from tests.support.postgres import PostgresServer

pytestmark = [pytest.mark.postgres, pytest.mark.nginx, pytest.mark.timeout(240)]


def test_the_sdks_retry_on_the_other_instance_joins_and_the_provider_runs_once(
    postgres_server: PostgresServer, postgres_schema: str, tmp_path: Path
) -> None:
    require_nginx()
    database = SharedDatabase(
        url=f"postgresql://bridge@{postgres_server.host}:{postgres_server.port}/imagebridge_test",
        schema=postgres_schema,
        password=postgres_server.password,
    )
    call_log = tmp_path / "calls.log"
    shared = (
        f'artifacts.root="{tmp_path / "artifacts"}"',
        f'providers.mock.call_log="{call_log}"',
        "server.sync.join_poll_ms=100",
    )
    prompt = "[mock:latency=8000] one pier, two instances"
    with bridge_processes() as started:
        first = start_bridge("inst-a", database, tmp_path / "a", *shared)
        started.append(first)
        second = start_bridge("inst-b", database, tmp_path / "b", *shared)
        started.append(second)
        with nginx_proxy(tmp_path / "nginx", [first.url, second.url], read_timeout_s=5) as proxy:
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="unused")
            raw = client.images.with_raw_response.generate(prompt=prompt, size="64x64")
            image = raw.parse()
            answers = proxy.answers(at_least=2, ending_with=200)
        assert image.data is not None and image.data[0].b64_json
        # nginx: A cut after 5 s (504), the retry answered by B, replaying A's generation
        address = {first.url.removeprefix("http://"): "A", second.url.removeprefix("http://"): "B"}
        assert [(status, address[upstream]) for status, upstream in answers] == [
            (504, "A"),
            (200, "B"),
        ]
        assert raw.headers["x-imagebridge-replay"] == "true"
        assert len(call_log.read_text().splitlines()) == 1  # one provider call in all
        # One record, listed by both instances, with the image the SDK got.
        for bridge in (first, second):
            with httpx.Client(base_url=bridge.url, timeout=30) as direct:
                [item] = direct.get("/v1/jobs").json()["items"]
                record = direct.get(f"/v1/jobs/{item['id']}").json()
                [kept] = record["result"]["data"]
                fetched = direct.get(f"/v1/artifacts/{kept['id']}")
            assert record["status"] == "succeeded" and record["request"]["prompt"] == prompt
            assert item["id"] == raw.headers["x-imagebridge-record"]
            assert fetched.status_code == 200
            assert (
                hashlib.sha256(fetched.content).hexdigest()
                == hashlib.sha256(base64.b64decode(image.data[0].b64_json)).hexdigest()
            )
