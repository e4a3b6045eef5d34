"""The compose files as an operator uses them, driven by podman-compose.

``compose.yaml``: the bridge alone on its volume answers and generates. ``compose.shared.yaml``:
PostgreSQL (the CI stand-in image built from Debian's package) and two bridge replicas on a
shared artifact volume; one job goes through each replica, and each replica lists and serves
the other's job, which only a shared database and a shared artifact root make possible.
Only the image names and the published ports are changed, through the variables the files
read; every container publishes on 127.0.0.1.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.container.conftest import CANARY, BuiltImage
from tests.container.podman import ROOT, Podman, free_port, mock_job, wait_http

# The first test of a session also waits for the image build (a minute or more under load).
pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.timeout(900)]

HEADERS = {"authorization": f"Bearer {CANARY}"}


def wait_healthy(podman: Podman, container: str, timeout: float = 120) -> None:
    """Run the container's own health check until it passes (no systemd timers here)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if podman.run("healthcheck", "run", container, check=False).returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"{container} not healthy within {timeout} s:\n{podman.logs(container)}")


@contextmanager
def compose_up(
    podman: Podman, file: str, project: str, env: dict[str, str], *, first: str | None = None
) -> Iterator[None]:
    """``up --detach``; with ``first``, that service alone until healthy, as for podman-compose
    1.0, which orders starts but does not wait for ``condition: service_healthy``."""

    def compose(*args: str, check: bool = True) -> str:
        done = podman.run(
            "--project-name", project, "--file", str(ROOT / file), *args,
            program="podman-compose", env=env, cwd=ROOT, check=check, timeout=300,
        )  # fmt: skip
        return done.stdout + done.stderr

    try:
        if first is not None:
            compose("up", "--detach", first)
            wait_healthy(podman, f"{project}_{first}_1")
        compose("up", "--detach")
        yield
    except BaseException:
        for container in podman.run("ps", "--all", "--format", "{{.Names}}").stdout.split():
            if container.startswith(project):
                print(f"--- {container}\n{podman.logs(container)}")
        raise
    finally:
        compose("down", check=False)


def test_compose_yaml_runs_the_bridge_alone_on_one_volume(image: BuiltImage) -> None:
    podman = image.podman
    port = free_port()
    env = {
        "IMAGEBRIDGE_IMAGE": image.name,
        "IMAGEGEN_BRIDGE_TOKEN": CANARY,
        "IMAGEBRIDGE_PORT": str(port),
    }
    with compose_up(podman, "compose.yaml", "single", env):
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/health/live")
        job = mock_job(base, CANARY, "a compass rose")
        name = job["result"]["data"][0]["name"]
        volume = podman.inspect("volume", "inspect", "single_data")
        assert (Path(volume["Mountpoint"]) / "artifacts" / name).is_file()


def test_compose_shared_runs_two_replicas_on_postgres_and_one_artifact_volume(
    image: BuiltImage, postgres_image: str
) -> None:
    podman = image.podman
    port_a, port_b = free_port(), free_port()
    env = {
        "IMAGEBRIDGE_IMAGE": image.name,
        "IMAGEBRIDGE_POSTGRES_IMAGE": postgres_image,
        "IMAGEGEN_BRIDGE_TOKEN": CANARY,
        "IMAGEBRIDGE_PG_PASSWORD": secrets.token_hex(16),
        "IMAGEBRIDGE_PORT_A": str(port_a),
        "IMAGEBRIDGE_PORT_B": str(port_b),
    }
    with compose_up(podman, "compose.shared.yaml", "shared", env, first="db"):
        bases = {"bridge-a": f"http://127.0.0.1:{port_a}", "bridge-b": f"http://127.0.0.1:{port_b}"}
        for base in bases.values():
            # /health/live: /health/ready also wants every enabled provider ready, and
            # codex-responses has no login here.
            wait_http(f"{base}/health/live", timeout=120)
        jobs = {
            name: mock_job(base, CANARY, f"a lighthouse by {name}") for name, base in bases.items()
        }
        for name, base in bases.items():
            for other, job in jobs.items():
                seen = httpx.get(f"{base}/v1/jobs/{job['id']}", headers=HEADERS, timeout=30)
                assert seen.status_code == 200 and seen.json()["status"] == "succeeded", (
                    f"{name} does not see {other}'s job: {seen.text}"
                )
                artifact = job["result"]["data"][0]["id"]
                served = httpx.get(f"{base}/v1/artifacts/{artifact}", headers=HEADERS, timeout=30)
                assert served.status_code == 200, f"{name} cannot serve {other}'s image"
                assert served.content.startswith(b"\x89PNG")
        diagnostics = httpx.get(
            f"{bases['bridge-a']}/v1/diagnostics/extended", headers=HEADERS, timeout=30
        ).json()
        assert diagnostics["jobs"]["shared"] is True
        assert diagnostics["jobs"]["instance_id"] == "bridge-a"
