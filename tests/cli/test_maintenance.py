"""``config`` and ``artifacts`` (cli.rs 8, 23 and the cleanup policy)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.cli.conftest import Cli

SMALL = ("--size", "16x16")


def _generate(cli: Cli, *extra: str) -> str:
    result = cli("--json", "generate", "keep me", *SMALL, "--response-format", "artifact", *extra)
    assert result.code == 0, result.stderr
    name: str = result.json()["data"][0]["name"]
    return name


def test_artifact_repair_audits_before_conservative_mutation(cli: Cli) -> None:
    """cli.rs 8."""
    assert cli("artifacts", "repair").code == 2
    assert cli("artifacts", "repair", "--force", "--dry-run").code == 2
    name = _generate(cli)
    (cli.artifacts / name).unlink()  # the image is gone, its ownership record is orphaned
    audit = cli("--json", "artifacts", "repair", "--dry-run").json()
    assert audit["orphaned_records"] == 1 and audit["repaired"] == 0
    assert cli("--json", "artifacts", "repair", "--dry-run").json()["orphaned_records"] == 1
    repaired = cli("--json", "artifacts", "repair", "--force").json()
    assert repaired["repaired"] == 1
    assert cli("--json", "artifacts", "repair", "--dry-run").json()["scanned"] == 0


def test_repair_never_touches_changed_files(cli: Cli) -> None:
    name = _generate(cli)
    (cli.artifacts / name).write_bytes(b"not the image any more")
    report = cli("--json", "artifacts", "repair", "--force").json()
    assert report["repaired"] == 0 and report["skipped"] == 1
    assert (cli.artifacts / name).read_bytes() == b"not the image any more"


def test_cleanup_dry_run_prints_the_policy_without_opening_the_store(cli: Cli) -> None:
    result = cli("--json", "--set", "artifacts.retention.max_artifacts=5", "artifacts",
                 "cleanup", "--dry-run")  # fmt: skip
    assert result.json() == {
        "dry_run": True,
        "root": str(cli.artifacts),
        "max_age_seconds": 604800,
        "max_artifacts": 5,
        "max_scan_entries": 100000,
        "stale_temp_seconds": 3600,
    }
    assert not cli.artifacts.exists()
    assert cli("artifacts", "cleanup").code == 2


def test_cleanup_deletes_only_beyond_the_policy(cli: Cli) -> None:
    names = [_generate(cli) for _ in range(3)]
    stranger = cli.artifacts / "not-ours.png"
    stranger.write_bytes(b"x")
    result = cli("--json", "--set", "artifacts.retention.max_artifacts=1", "artifacts",
                 "cleanup", "--force")  # fmt: skip
    report = result.json()
    assert report["scanned"] == 3 and report["deleted"] == 2
    remaining = [name for name in names if (cli.artifacts / name).exists()]
    assert remaining == [names[-1]]
    assert stranger.exists()


def _leave_temp(directory: Path, age_secs: float) -> Path:
    """A hidden temp file as a writer killed between write and link leaves it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (".imagegen-bridge-tmp-" + os.urandom(12).hex())
    path.write_bytes(b"half an image")
    then = time.time() - age_secs
    os.utime(path, (then, then))
    return path


def test_cleanup_removes_crash_leftovers_older_than_the_grace(cli: Cli) -> None:
    name = _generate(cli, "--output-dir", "gallery")
    stale = [_leave_temp(cli.artifacts, 7200), _leave_temp(cli.artifacts / "gallery", 7200)]
    young = _leave_temp(cli.artifacts / "gallery", 600)
    report = cli("--json", "artifacts", "cleanup", "--force").json()
    assert report["stale_temp_files"] == 2 and report["stale_temp_files_removed"] == 2
    assert report["temp_scan_limit_reached"] is False
    assert (report["scanned"], report["deleted"]) == (1, 0)
    assert not any(path.exists() for path in stale)
    assert young.exists() and (cli.artifacts / name).exists()
    shorter = cli("--json", "--set", "artifacts.retention.stale_temp_secs=300", "artifacts",
                  "cleanup", "--force")  # fmt: skip
    assert shorter.json()["stale_temp_files_removed"] == 1 and not young.exists()


def test_repair_audits_then_removes_crash_leftovers(cli: Cli) -> None:
    _generate(cli)
    leftover = _leave_temp(cli.artifacts, 7200)
    audit = cli("--json", "artifacts", "repair", "--dry-run").json()
    assert (audit["stale_temp_files"], audit["stale_temp_files_removed"]) == (1, 0)
    assert leftover.exists()
    repaired = cli("--json", "artifacts", "repair", "--force").json()
    assert (repaired["stale_temp_files"], repaired["stale_temp_files_removed"]) == (1, 1)
    assert repaired["healthy"] == 1 and not leftover.exists()


def test_a_grace_short_enough_to_catch_live_writers_is_a_configuration_error(cli: Cli) -> None:
    result = cli("--json", "--set", "artifacts.retention.stale_temp_secs=5", "artifacts",
                 "cleanup", "--force")  # fmt: skip
    assert result.code == 2
    issues = result.error()["details"]["issues"]
    assert [issue["field"] for issue in issues] == ["artifacts.retention.stale_temp_secs"]


def test_config_origins_name_keys_never_values(cli: Cli) -> None:
    result = cli("--json", "--set", "runtime.default_timeout_ms=4321", "config", "origins",
                 env={"IMAGEGEN_BRIDGE__SERVER__MAX_BODY_BYTES": "1000"})  # fmt: skip
    origins = {item["field"]: item for item in result.json()}
    assert origins["runtime.default_timeout_ms"] == {
        "field": "runtime.default_timeout_ms",
        "source": "override",
        "key": "runtime.default_timeout_ms",
    }
    assert origins["server.max_body_bytes"]["key"] == "IMAGEGEN_BRIDGE__SERVER__MAX_BODY_BYTES"
    assert "4321" not in result.stdout and "1000" not in result.stdout


def test_config_file_from_the_environment_variable(cli: Cli) -> None:
    config = cli.write("elsewhere/bridge.toml", "[runtime]\ndefault_timeout_ms = 777\n")
    shown = cli("--json", "config", "show", env={"IMAGEGEN_BRIDGE_CONFIG": str(config)})
    assert shown.json()["runtime"]["default_timeout_ms"] == 777
    flag = cli("--json", "--config", os.path.relpath(config, cli.cwd), "config", "show")
    assert flag.json()["runtime"]["default_timeout_ms"] == 777
    missing = cli("--json", "--config", "nope.toml", "config", "check")
    assert missing.code == 2 and missing.error()["message"] == "configuration file does not exist"
