"""The shipped Prometheus rules (deploy/prometheus/rules.yml) are valid, and each alert
fires and stays quiet where its unit tests say (deploy/prometheus/rules_test.yml)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.prometheus_server import missing_binaries

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.skipif(bool(missing_binaries()), reason=f"missing: {missing_binaries()}"),
]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_checks_the_rules() -> None:
    result = _promtool("check", "rules", str(DEPLOY / "rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = _promtool("test", "rules", str(DEPLOY / "rules_test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    rules = (DEPLOY / "rules.yml").read_text()
    tests = (DEPLOY / "rules_test.yml").read_text()
    alerts = re.findall(r"^\s+- alert: (\S+)", rules, re.MULTILINE)
    assert len(alerts) >= 9
    for alert in alerts:
        cases = re.findall(
            rf"- alertname: {alert}\b[^\n]*\n\s+eval_time: \S+\n\s+exp_alerts:(.*)", tests
        )
        quiet = [case for case in cases if case.strip().startswith("[]")]
        firing = [case for case in cases if not case.strip()]
        assert quiet and firing, alert


def test_a_wrong_threshold_fails_the_unit_tests(tmp_path: Path) -> None:
    """The unit tests can fail: the error-rate alert at a threshold above the test's 20%."""
    rules = (DEPLOY / "rules.yml").read_text()
    (tmp_path / "rules.yml").write_text(
        rules.replace('rate_limited"} > 0.1', 'rate_limited"} > 0.3')
    )
    (tmp_path / "rules_test.yml").write_text((DEPLOY / "rules_test.yml").read_text())
    result = _promtool("test", "rules", str(tmp_path / "rules_test.yml"))
    assert result.returncode != 0
    assert "ImagegenBridgeErrorRateHigh" in result.stdout + result.stderr
