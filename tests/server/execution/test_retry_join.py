"""A retry joins the generation it repeats instead of paying again (issue 39).

A retry is a request with the same ``Idempotency-Key``, or — without a key — one an
OpenAI SDK marks as a retry (``x-stainless-retry-count`` of 1 or more) with the same owner,
route and body as a record started within the window. It waits for a running record or
is answered from a finished one, in its own format, marked ``x-imagebridge-replay: true``;
the provider runs once. A request not marked as a retry is never merged.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any

import httpx
import openai
import pytest

from tests.server.auth.keys import ENV, KEYS_ON, admin, create_key
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of
from tests.support.waiting import wait_until

RETRY = {"x-stainless-retry-count": "1"}
SLOW_MS = 1_200


def generation(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"prompt": prompt, "size": "8x8", **extra}


def sha(item: dict[str, Any]) -> str:
    return hashlib.sha256(base64.b64decode(item["b64_json"])).hexdigest()


async def post_both(
    server: LiveServer, path: str, body: dict[str, Any], second: dict[str, str]
) -> tuple[httpx.Response, httpx.Response]:
    """The first request, then (once it reached the provider) the second with ``second``."""
    mock = mock_of(server)
    async with server.async_client(timeout=60) as client:
        first = asyncio.create_task(client.post(path, json=body))
        for _ in range(500):
            if mock.in_flight:
                break
            await asyncio.sleep(0.01)
        assert mock.in_flight == 1
        retried = await client.post(path, json=body, headers=second)
        return await first, retried


def test_a_marked_retry_joins_the_running_generation(serve: ServeFactory) -> None:
    server = serve()
    body = generation(f"[mock:latency={SLOW_MS}] joined while running")
    first, retried = asyncio.run(post_both(server, "/v1/images/generations", body, RETRY))
    assert first.status_code == retried.status_code == 200, retried.text
    assert mock_of(server).calls == 1
    assert retried.headers["x-imagebridge-replay"] == "true"
    assert "x-imagebridge-replay" not in first.headers
    assert retried.headers["x-imagebridge-record"] == first.headers["x-imagebridge-record"]
    assert sha(retried.json()["data"][0]) == sha(first.json()["data"][0])
    assert retried.json()["imagegen_bridge"]["id"] == first.json()["imagegen_bridge"]["id"]
    with server.client() as client:
        assert len(client.get("/v1/jobs").json()["items"]) == 1


def test_an_identical_request_without_a_retry_marker_or_key_generates_again(
    serve: ServeFactory,
) -> None:
    server = serve()
    body = generation(f"[mock:latency={SLOW_MS}] two identical prompts")
    first, second = asyncio.run(post_both(server, "/v1/images/generations", body, {}))
    assert first.status_code == second.status_code == 200
    assert mock_of(server).calls == 2
    assert "x-imagebridge-replay" not in second.headers
    assert second.headers["x-imagebridge-record"] != first.headers["x-imagebridge-record"]
    with server.client() as client:
        assert len(client.get("/v1/jobs").json()["items"]) == 2
        # a retry marker of 0 (every SDK's first attempt) is no retry either
        again = client.post("/v1/images/generations", json=body, headers={
            "x-stainless-retry-count": "0"})  # fmt: skip
        assert again.status_code == 200 and "x-imagebridge-replay" not in again.headers
    assert mock_of(server).calls == 3


def test_a_marked_retry_with_another_body_generates_on_its_own(serve: ServeFactory) -> None:
    server = serve()
    with server.client() as client:
        client.post("/v1/images/generations", json=generation("a blue door"))
        other = client.post(
            "/v1/images/generations", json=generation("a green door"), headers=RETRY
        )
    assert other.status_code == 200 and "x-imagebridge-replay" not in other.headers
    assert mock_of(server).calls == 2


@pytest.mark.parametrize("asked", ["b64_json", "url"])
def test_a_marked_retry_of_a_finished_generation_is_answered_from_its_kept_image(
    serve: ServeFactory, asked: str
) -> None:
    """The first caller went away before its answer; the retry gets the kept image back,
    rebuilt in the format it asked for (bytes read back, or a fresh link)."""
    server = serve()
    body = generation("a kept teapot", response_format=asked)
    with server.client() as client:
        first = client.post("/v1/images/generations", json=body)
        assert first.status_code == 200
        retried = client.post("/v1/images/generations", json=body, headers=RETRY)
        assert retried.status_code == 200, retried.text
        assert retried.headers["x-imagebridge-replay"] == "true"
        one, two = first.json()["data"][0], retried.json()["data"][0]
        if asked == "b64_json":
            assert sha(one) == sha(two)
        else:
            assert client.get(two["url"]).content == client.get(one["url"]).content
    assert mock_of(server).calls == 1


def test_the_window_bounds_which_records_a_marked_retry_joins(serve: ServeFactory) -> None:
    server = serve("server.sync.retry_join_window_secs=0")
    body = generation("no joining at all")
    with server.client() as client:
        client.post("/v1/images/generations", json=body)
        again = client.post("/v1/images/generations", json=body, headers=RETRY)
    assert "x-imagebridge-replay" not in again.headers
    assert mock_of(server).calls == 2


def test_the_same_idempotency_key_joins_and_another_body_conflicts(serve: ServeFactory) -> None:
    server = serve()
    body = {"operation": "generate", "prompt": f"[mock:latency={SLOW_MS}] keyed",
            "parameters": {"size": "8x8"}}  # fmt: skip
    keyed = {"Idempotency-Key": "order-42"}
    _, second = asyncio.run(post_both(server, "/v1/images", body, keyed))
    # The first one carried no key: only the second is keyed, so it ran on its own...
    assert mock_of(server).calls == 2
    with server.client() as client:
        third = client.post("/v1/images", json=body, headers=keyed)
        assert third.status_code == 200 and third.headers["x-imagebridge-replay"] == "true"
        assert third.json()["id"] == second.json()["id"]  # the original's replay: same id
        assert third.json()["data"] == second.json()["data"]
        other = client.post("/v1/images", json={**body, "prompt": "else"}, headers=keyed)
        assert other.status_code == 409
        assert other.json()["error"]["imagegen_bridge"]["code"] == "idempotency_conflict"
    assert mock_of(server).calls == 2  # ...and its replays paid nothing


def test_concurrent_requests_with_one_key_share_one_generation(serve: ServeFactory) -> None:
    server = serve()
    body = {"operation": "generate", "prompt": f"[mock:latency={SLOW_MS}] shared",
            "parameters": {"size": "8x8"}}  # fmt: skip
    keyed = {"Idempotency-Key": "shared-1"}

    async def both() -> list[httpx.Response]:
        async with server.async_client(timeout=60) as client:
            return await asyncio.gather(
                *(client.post("/v1/images", json=body, headers=keyed) for _ in range(3))
            )

    answers = asyncio.run(both())
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert mock_of(server).calls == 1
    assert len({a.json()["data"][0]["b64_json"] for a in answers}) == 1
    assert sum(1 for a in answers if a.headers.get("x-imagebridge-replay") == "true") == 2


def test_a_joined_retry_on_a_key_reserves_and_counts_nothing_more(serve: ServeFactory) -> None:
    server = serve(*KEYS_ON, env=ENV)
    key_id, secret = create_key(server, "retrier", images_per_day=3)
    body = generation(f"[mock:latency={SLOW_MS}] counted once")
    auth = {"authorization": f"Bearer {secret}"}

    async def first_and_retry() -> tuple[httpx.Response, httpx.Response]:
        async with server.async_client(timeout=60, headers=auth) as client:
            first = asyncio.create_task(client.post("/v1/images/generations", json=body))
            assert await asyncio.to_thread(wait_until, lambda: mock_of(server).in_flight == 1)
            retried = await client.post("/v1/images/generations", json=body, headers=RETRY)
            return await first, retried

    first, retried = asyncio.run(first_and_retry())
    assert first.status_code == retried.status_code == 200
    assert retried.headers["x-imagebridge-images-remaining-day"] == "2"
    with admin(server) as boss:
        assert boss.get(f"/v1/keys/{key_id}").json()["remaining"]["day"]["remaining"] == 2
        rows = boss.get("/v1/usage", params={"key": key_id}).json()["data"]
    # One row per key, day, provider and account: one image asked for and delivered, and
    # one answered again to the retry without being asked for or generated again.
    assert [(r["requested"], r["delivered"], r["kept"], r["replayed"]) for r in rows] == [
        (1, 1, 0, 1)
    ]


def test_cancelling_a_running_synchronous_record_stops_its_generation(
    serve: ServeFactory,
) -> None:
    server = serve()
    mock = mock_of(server)

    async def cancel_while_running() -> httpx.Response:
        async with server.async_client(timeout=60) as client:
            running = asyncio.create_task(
                client.post("/v1/images", json={"operation": "generate", "prompt":
                            "[mock:latency=5000] stop me", "parameters": {"size": "8x8"}})
            )  # fmt: skip
            assert await asyncio.to_thread(wait_until, lambda: mock.in_flight == 1)
            [item] = (await client.get("/v1/jobs")).json()["items"]
            assert item["status"] == "running"
            cancelled = await client.delete(f"/v1/jobs/{item['id']}")
            assert cancelled.status_code == 200
            assert cancelled.json()["cancel_requested"] is True
            return await running

    answer = asyncio.run(cancel_while_running())
    assert answer.status_code >= 400
    assert wait_until(lambda: mock.cancellations == 1)
    with server.client() as client:
        assert wait_until(
            lambda: client.get("/v1/jobs").json()["items"][0]["status"] == "cancelled"
        )


def test_the_openai_sdk_retrying_a_timed_out_call_joins_instead_of_paying_again(
    serve: ServeFactory,
) -> None:
    """The SDK's own timeout (shorter than the generation) and its default retries: the
    retries join the first attempt's generation, which went on after it left."""
    server = serve()
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", timeout=1.0)
    image = client.images.generate(prompt="[mock:latency=2500] patience", size="8x8")
    assert image.data is not None and image.data[0].b64_json
    assert mock_of(server).calls == 1


def test_without_a_history_keys_replay_in_process_and_marked_retries_run_again(
    serve: ServeFactory,
) -> None:
    """``server.jobs.enabled = false``: nothing is recorded; the engine's in-process cache
    replays a keyed request (the original's rule), a marked retry is not joined."""
    server = serve("server.jobs.enabled=false")
    body = {"operation": "generate", "prompt": "no history", "parameters": {"size": "8x8"}}
    with server.client() as client:
        first = client.post("/v1/images", json=body, headers={"Idempotency-Key": "k"})
        again = client.post("/v1/images", json=body, headers={"Idempotency-Key": "k"})
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        assert "x-imagebridge-record" not in first.headers
        openai_body = generation("no history either")
        client.post("/v1/images/generations", json=openai_body)
        marked = client.post("/v1/images/generations", json=openai_body, headers=RETRY)
        assert marked.status_code == 200 and "x-imagebridge-replay" not in marked.headers
    assert mock_of(server).calls == 3
