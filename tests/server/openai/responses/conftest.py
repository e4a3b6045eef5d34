"""Shared pieces of the Responses API tests: a bridge, the SDK pointed at it, strict decoding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.server.conftest import LiveServer, ServeFactory
from tests.support.codex_backend import (
    CodexBackend,
    codex_responses_sets,
)

TOOL: dict[str, Any] = {"type": "image_generation", "size": "16x16"}
CODEX_SIZE = "1024x1024"
"""A size the Codex image tool makes (the backend mock renders at the asked size)."""


@pytest.fixture(scope="module")
def bridge(serve_module: ServeFactory) -> LiveServer:
    return serve_module()


def sdk(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)


def async_sdk(server: LiveServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)


def strict(answer: dict[str, Any]) -> Response:
    """The SDK's own strict decoding of an answer (raises on anything it would refuse)."""
    return Response.model_validate(answer, strict=True)


def create(server: LiveServer, **body: Any) -> httpx.Response:
    """``POST /v1/responses`` with ``body`` as JSON (the image tool unless ``tools`` is given)."""
    body.setdefault("model", "gpt-5.5")
    body.setdefault("tools", [TOOL])
    with server.client() as client:
        return client.post("/v1/responses", json=body)


def answer(server: LiveServer, **body: Any) -> dict[str, Any]:
    """A successful answer, checked with the SDK's strict decoder."""
    response = create(server, **body)
    assert response.status_code == 200, response.text
    document: dict[str, Any] = json.loads(response.text)
    strict(document)
    return document


EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


def stream(server: LiveServer, **body: Any) -> tuple[list[dict[str, Any]], str]:
    """A ``stream: true`` create's events, each decoded strictly by the SDK's event union,
    and the raw text (heartbeat comments included)."""
    body = {"model": "gpt-5.5", "tools": [TOOL], **body, "stream": True}
    with server.client() as client:
        response = client.post("/v1/responses", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events: list[dict[str, Any]] = []
    for block in response.text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        name = lines[0].removeprefix("event: ")
        data = json.loads(lines[1].removeprefix("data: "))
        assert data["type"] == name
        EVENTS.validate_python(data, strict=True)
        events.append(data)
    return events, response.text


def refusal(server: LiveServer, **body: Any) -> tuple[int, dict[str, Any]]:
    """The status and ``error`` object of a refused request."""
    response = create(server, **body)
    assert response.status_code >= 400, response.text
    error: dict[str, Any] = response.json()["error"]
    return response.status_code, error


@pytest.fixture
def codex_served(
    serve: ServeFactory,
    codex_backend: CodexBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> LiveServer:
    """A bridge whose default provider is ``codex-responses`` over the Codex backend mock."""
    return serve(*codex_responses_sets(codex_backend, tmp_path, monkeypatch))
