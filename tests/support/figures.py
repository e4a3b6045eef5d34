"""Measured figures a run reports at its end (build times, image sizes), on xdist workers too.

A fixture calls :func:`report_figure`; output is captured while tests run, so the lines are
printed in the terminal summary, one section each. On a pytest-xdist worker they travel to
the controller with the worker's output when the worker finishes, and the controller prints
them (a directory's own ``pytest_terminal_summary`` would never run there: the controller
collects nothing, so it loads no conftest below ``tests/``). Registered once, as a plugin in
``tests/conftest.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

_FIGURES = pytest.StashKey[list[tuple[str, str]]]()
_WORKER_OUTPUT = "imagebridge_figures"


def report_figure(config: pytest.Config, section: str, line: str) -> None:
    """Keep ``line`` for the end-of-run summary, under ``section``."""
    config.stash.setdefault(_FIGURES, []).append((section, line))


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[_WORKER_OUTPUT] = [list(item) for item in session.config.stash.get(_FIGURES, [])]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    figures = getattr(node, "workeroutput", {}).get(_WORKER_OUTPUT, [])
    node.config.stash.setdefault(_FIGURES, []).extend((str(s), str(line)) for s, line in figures)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    figures = terminalreporter.config.stash.get(_FIGURES, [])
    for section in dict.fromkeys(name for name, _ in figures):
        terminalreporter.section(section)
        for name, line in figures:
            if name == section:
                terminalreporter.write_line(line)
