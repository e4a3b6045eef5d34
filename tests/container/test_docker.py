"""The image under Docker, run exactly as README.md and docs/deployment.md say.

``docker build -f Containerfile`` (the classic builder, reading ``.dockerignore``), then
``docker run`` with only the bearer token and a volume, the port published on 127.0.0.1,
and ``docker-compose`` with ``compose.yaml``. The podman tests (test_image.py,
test_compose.py) cover the rest of the image's behaviour; these prove the documented Docker
commands do the same on Docker's own builder, runtime defaults and proxy.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.container.conftest import CANARY, DockerImage
from tests.container.podman import files_holding, free_port, layer_dirs, mock_job, wait_http

# The first test of a session also waits for the image build (a minute or more under load).
pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.timeout(900)]

HEADERS = {"authorization": f"Bearer {CANARY}"}
BRIDGE_UID = 10001
GRACE_SECS = 10  # runtime.shutdown_grace_ms's default, which the image keeps


@dataclass
class Running:
    image: DockerImage
    name: str
    volume: str
    base: str
    job: dict[str, Any]
    artifact: bytes


@pytest.fixture(scope="module")
def documented_run(docker_image: DockerImage) -> Iterator[Running]:
    """The README's ``docker run``, only the host port (ephemeral) and image name changed."""
    docker = docker_image.docker
    port = free_port()
    name, volume = "imagebridge", "imagebridge-data"
    docker.run(
        "run", "-d", "--name", name, "--stop-timeout", "30",
        "-p", f"127.0.0.1:{port}:8787",
        "-e", f"IMAGEGEN_BRIDGE_TOKEN={CANARY}",
        "-v", f"{volume}:/data",
        docker_image.name,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health/live")
        job = mock_job(base, CANARY, "a kite over a harbour")
        item = job["result"]["data"][0]
        answer = httpx.get(f"{base}/v1/artifacts/{item['id']}", headers=HEADERS, timeout=30)
        assert answer.status_code == 200, answer.text
        yield Running(docker_image, name, volume, base, job, answer.content)
    except BaseException:
        print(docker.logs(name))
        raise
    finally:
        docker.run("rm", "--force", name, check=False)


def test_docker_run_as_documented_answers_and_generates_with_the_mock(
    documented_run: Running,
) -> None:
    docker = documented_run.image.docker
    assert httpx.get(f"{documented_run.base}/health/live", timeout=10).json() == {"status": "live"}
    assert httpx.get(f"{documented_run.base}/v1/jobs", timeout=10).status_code == 401
    assert documented_run.artifact.startswith(b"\x89PNG\r\n\x1a\n")
    volume = docker.inspect("volume", "inspect", documented_run.volume)
    on_volume = (
        Path(volume["Mountpoint"]) / "artifacts" / documented_run.job["result"]["data"][0]["name"]
    )
    assert on_volume.read_bytes() == documented_run.artifact
    assert on_volume.stat().st_uid == BRIDGE_UID
    # The image's HEALTHCHECK command, as Docker would run it inside the container.
    test = docker.inspect("container", "inspect", documented_run.name)["Config"]["Healthcheck"][
        "Test"
    ]
    assert test[0] == "CMD"
    assert docker.run("exec", documented_run.name, *test[1:], check=False).returncode == 0
    status = docker.run("exec", documented_run.name, "cat", "/proc/1/status").stdout
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    assert {int(uid) for uid in uids} == {BRIDGE_UID}


def test_docker_build_keeps_the_planted_secrets_out_of_every_layer(
    documented_run: Running,
) -> None:
    docker = documented_run.image.docker
    layers = layer_dirs(docker, "image", "inspect", documented_run.image.name)
    layers += layer_dirs(docker, "container", "inspect", documented_run.name)
    assert files_holding(layers, CANARY.encode()) == []
    history = docker.run("history", "--no-trunc", documented_run.image.name).stdout
    assert CANARY not in history


def test_docker_stop_ends_the_bridge_with_exit_0_within_the_grace(
    documented_run: Running,
) -> None:
    docker = documented_run.image.docker
    started = time.monotonic()
    docker.run("stop", documented_run.name, timeout=120)  # --stop-timeout 30 from the run
    took = time.monotonic() - started
    state = docker.inspect("container", "inspect", documented_run.name)["State"]
    assert state["ExitCode"] == 0, docker.logs(documented_run.name)
    assert took < GRACE_SECS + 5, f"stopping took {took:.1f} s"


def test_docker_compose_with_compose_yaml_answers_and_generates(
    docker_image: DockerImage,
) -> None:
    docker = docker_image.docker
    port = free_port()
    env = {
        "IMAGEBRIDGE_IMAGE": docker_image.name,
        "IMAGEGEN_BRIDGE_TOKEN": CANARY,
        "IMAGEBRIDGE_PORT": str(port),
    }
    root = Path(__file__).resolve().parents[2]

    def compose(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return docker.run(
            "--project-name", "dockersingle", "--file", str(root / "compose.yaml"), *args,
            program="docker-compose", env=env, cwd=root, check=check, timeout=300,
        )  # fmt: skip

    try:
        compose("up", "--detach", "--no-build")
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/health/live")
        job = mock_job(base, CANARY, "a compass rose")
        volume = docker.inspect("volume", "inspect", "dockersingle_data")
        artifact = Path(volume["Mountpoint"]) / "artifacts" / job["result"]["data"][0]["name"]
        assert artifact.read_bytes().startswith(b"\x89PNG")
        container = compose("ps", "--quiet", "bridge").stdout.strip()
        compose("stop")
        state = docker.inspect("container", "inspect", container)["State"]
        assert state["Running"] is False and state["ExitCode"] == 0
    except BaseException:
        logs = compose("logs", check=False)
        print((logs.stdout + logs.stderr)[-4000:])
        raise
    finally:
        compose("down", "--volumes", check=False)
