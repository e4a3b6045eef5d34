"""The bridge's own SSE stream over the Codex backend mock (docs/providers.md, "Codex backend,
as measured").

One image the backend repeats in many events reaches the client once; a final image that
arrives "generating" with no ``response.completed`` is delivered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ServeFactory
from tests.support.codex_backend import (
    CodexBackend,
    codex_responses_sets,
)

Events = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def codex_stream(
    serve: ServeFactory,
    codex_backend: CodexBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[str], Events]:
    """``stream(behaviour)``: one ``/v1/images/stream`` call served by ``behaviour``."""
    server = serve(*codex_responses_sets(codex_backend, tmp_path, monkeypatch))

    def stream(behaviour: str) -> Events:
        codex_backend.set_default(behaviour)
        body = {
            "operation": "generate",
            "prompt": "a red fox",
            "parameters": {"partial_images": 2},
            "output": {"response_format": "b64_json"},
        }
        with server.client() as client:
            response = client.post("/v1/images/stream", json=body)
        assert response.status_code == 200
        events: Events = []
        for block in response.text.split("\n\n"):
            lines = [line for line in block.split("\n") if line and not line.startswith(":")]
            if lines:
                name = lines[0].removeprefix("event: ")
                events.append((name, json.loads(lines[1].removeprefix("data: "))))
        return events

    return stream


def test_an_image_repeated_by_the_backend_reaches_the_client_once(
    codex_stream: Callable[[str], Events], codex_backend: CodexBackend
) -> None:
    events = codex_stream("repeated_image")

    names = [name for name, _ in events]
    assert names.count("completed") == 1 and "error" not in names, events
    [(_, completed)] = [event for event in events if event[0] == "completed"]
    [image] = completed["response"]["data"]
    final = image["b64_json"]
    text = json.dumps([payload for _, payload in events])
    assert text.count(final) == 1  # the final bytes once, although sent five times
    partials = [payload for name, payload in events if name == "partial_image"]
    assert len(partials) == 1  # the repeated preview, and the late copy of the final, dropped
    assert codex_backend.calls("responses") == 1


def test_a_final_image_still_generating_is_delivered(
    codex_stream: Callable[[str], Events], codex_backend: CodexBackend
) -> None:
    events = codex_stream("final_generating_no_completed")

    names = [name for name, _ in events]
    assert names[-1] == "completed", names
    assert codex_backend.calls("responses") == 1
