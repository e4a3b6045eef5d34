"""Run every benchmark in ``bench/`` and print one table: ``name | ratio | target | ok``.

Each benchmark runs as its own subprocess (in its own process group, so a timeout also
stops the servers it started), one after another: two at once would measure each other.
A benchmark prints one figure per line as ``<name> <ratio> <target>``; the target is
``<= X`` / ``>= X`` / ``< X`` / ``> X`` (checked here) or ``report`` (shown, not judged).
Lines starting with ``#`` are notes (absolute figures, machine) and are repeated under the
table. A missed target is marked ``MISSED``; a benchmark that crashes or times out gets a
``FAILED`` row. The exit status is 0 even when targets are missed (figures on a shared
machine are noisy; the table is the report), 1 only when a benchmark failed to run.

Usage: ``.venv/bin/python bench/run.py [NAME ...]`` (names are file stems, e.g. ``memory``).
The whole run stays under ``BUDGET_S`` seconds. See ``bench/README.md`` for each figure.
Benchmarks in ``ON_REQUEST`` take longer than that budget and run only when named.
"""

from __future__ import annotations

import argparse
import operator
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
BUDGET_S = 285.0
"""The whole run must finish within 5 minutes on a 2-core machine."""
DEFAULT_TIMEOUT_S = 90.0
TIMEOUTS_S = {
    "multiinstance": 150.0,
    "overhead": 120.0,
    "memory": 120.0,
    "gateway": 150.0,
    "scaling": 1800.0,
}
NOT_BENCHMARKS = frozenset({"run"})
ON_REQUEST = frozenset({"scaling"})
"""Run only when named (``bench/run.py scaling``): several minutes each."""

COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_FIGURE = re.compile(r"^(?P<name>\S.*?)\s*:?\s+(?P<value>-?\d+(?:\.\d+)?)x?(?:\s+(?P<rest>.*))?$")
_TARGET = re.compile(r"(?P<op><=|>=|<|>)\s*(?P<bound>-?\d+(?:\.\d+)?)")


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    ratio: float | None
    target: str
    ok: str


def judge(value: float, target_text: str) -> tuple[str, str]:
    """The target as shown, and ``yes`` / ``MISSED`` / ``-`` (reported only)."""
    match = _TARGET.search(target_text)
    if match is None:
        return "report", "-"
    op, bound = match.group("op"), float(match.group("bound"))
    target = f"{op} {match.group('bound')}"
    return target, "yes" if COMPARATORS[op](value, bound) else "MISSED"


def parse_figures(output: str) -> tuple[list[Figure], list[str]]:
    """The figures a benchmark printed, and its note lines."""
    figures: list[Figure] = []
    notes: list[str] = []
    for raw in output.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            notes.append(line.lstrip("# "))
            continue
        match = _FIGURE.match(line)
        if match is None:
            continue  # a header or prose line
        value = float(match.group("value"))
        rest = (match.group("rest") or "").removeprefix("target").strip()
        target, ok = judge(value, rest)
        figures.append(Figure(match.group("name").strip(), value, target, ok))
    return figures, notes


@dataclass
class Run:
    name: str
    seconds: float
    status: str
    figures: list[Figure]
    notes: list[str]


def run_benchmark(path: Path, timeout: float) -> Run:
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a timeout stops its servers too
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        status = f"timed out after {timeout:.0f} s"
    else:
        status = "ok" if process.returncode == 0 else f"exit {process.returncode}"
    figures, notes = parse_figures(stdout or "")
    if status != "ok":
        tail = [line for line in (stderr or "").splitlines() if line.strip()][-3:]
        notes += [f"stderr: {line}" for line in tail]
    return Run(path.stem, time.monotonic() - started, status, figures, notes)


def discover(names: Sequence[str]) -> list[Path]:
    found = sorted(
        path
        for path in BENCH_DIR.glob("*.py")
        if path.stem not in NOT_BENCHMARKS and not path.stem.startswith("_")
    )
    if names:
        unknown = set(names) - {path.stem for path in found}
        if unknown:
            raise SystemExit(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        return [path for path in found if path.stem in names]
    return [path for path in found if path.stem not in ON_REQUEST]


def table(runs: list[Run]) -> str:
    rows: list[tuple[str, str, str, str]] = []
    for run in runs:
        if run.status != "ok":
            rows.append((f"{run.name} ({run.status})", "-", "-", "FAILED"))
        elif not run.figures:
            rows.append((f"{run.name} (no figures: see its notes)", "-", "-", "-"))
        for figure in run.figures:
            ratio = "-" if figure.ratio is None else f"{figure.ratio:.2f}"
            rows.append((figure.name, ratio, figure.target, figure.ok))
    header = ("name", "ratio", "target", "ok")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    lines = [
        " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    args = parser.parse_args(argv)
    budget = BUDGET_S + sum(TIMEOUTS_S[name] for name in ON_REQUEST if name in args.names)
    deadline = time.monotonic() + budget
    runs: list[Run] = []
    for path in discover(args.names):
        remaining = deadline - time.monotonic()
        if remaining < 5:
            runs.append(Run(path.stem, 0.0, "skipped: time budget spent", [], []))
            continue
        timeout = min(TIMEOUTS_S.get(path.stem, DEFAULT_TIMEOUT_S), remaining)
        print(f"running {path.name} (timeout {timeout:.0f} s) …", file=sys.stderr, flush=True)
        runs.append(run_benchmark(path, timeout))
    print(table(runs))
    print()
    for run in runs:
        print(f"{run.name}: {run.status}, {run.seconds:.1f} s")
        for note in run.notes:
            print(f"    {note}")
    missed = sum(figure.ok == "MISSED" for run in runs for figure in run.figures)
    failed = sum(run.status != "ok" for run in runs)
    total = sum(run.seconds for run in runs)
    print(f"\n{missed} target(s) missed, {failed} benchmark(s) failed; {total:.0f} s in all")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
