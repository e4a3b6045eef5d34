"""The official Node ``openai`` SDK streams images from the bridge (generate and edit)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import png
from tests.support.openai_node import require_openai_node, skip_reason

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")

TOKEN = "node-client-token"
SCRIPT = Path(__file__).with_name("node") / "openai_stream.mjs"


@pytest.fixture
def bridge(serve: ServeFactory) -> LiveServer:
    return serve('server.bearer_token_env="BRIDGE_TOKEN"', env={"BRIDGE_TOKEN": TOKEN})


def test_node_sdk_streams_generate_and_edit(bridge: LiveServer, tmp_path: Path) -> None:
    package = require_openai_node()
    source = tmp_path / "source.png"
    source.write_bytes(png(64, 64))
    result = subprocess.run(
        ["node", str(SCRIPT), str(package), f"{bridge.url}/v1", TOKEN, str(source)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    runs = {line["request"]: line for line in map(json.loads, result.stdout.splitlines())}
    generated = runs["generate"]["events"]
    assert [e["type"] for e in generated] == (
        ["image_generation.partial_image"] * 4 + ["image_generation.completed"] * 2
    )
    for index in (0, 1):
        mine = [e["partial_image_index"] for e in generated[:4] if e["index"] == index]
        assert mine == [0, 1]
    assert [e["index"] for e in generated[4:]] == [0, 1]
    assert all(e["png"] and e["output_format"] == "png" for e in generated)
    assert all(e["size"] == "64x64" and e["total_tokens"] > 0 for e in generated[4:])
    edited = runs["edit"]["events"]
    assert [e["type"] for e in edited] == ["image_edit.partial_image", "image_edit.completed"]
    # a failure after the previews ends the iteration with the SDK's own error
    assert runs["failing"]["error"] == "APIError"
