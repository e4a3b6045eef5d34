"""Options of the resilience suite.

``--soak-seconds N`` (or ``IMAGEBRIDGE_SOAK_SECONDS=N``) lengthens the soak test; the
option is recognised when this directory is on the command line
(``pytest tests/resilience/test_soak.py --soak-seconds 600``), the variable always.

``processes``: the bridge processes a crash test starts (it appends each), stopped when it
ends, whatever killed or left them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.bridge_server import ServerProcess


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak-seconds",
        type=float,
        default=None,
        help="how long the soak test drives its mixed workload (default 20 s)",
    )


@pytest.fixture
def processes() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    try:
        yield started
    finally:
        for process in started:
            process.stop(timeout=10)
