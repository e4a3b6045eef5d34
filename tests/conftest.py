"""Fixtures shared by the whole suite (each plugin module documents its own).

Registered here once, so every directory shares them: in particular one throwaway PostgreSQL
server per test session (``tests.support.postgres``). Do not import these fixtures into a
directory's conftest: pytest would treat the import as a second definition and start a
second server.
"""

from __future__ import annotations

import os

import pytest

pytest_plugins = [
    "tests.support.parallel",
    "tests.support.first_per_module",
    "tests.support.figures",
    "tests.support.codex_backend",
    "tests.support.postgres",
    "tests.support.postgres_restart",
    "tests.support.s3",
    "tests.support.storage_health",
]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail a run that skipped tests when every integration tier is installed.

    ``scripts/check`` sets ``IMAGEBRIDGE_REQUIRE_ALL_TIERS=1`` once Chromium, PostgreSQL,
    Ceph's S3 gateway, the real codex CLI and the npm ``skills`` CLI are present: a skip
    there can only mean a tier's detection broke, and a green run must not hide the tests
    it did not run. Under pytest-xdist the controller decides, from every worker's reports
    (a worker's own session sees only its share).
    """
    if os.environ.get("IMAGEBRIDGE_REQUIRE_ALL_TIERS") != "1" or hasattr(
        session.config, "workerinput"
    ):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if reporter is not None:
            reporter.write_line(
                f"IMAGEBRIDGE_REQUIRE_ALL_TIERS=1 but {len(skipped)} test(s) skipped "
                "(reasons below): the run fails",
                red=True,
            )
