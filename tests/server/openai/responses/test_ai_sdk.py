"""The Vercel AI SDK (``ai`` + ``@ai-sdk/openai``, pinned in scripts/install-test-deps):
``generateText`` and ``streamText`` with ``openai.tools.imageGeneration`` get the image
from the bridge's ``POST /v1/responses``, through the mock provider and through
``codex-responses`` over the Codex backend mock."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import LiveServer
from tests.server.openai.responses.ai_sdk import require_ai_sdk
from tests.server.openai.responses.conftest import CODEX_SIZE
from tests.support.codex_backend import CodexBackend
from tests.support.openai_node import skip_reason

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")

SCRIPT = Path(__file__).with_name("node") / "ai_sdk_image.mjs"


def _run(server: LiveServer, size: str) -> dict[str, dict[str, Any]]:
    prefix = require_ai_sdk()
    result = subprocess.run(
        ["node", str(SCRIPT), str(prefix), f"{server.url}/v1", "bridge-token", size],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return {line["call"]: line for line in map(json.loads, result.stdout.splitlines())}


def _check(runs: dict[str, dict[str, Any]], size: str) -> None:
    generated, streamed = runs["generateText"], runs["streamText"]
    assert generated["text"] == f"Generated an image: {size} png."
    assert generated["content"] == ["tool-call", "tool-result", "text"]
    assert generated["finishReason"] == "stop"
    [image] = generated["images"]
    assert image["png"]
    assert image["length"] > 0
    assert streamed["text"] == generated["text"]
    assert {"tool-call", "tool-result", "text-delta", "finish"} <= set(streamed["parts"])
    assert "error" not in streamed["parts"]
    [streamed_image] = streamed["images"]
    assert streamed_image["png"]


def test_generate_text_with_the_image_tool_gets_the_image_from_the_mock(
    bridge: LiveServer,
) -> None:
    _check(_run(bridge, "16x16"), "16x16")


def test_generate_text_with_the_image_tool_gets_the_image_from_codex(
    codex_served: LiveServer, codex_backend: CodexBackend
) -> None:
    _check(_run(codex_served, CODEX_SIZE), CODEX_SIZE)
    assert codex_backend.calls("responses") == 2
