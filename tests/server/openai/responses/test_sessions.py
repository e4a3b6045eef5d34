"""Kept responses on a provider that keeps threads run in a persistent session, their
conversation, which a ``previous_response_id`` follow-up continues; ``store: false`` and a
provider without persistent sessions run isolated (docs/api-decisions.md, "Responses")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.openai.responses.conftest import answer, create
from tests.support.fake_codex import FAKE_CODEX, read_log, scenario_env
from tests.support.waiting import wait_until

APP_SERVER_TOOL: dict[str, Any] = {"type": "image_generation"}
"""The app-server's image tool takes only automatic size and quality."""


def session_of(document: dict[str, Any]) -> dict[str, Any] | None:
    session: dict[str, Any] | None = document["imagegen_bridge"].get("session")
    return session


@pytest.fixture
def app_server(
    serve: ServeFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[LiveServer, Path]:
    """A bridge whose default provider is ``codex-app-server`` over the fake codex, and the
    fake's state dir (its log of every message it received)."""
    state_dir = tmp_path / "fake-state"
    for name, value in scenario_env(state_dir).items():
        monkeypatch.setenv(name, value)
    (tmp_path / "codex-home").mkdir()
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    (tmp_path / "work").mkdir()
    server = serve(
        'default_provider="codex-app-server"',
        "providers.codex_app_server.enabled=true",
        "providers.mock.enabled=false",
        f'providers.codex_app_server.executable="{FAKE_CODEX}"',
        f'providers.codex_app_server.cwd="{tmp_path / "work"}"',
        "providers.codex_app_server.rpc_timeout_ms=10000",
        "providers.codex_app_server.shutdown_timeout_ms=3000",
    )
    return server, state_dir


def session_key(document: dict[str, Any]) -> str | None:
    """The persistent session a response ran in (an isolated run reports only its
    ephemeral thread, with no key)."""
    session = session_of(document)
    return None if session is None else session.get("key")


def received(state_dir: Path, method: str) -> list[dict[str, Any]]:
    return [
        entry["received"]
        for entry in read_log(state_dir)
        if entry.get("received", {}).get("method") == method
    ]


def test_a_follow_up_on_the_app_server_continues_the_first_responses_thread(
    app_server: tuple[LiveServer, Path],
) -> None:
    server, state_dir = app_server
    first = answer(server, input="a small blue square", tools=[APP_SERVER_TOOL])
    started = session_of(first)
    assert started is not None
    assert started["key"] == f"responses:{first['id']}"
    assert started["reused"] is False
    follow_up = answer(
        server,
        input="now make it red",
        tools=[APP_SERVER_TOOL],
        previous_response_id=first["id"],
    )
    continued = session_of(follow_up)
    assert continued is not None
    assert continued["key"] == started["key"]
    assert continued["thread_id"] == started["thread_id"]
    assert continued["reused"] is True

    (start,) = received(state_dir, "thread/start")
    assert start["params"]["ephemeral"] is False
    turns = received(state_dir, "turn/start")
    assert [turn["params"]["threadId"] for turn in turns] == [started["thread_id"]] * 2
    kinds = [turn["params"]["input_types"] for turn in turns]
    assert "localImage" not in kinds[0]
    assert "localImage" in kinds[1]  # the earlier image is still sent as the edit input

    # a follow-up of the follow-up stays in the same conversation
    third = answer(
        server, input="and smaller", tools=[APP_SERVER_TOOL], previous_response_id=follow_up["id"]
    )
    assert session_of(third) == {**continued, "key": started["key"]}


def test_a_new_response_on_the_app_server_starts_a_new_thread(
    app_server: tuple[LiveServer, Path],
) -> None:
    server, state_dir = app_server
    one = session_of(answer(server, input="a blue square", tools=[APP_SERVER_TOOL]))
    two = session_of(answer(server, input="a green square", tools=[APP_SERVER_TOOL]))
    assert one is not None and two is not None
    assert one["key"] != two["key"] and one["thread_id"] != two["thread_id"]
    assert len(received(state_dir, "thread/start")) == 2


def test_store_false_on_the_app_server_runs_isolated(
    app_server: tuple[LiveServer, Path],
) -> None:
    server, state_dir = app_server
    document = answer(server, input="a blue square", tools=[APP_SERVER_TOOL], store=False)
    assert session_key(document) is None
    (start,) = received(state_dir, "thread/start")
    assert start["params"]["ephemeral"] is True


def test_a_provider_without_persistent_sessions_gets_no_session(
    codex_served: LiveServer,
) -> None:
    first = answer(codex_served, input="a blue square", tools=[APP_SERVER_TOOL])
    assert session_key(first) is None
    follow_up = answer(
        codex_served,
        input="now red",
        tools=[APP_SERVER_TOOL],
        previous_response_id=first["id"],
    )
    assert session_key(follow_up) is None


def test_mock_sessions_follow_the_rule_and_outlive_a_deleted_response(
    bridge: LiveServer,
) -> None:
    """The mock provider keeps (in-memory) persistent sessions too."""
    first = answer(bridge, input="a red fox")
    started = session_of(first)
    assert started is not None and started["key"] == f"responses:{first['id']}"
    follow_up = answer(bridge, input="bluer", previous_response_id=first["id"])
    assert session_of(follow_up) == {**started, "reused": True}
    assert session_key(answer(bridge, input="a red fox", store=False)) is None

    with bridge.client() as client:
        assert client.delete(f"/v1/responses/{first['id']}").status_code == 200
        binding = client.get(f"/v1/sessions/{started['key']}", params={"provider": "mock"})
        assert binding.status_code == 200, binding.text
        assert binding.json()["thread_id"] == started["thread_id"]
        assert client.delete(f"/v1/sessions/{started['key']}").status_code == 204


def test_a_retried_create_with_an_idempotency_key_keeps_one_conversation(
    bridge: LiveServer,
) -> None:
    body = {"model": "gpt-5.5", "input": "a red fox", "tools": [{"type": "image_generation"}]}
    headers = {"Idempotency-Key": "responses-session-retry"}
    with bridge.client() as client:
        first = client.post("/v1/responses", json=body, headers=headers)
        again = client.post("/v1/responses", json=body, headers=headers)
    assert first.status_code == again.status_code == 200, again.text
    assert first.json()["id"] == again.json()["id"]
    session = session_of(first.json())
    assert session is not None and session["key"].startswith("responses:idem-")
    assert session_of(again.json()) == session


def test_a_background_response_runs_in_its_conversation(bridge: LiveServer) -> None:
    queued = create(bridge, input="a red fox", background=True)
    assert queued.status_code == 200, queued.text
    response_id = queued.json()["id"]

    def done() -> bool:
        with bridge.client() as client:
            status = client.get(f"/v1/responses/{response_id}").json()["status"]
        return bool(status == "completed")

    assert wait_until(done, 30)
    follow_up = answer(bridge, input="bluer", previous_response_id=response_id)
    session = session_of(follow_up)
    assert session is not None
    assert (session["key"], session["reused"]) == (f"responses:{response_id}", True)
