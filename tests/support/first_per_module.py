"""``--first-per-module``: of the selected tests, run only the first of every test module.

``scripts/check-install`` runs the suite's slice this way inside the unpacked sdist: every
test module is imported and one of its tests runs (its fixtures, the support code and data
files it reaches) from nothing but what the sdist holds, while the whole suite has already
run once on the working tree. The selection happens after ``-m`` and ``-k``, so the slice
honours them.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--first-per-module",
        action="store_true",
        default=False,
        help="run only the first selected test of each test module (scripts/check-install)",
    )


@pytest.hookimpl(trylast=True)  # after -m / -k deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("first_per_module"):
        return
    seen: set[Path] = set()
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (dropped if item.path in seen else kept).append(item)
        seen.add(item.path)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
