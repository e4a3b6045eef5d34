"""CLI startup benchmark: how much a bare ``imagegen-bridge --help`` costs.

Prints the median wall time of ``imagegen-bridge --help`` divided by the median wall time
of ``python -c pass`` (the interpreter's own start-up), both measured in this run. The
CLI builds only the root of its command tree for ``--help`` and imports the engine,
config and storage layers only inside the command that needs them; this ratio is what
keeps that honest. A second ratio shows the floor set by importing typer itself.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 15
PYTHON = sys.executable
SCRIPT = Path(PYTHON).with_name("imagegen-bridge")


def median_wall_time(command: list[str], runs: int = RUNS) -> float:
    """Median seconds of ``runs`` executions (one warm-up run is discarded)."""
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    cli = [str(SCRIPT), "--help"] if SCRIPT.exists() else [PYTHON, "-m", "imagebridge", "--help"]
    baseline = median_wall_time([PYTHON, "-c", "pass"])
    helped = median_wall_time(cli)
    typer_only = median_wall_time([PYTHON, "-c", "import typer"])
    print(f"imagegen-bridge --help / python -c pass : {helped / baseline:.1f}x")
    print(f"python -c 'import typer' / python -c pass: {typer_only / baseline:.1f}x (floor)")


if __name__ == "__main__":
    main()
