"""``bench/run.py``'s verdicts: a missed target says ``MISSED``, a crash says ``FAILED``.

The real benchmarks are not run here (they take minutes and measure the machine); tiny
stand-in scripts print the same output contract, ``<name> <ratio> <target>``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.resilience.harness import REPO_ROOT


@pytest.fixture(scope="module")
def bench_run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", REPO_ROOT / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_targets_are_judged_and_reports_are_not(bench_run: ModuleType) -> None:
    output = "\n".join(
        [
            "# 4096x4096 PNG, 29.1 MiB encoded",
            "memory.b64_json.c4 3.21 <=4",
            "memory.b64_json.c1 4.01 report",
            "overhead.c32.own_work_p50_ms 890.00 <= 50",
            "imagegen-bridge --help / python -c pass 7.90 report",
            "fanout.parallel_wall/latency: 1.03x target <= 1.15",
            "a header line without figures",
        ]
    )
    figures, notes = bench_run.parse_figures(output)
    verdicts = [(f.name, f.ratio, f.target, f.ok) for f in figures]
    assert verdicts == [
        ("memory.b64_json.c4", 3.21, "<= 4", "yes"),
        ("memory.b64_json.c1", 4.01, "report", "-"),
        ("overhead.c32.own_work_p50_ms", 890.0, "<= 50", "MISSED"),
        ("imagegen-bridge --help / python -c pass", 7.9, "report", "-"),
        ("fanout.parallel_wall/latency", 1.03, "<= 1.15", "yes"),
    ]
    assert notes == ["4096x4096 PNG, 29.1 MiB encoded"]


@pytest.mark.parametrize(
    ("value", "target", "ok"),
    [(4.0, "<= 4", "yes"), (4.01, "<= 4", "MISSED"), (4.0, "< 4", "MISSED"), (2.0, ">= 2", "yes")],
)
def test_the_comparison_is_the_one_written(
    bench_run: ModuleType, value: float, target: str, ok: str
) -> None:
    assert bench_run.judge(value, target)[1] == ok


def test_a_crash_or_a_timeout_is_a_failed_row(bench_run: ModuleType, tmp_path: Path) -> None:
    fine = tmp_path / "fine.py"
    fine.write_text("print('fine.ratio 0.5 <= 1')\n")
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nprint('crash.ratio 0.5 <= 1')\nsys.exit('boom')\n")
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    runs = [
        bench_run.run_benchmark(fine, 30),
        bench_run.run_benchmark(crash, 30),
        bench_run.run_benchmark(slow, 1),
    ]
    assert [run.status for run in runs] == ["ok", "exit 1", "timed out after 1 s"]
    assert any("boom" in note for note in runs[1].notes)
    table = bench_run.table(runs)
    assert "fine.ratio" in table
    assert "crash (exit 1)" in table and "slow (timed out after 1 s)" in table
    assert table.count("FAILED") == 2


def test_every_benchmark_in_the_folder_is_run(bench_run: ModuleType) -> None:
    names = {path.stem for path in bench_run.discover([])}
    scripts = {path.stem for path in (REPO_ROOT / "bench").glob("*.py")} - {"run"}
    on_disk = {name for name in scripts if not name.startswith("_")}  # _helpers are shared code
    assert names == on_disk - bench_run.ON_REQUEST  # the long ones run when named
    assert on_disk >= bench_run.ON_REQUEST
    assert [path.stem for path in bench_run.discover(["scaling"])] == ["scaling"]
    assert "memory" in names
    with pytest.raises(SystemExit, match="unknown benchmark"):
        bench_run.discover(["no-such-benchmark"])
