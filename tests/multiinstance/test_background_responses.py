"""A background response made on one instance is answered by the other (issue 40).

Two bridge processes share one PostgreSQL database and one artifact root. The newest
``openai`` SDK, with its default retries and timeouts, creates background responses on
instance A and retrieves, resumes, cancels and deletes them on instance B: the response is a
view of its job's record and its kept image, both in the shared stores, so either instance
answers. A follow-up on B edits the image A's job made (``previous_response_id``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.responses import Response

from tests.multiinstance.bridges import SharedDatabase, bridge_processes, start_bridge
from tests.support.postgres import PostgresServer

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

TOOL = {"type": "image_generation", "size": "16x16"}


def strict_get(url: str, response_id: str) -> Response:
    """``GET /v1/responses/{id}`` decoded strictly by the SDK's own model."""
    answer = httpx.get(f"{url}/v1/responses/{response_id}", timeout=30)
    assert answer.status_code == 200, answer.text
    return Response.model_validate(json.loads(answer.text), strict=True)


def until(url: str, response_id: str, done: Callable[[Response], bool]) -> Response:
    deadline = time.monotonic() + 60
    while True:
        answer = strict_get(url, response_id)
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def test_a_background_response_is_answered_by_the_other_instance(
    postgres_server: PostgresServer, postgres_schema: str, tmp_path: Path
) -> None:
    database = SharedDatabase(
        url=f"postgresql://bridge@{postgres_server.host}:{postgres_server.port}/imagebridge_test",
        schema=postgres_schema,
        password=postgres_server.password,
    )
    shared = (f'artifacts.root="{tmp_path / "artifacts"}"',)
    with bridge_processes() as started:
        first = start_bridge("inst-a", database, tmp_path / "a", *shared)
        started.append(first)
        second = start_bridge("inst-b", database, tmp_path / "b", *shared)
        started.append(second)
        on_a = openai.OpenAI(base_url=f"{first.url}/v1", api_key="unused")
        on_b = openai.OpenAI(base_url=f"{second.url}/v1", api_key="unused")

        made = on_a.responses.create(
            model="gpt-5.5",
            input="a red fox",
            tools=[TOOL],
            background=True,  # type: ignore[list-item]
        )
        assert made.status == "queued"
        done = until(second.url, made.id, lambda r: r.status == "completed")
        assert done.status == "completed" and done.background is True
        call = done.output[0]
        assert call.type == "image_generation_call" and call.result
        resumed = list(on_b.responses.retrieve(made.id, stream=True, starting_after=2))
        assert resumed[0].sequence_number == 3 and resumed[-1].type == "response.completed"

        edited = on_b.responses.create(
            model="gpt-5.5",
            input="make it blue",
            tools=[TOOL],
            previous_response_id=made.id,  # type: ignore[list-item]
        )
        message = edited.output[1]
        assert message.type == "message"
        assert message.content[0].text.startswith("Edited the image")  # type: ignore[union-attr]

        slow = on_a.responses.create(
            model="gpt-5.5",
            input="[mock:latency=20000] a slow fox",
            tools=[TOOL],  # type: ignore[list-item]
            background=True,
        )
        until(second.url, slow.id, lambda r: r.status == "in_progress")
        on_b.responses.cancel(slow.id)  # wherever its job runs (a notification reaches it)
        assert until(first.url, slow.id, lambda r: r.status != "in_progress").status == (
            "cancelled"
        )

        on_b.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError):
            on_a.responses.retrieve(made.id)


def test_a_response_whose_instance_is_killed_ends_failed_on_the_other(
    postgres_server: PostgresServer, postgres_schema: str, tmp_path: Path
) -> None:
    """kill -9 of the instance running a background response: once its lease runs out the
    other instance records the job interrupted, and the response answers ``failed`` with
    the interruption (never re-run); a response still queued then runs on the survivor."""
    database = SharedDatabase(
        url=f"postgresql://bridge@{postgres_server.host}:{postgres_server.port}/imagebridge_test",
        schema=postgres_schema,
        password=postgres_server.password,
    )
    shared = (
        f'artifacts.root="{tmp_path / "artifacts"}"',
        "server.jobs.lease_secs=3",
        "server.jobs.heartbeat_secs=1",
        "server.jobs.poll_interval_ms=100",
    )
    with bridge_processes() as started:
        victim = start_bridge(
            "inst-a", database, tmp_path / "a", *shared, "server.jobs.max_running=1"
        )
        started.append(victim)
        on_a = openai.OpenAI(base_url=f"{victim.url}/v1", api_key="unused")
        running = on_a.responses.create(
            model="gpt-5.5",
            input="[mock:latency=60000] a fox that never ends",
            tools=[TOOL],  # type: ignore[list-item]
            background=True,
        )
        until(victim.url, running.id, lambda r: r.status == "in_progress")
        waiting = on_a.responses.create(
            model="gpt-5.5",
            input="a patient fox",
            tools=[TOOL],
            background=True,  # type: ignore[list-item]
        )
        survivor = start_bridge("inst-b", database, tmp_path / "b", *shared)
        started.append(survivor)
        victim.kill()
        failed = until(survivor.url, running.id, lambda r: r.status != "in_progress")
        assert failed.status == "failed" and failed.error is not None
        assert failed.error.code == "server_error"
        native = httpx.get(f"{survivor.url}/v1/responses/{running.id}", timeout=30).json()
        assert native["imagegen_bridge"]["error"]["code"] == "cancelled"
        assert until(survivor.url, waiting.id, lambda r: r.status == "completed").status == (
            "completed"
        )
