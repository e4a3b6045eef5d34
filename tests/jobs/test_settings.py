"""Job manager settings: spec defaults, range checks, retention period, config mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imagebridge.config import load_config
from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.jobs import JobManagerSettings


def test_defaults_are_the_spec_defaults() -> None:
    settings = JobManagerSettings()
    assert (settings.max_pending, settings.max_running) == (1_000, 4)
    assert settings.retention_secs == 7 * 24 * 3600
    assert settings.max_retained == 10_000
    assert settings.max_retained_bytes == 256 * 1024 * 1024
    assert settings.max_database_bytes == 1024 * 1024 * 1024
    assert settings.partial_preview_max_bytes == 16 * 1024 * 1024
    assert settings.shutdown_timeout_s == 31 * 60


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_pending", 0),
        ("max_running", 0),
        ("max_running", -1),
        ("retention_secs", True),
        ("max_retained", 1.5),
        ("partial_preview_max_bytes", 0),
        ("shutdown_timeout_s", -1),
        ("shutdown_timeout_s", float("nan")),
    ],
)
def test_out_of_range_values_are_configuration_errors(field: str, value: Any) -> None:
    with pytest.raises(BridgeError) as caught:
        JobManagerSettings(**{field: value})
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.field == f"server.jobs.{field}"


def test_a_zero_shutdown_timeout_is_allowed() -> None:
    assert JobManagerSettings(shutdown_timeout_s=0).shutdown_timeout_s == 0


@pytest.mark.parametrize(
    ("retention", "period"), [(1, 1.0), (3, 1.5), (100, 50.0), (121, 60.0), (604_800, 60.0)]
)
def test_retention_period_is_half_the_retention_within_one_to_sixty_seconds(
    retention: int, period: float
) -> None:
    assert JobManagerSettings(retention_secs=retention).retention_period_s == period


def test_settings_come_from_the_config_section(tmp_path: Path) -> None:
    config = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)},
        sets=["server.jobs.max_pending=5", "server.jobs.max_running=2"],
        cwd=tmp_path,
    ).config
    settings = JobManagerSettings.from_config(config.server.jobs, shutdown_timeout_s=3)
    assert (settings.max_pending, settings.max_running, settings.shutdown_timeout_s) == (5, 2, 3)
    assert settings.max_database_bytes == config.server.jobs.max_database_bytes
