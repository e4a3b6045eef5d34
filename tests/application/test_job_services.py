"""Job services on one database file: both survive a reopen, closing is orderly."""

from __future__ import annotations

from pathlib import Path

from imagebridge.application import build_application
from imagebridge.application.job_services import JobServices
from imagebridge.config import load_config
from imagebridge.contract.enums import ImageJobStatus
from imagebridge.contract.presets import ImagePresetCreate
from imagebridge.jobs import JobManagerSettings
from tests.jobs.conftest import MOCK_ONLY, SCOPE, image_request


async def test_jobs_and_presets_share_one_file_across_restarts(tmp_path: Path) -> None:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    config = load_config(env=env, sets=MOCK_ONLY, cwd=tmp_path).config
    app = build_application(config)
    database = config.server.jobs.database
    try:
        services = await JobServices.open(
            database, app.runtime, JobManagerSettings.from_config(config.server.jobs)
        )
        job, _ = await services.jobs.submit(SCOPE, image_request())
        await services.presets.create(
            ImagePresetCreate.model_validate({"name": "fox", "template": {"prompt": "a fox"}})
        )
        await services.aclose()
        assert services.jobs.shutting_down

        reopened = await JobServices.open(database, app.runtime)
        try:
            assert (await reopened.jobs.get(SCOPE, job.id)).status is ImageJobStatus.QUEUED
            assert (await reopened.presets.get("fox")).template.prompt == "a fox"
            assert reopened.job_store.path == reopened.preset_store.path == database
        finally:
            await reopened.aclose()
    finally:
        await app.aclose()
