"""The in-process backend reads the jobs a bridge on the same data directory created."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imagebridge.client import ImageBridgeClient
from tests.mcp.conftest import Workspace, connected, workspace_for
from tests.server.conftest import LiveServer, start_server


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[Workspace, LiveServer]]:
    workspace = workspace_for(tmp_path)
    live = start_server(workspace.data_dir)
    yield workspace, live
    live.stop()


async def test_jobs_of_a_bridge_on_the_same_data_directory(
    shared: tuple[Workspace, LiveServer],
) -> None:
    workspace, live = shared
    with ImageBridgeClient(live.url, env={}) as bridge:
        job = bridge.jobs.create({"prompt": "SHARED JOB", "parameters": {"size": "24x24"}})
        done = bridge.jobs.wait(job.id, timeout=20, poll_interval=0.02)
        edit_job = bridge.jobs.create(
            {
                "operation": "edit",
                "prompt": "EDIT JOB",
                "images": [{"type": "base64", "data": "aGVsbG8=" * 100}],
            }
        )
    async with connected(workspace) as session:
        page = await session.call("list_jobs", {"search": "SHARED"})
        assert [item["id"] for item in page.structured_content["items"]] == [job.id]
        detail = await session.call("get_job", {"job_id": job.id})
        assert detail.is_error is False
        [artifact] = detail.structured_content["artifacts"]
        assert artifact["id"] == done.result.data[0].id  # type: ignore[union-attr]
        assert Path(artifact["path"]).is_file()
        assert artifact["uri"].startswith("imagebridge://artifacts/")
        inline = await session.call("get_job", {"job_id": edit_job.id})
        payload = inline.structured_content["request"]["images"][0]["data"]
        assert payload == "(inline image, 800 characters)"
