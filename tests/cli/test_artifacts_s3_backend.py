"""The CLI with ``artifacts.backend = "s3"``: local paths stay local, retention acts on the bucket.

An in-process ``generate`` answers with files on this host, so it keeps writing under
``artifacts.root`` whatever the backend. ``artifacts cleanup`` and ``artifacts repair`` act
on the configured backend: on S3 they delete expired artifacts' objects from the bucket.
``doctor`` checks that the bucket answers to the configured keys.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from imagebridge.artifacts.s3.objects import S3ObjectStore
from tests.cli.conftest import Cli
from tests.cli.test_artifact_migration import s3_env
from tests.support.s3 import S3Server

pytestmark = pytest.mark.s3


def _keys(server: S3Server, prefix: str) -> list[str]:
    async def listed() -> list[str]:
        async with S3ObjectStore(server.settings(prefix)) as objects:
            return sorted(item.key for item in await objects.list_objects("", limit=100))

    return asyncio.run(listed())


def test_local_runs_stay_local_and_retention_deletes_from_the_bucket(
    cli: Cli, s3_server: S3Server, s3_prefix: str
) -> None:
    env = s3_env(s3_server, s3_prefix)
    backend = {**env, "IMAGEGEN_BRIDGE__ARTIFACTS__BACKEND": '"s3"'}
    made = cli(
        "--json", "generate", "a fox", "--size", "16x16", "-n", "2",
        "--response-format", "artifact", "--metadata", "sidecar", env=backend,
    )  # fmt: skip
    assert made.code == 0, made.stderr
    for item in made.json()["data"]:
        assert (cli.artifacts / item["name"]).is_file()  # a local path names a local file
    assert _keys(s3_server, s3_prefix) == []

    moved = cli("--json", "artifacts", "migrate", "--to", "s3", "--force", env=env)
    assert moved.code == 0 and moved.json()["copied"] == 2, moved.stderr
    assert len(_keys(s3_server, s3_prefix)) == 6  # two images, markers, sidecars

    audit = cli("--json", "artifacts", "repair", "--dry-run", env=backend)
    assert audit.code == 0, audit.stderr
    assert (audit.json()["scanned"], audit.json()["healthy"]) == (2, 2)
    kept = cli("--json", "artifacts", "cleanup", "--force", env=backend)
    assert kept.code == 0 and kept.json()["deleted"] == 0, kept.stderr
    one = {**backend, "IMAGEGEN_BRIDGE__ARTIFACTS__RETENTION__MAX_ARTIFACTS": "1"}
    cleaned = cli("--json", "artifacts", "cleanup", "--force", env=one)
    assert cleaned.code == 0, cleaned.stderr
    assert (cleaned.json()["scanned"], cleaned.json()["deleted"]) == (2, 1)
    assert len(_keys(s3_server, s3_prefix)) == 3  # one image, its marker and sidecar
    # the filesystem's own artifacts were not the ones cleaned
    assert all((cli.artifacts / item["name"]).is_file() for item in made.json()["data"])


def _object_store_check(cli: Cli, env: dict[str, str]) -> dict[str, Any]:
    result = cli("--json", "doctor", env=env)
    checks = {item["name"]: item for item in result.json()["checks"]}
    check: dict[str, Any] = checks["artifact_object_store"]
    return check


def test_doctor_checks_the_bucket(cli: Cli, s3_server: S3Server, s3_prefix: str) -> None:
    backend = {**s3_env(s3_server, s3_prefix), "IMAGEGEN_BRIDGE__ARTIFACTS__BACKEND": '"s3"'}
    assert _object_store_check(cli, backend)["status"] == "pass"
    wrong = _object_store_check(cli, {**backend, "BRIDGE_S3_SECRET": "not-the-secret-key"})
    assert (wrong["status"], wrong["details"]["reason"]) == ("fail", "store_refused")
    assert "not-the-secret-key" not in str(wrong)
    assert "artifact_object_store" not in {
        item["name"]
        for item in cli("--json", "doctor", env=s3_env(s3_server, s3_prefix)).json()["checks"]
    }  # the filesystem backend has no bucket to check
