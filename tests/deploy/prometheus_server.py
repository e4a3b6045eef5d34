"""Debian's ``prometheus`` server for one test module, on 127.0.0.1, and its queries.

:func:`running_prometheus` writes a configuration (the bridges to scrape, with the admin's
bearer, and the shipped rule files), starts ``prometheus`` on a free loopback port with a
throwaway TSDB, waits for ``/-/ready`` and stops it (SIGTERM, then SIGKILL) when the block
ends. Tests skip, saying so, only when the binaries are missing (``scripts/install-test-deps``
installs the ``prometheus`` package, which brings ``promtool``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.waiting import STARTUP_S

__all__ = ["Prometheus", "missing_binaries", "running_prometheus"]


def missing_binaries() -> str:
    """What is missing to run these tests (``""`` when nothing is)."""
    missing = [name for name in ("prometheus", "promtool") if shutil.which(name) is None]
    return ", ".join(missing)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Prometheus:
    url: str

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result vector; a query Prometheus refuses raises."""
        params: dict[str, str] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        response = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=30)
        body = response.json()
        if response.status_code != 200 or body.get("status") != "success":
            raise AssertionError(f"{expr!r}: {response.status_code} {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def rules(self) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.url}/api/v1/rules", timeout=30)
        response.raise_for_status()
        return [rule for group in response.json()["data"]["groups"] for rule in group["rules"]]


@contextlib.contextmanager
def running_prometheus(
    directory: Path, targets: Sequence[str], bearer: str, rule_files: Sequence[Path]
) -> Iterator[Prometheus]:
    """Prometheus scraping ``targets`` (``host:port``) every second as job ``bridge``."""
    port = _free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {
                "job_name": "bridge",
                "metrics_path": "/metrics",
                "authorization": {"credentials": bearer},
                "static_configs": [{"targets": list(targets)}],
            }
        ],
    }
    config_file = directory / "prometheus.yml"
    config_file.write_text(json.dumps(config))  # YAML is a superset of JSON
    log = (directory / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config_file}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.console.templates=/dev/null",
            "--web.console.libraries=/dev/null",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited: {(directory / 'prometheus.log').read_text()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready")
            time.sleep(0.1)
        yield Prometheus(url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
