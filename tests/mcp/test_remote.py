"""``--remote``: the tools over a running bridge, with images saved on this machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imagebridge.client import ImageBridgeClient
from imagebridge.mcp import McpOptions
from tests.mcp.conftest import Progress, Workspace, connected, decode
from tests.server.conftest import LiveServer, start_server


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        tmp_path_factory.mktemp("remote-bridge"), ["runtime.circuit_breaker.enabled=false"]
    )
    yield live
    live.stop()


async def test_generate_streams_progress_and_saves_locally(
    bridge: LiveServer, workspace: Workspace
) -> None:
    progress = Progress()
    async with connected(workspace, McpOptions(remote=bridge.url)) as session:
        result = await session.call(
            "generate_image",
            {
                "prompt": "[mock:latency=50] remote fox",
                "n": 2,
                "size": "40x30",
                "directory": "remote",
                "filename_prefix": "fox",
            },
            progress,
        )
    assert result.is_error is False
    for record in result.structured_content["images"]:
        path = Path(record["path"])
        assert path.is_relative_to(workspace.config.artifacts.root / "remote")
        assert path.name.startswith("fox-")
        assert decode(path.read_bytes()).size == (40, 30)
    assert bridge.data_dir not in Path(result.structured_content["images"][0]["path"]).parents
    assert "generating" in progress.messages
    assert progress.messages[-1] == "completed"


async def test_remote_errors_are_tool_errors(bridge: LiveServer, workspace: Workspace) -> None:
    async with connected(workspace, McpOptions(remote=bridge.url)) as session:
        refused = await session.call("generate_image", {"prompt": "[mock:fail=safety_rejected] x"})
        invalid = await session.call("generate_image", {"prompt": "x", "size": "99999x1"})
    assert refused.is_error is True
    assert refused.structured_content["error"]["code"] == "safety_rejected"
    assert invalid.is_error is True


async def test_catalogue_jobs_and_presets_are_the_bridges(
    bridge: LiveServer, workspace: Workspace
) -> None:
    with ImageBridgeClient(bridge.url, env={}) as client:
        job = client.jobs.create({"prompt": "REMOTE JOB", "parameters": {"size": "16x16"}})
        client.jobs.wait(job.id, timeout=20, poll_interval=0.02)
        client.presets.create(
            "remote-banner", {"prompt": "banner", "parameters": {"size": "64x16"}}
        )
    async with connected(workspace, McpOptions(remote=bridge.url)) as session:
        providers = await session.call("list_providers", {})
        capabilities = await session.call("get_capabilities", {})
        page = await session.call("list_jobs", {"search": "REMOTE JOB"})
        detail = await session.call("get_job", {"job_id": job.id})
        preset = await session.call("apply_preset", {"name": "remote-banner"})
    assert providers.structured_content["providers"][0]["name"] == "mock"
    assert capabilities.structured_content["provider"] == "mock"
    assert [item["id"] for item in page.structured_content["items"]] == [job.id]
    [artifact] = detail.structured_content["artifacts"]
    assert artifact["url"] == f"{bridge.url}/v1/artifacts/{artifact['id']}"
    record = preset.structured_content["images"][0]
    assert (record["width"], record["height"]) == (64, 16)


async def test_an_unreachable_bridge_is_a_tool_error(workspace: Workspace) -> None:
    async with connected(workspace, McpOptions(remote="http://127.0.0.1:9")) as session:
        result = await session.call("list_providers", {})
    assert result.is_error is True
    assert "could not connect to the bridge" in result.content[0].text
