"""The official Node ``openai`` SDK, unmodified and at its default retries, against the bridge."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of, png
from tests.support.openai_node import require_openai_node, skip_reason

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")

TOKEN = "node-images-token"
SCRIPT = Path(__file__).with_name("node") / "openai_images.mjs"


@pytest.fixture
def bridge(serve: ServeFactory) -> LiveServer:
    return serve('server.bearer_token_env="BRIDGE_TOKEN"', env={"BRIDGE_TOKEN": TOKEN})


def test_node_sdk_generates_edits_and_is_never_charged_twice(
    bridge: LiveServer, tmp_path: Path
) -> None:
    package = require_openai_node()
    source = tmp_path / "source.png"
    source.write_bytes(png(64, 64))
    mock = mock_of(bridge)
    result = subprocess.run(
        ["node", str(SCRIPT), str(package), f"{bridge.url}/v1", TOKEN, str(source)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    runs: dict[str, dict[str, Any]] = {
        line["request"]: line for line in map(json.loads, result.stdout.splitlines())
    }
    generated = runs["generate"]
    assert (generated["count"], generated["png"], generated["size"]) == (2, True, "48x32")
    assert generated["text_tokens"] > 0 and generated["image_tokens"] == 200
    assert generated["model"] == "mock-image-1"
    for edit in ("edit-file", "edit-buffer"):
        assert (runs[edit]["count"], runs[edit]["png"]) == (1, True), runs[edit]
    assert runs["edit-file"]["size"] == "64x64"
    assert runs["transparent-jpeg"] == {
        "request": "transparent-jpeg",
        "status": 400,
        "param": "output_format",
    }
    assert runs["upstream-5xx"]["status"] == 502
    # two generate calls (fan-out of n=2), two edits, one failed upstream call: each ran once
    assert mock.calls == 5
    assert runs["models"]["ids"] == ["mock-image-1"]
