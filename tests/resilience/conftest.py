"""Options of the resilience suite.

``--soak-seconds N`` (or ``IMAGEBRIDGE_SOAK_SECONDS=N``) lengthens the soak test; the
option is recognised when this directory is on the command line
(``pytest tests/resilience/test_soak.py --soak-seconds 600``), the variable always.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak-seconds",
        type=float,
        default=None,
        help="how long the soak test drives its mixed workload (default 20 s)",
    )
