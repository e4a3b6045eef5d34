"""The bridge image as an operator runs it: token, volume, published port, restart, SIGTERM.

One container (``served``) is started the way docs/deployment.md says — only a bearer
token and a volume, the port published on 127.0.0.1 — and one mock image is generated
through it. The tests then look at it from outside: the file on the volume, the process
user, the history after a restart, the exit after SIGTERM, and what the image's and the
container's layers hold (no compiler, no ``.git``, no secret).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.container.conftest import CANARY, BuiltImage
from tests.container.podman import (
    files_holding,
    free_port,
    layer_dirs,
    mock_job,
    wait_http,
    walk_files,
)
from tests.support.mock_issuer import CLIENT_ID, MockIssuer

# The first test of a session also waits for the image build (a minute or more under load).
pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.timeout(900)]

GRACE_SECS = 10  # runtime.shutdown_grace_ms's default, which the image keeps
BRIDGE_UID = 10001
# What a compiler toolchain leaves behind: drivers, the C compiler proper, the assembler.
COMPILER = re.compile(r"^(gcc|g\+\+|cc|c\+\+|clang|cc1|cc1plus|as|ld|x86_64-linux-gnu-gcc.*)$")


@dataclass
class Served:
    image: BuiltImage
    name: str
    volume: str
    base: str
    job: dict[str, Any]
    artifact: bytes

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {CANARY}"}

    def volume_dir(self) -> Path:
        inspected = self.image.podman.inspect("volume", "inspect", self.volume)
        return Path(inspected["Mountpoint"])


@pytest.fixture(scope="module")
def served(image: BuiltImage, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    podman = image.podman
    port = free_port()
    name, volume = "bridge-single", "bridge-single-data"
    # A borrowed codex login mounted read-only, as documented: its secret must stay out of
    # every layer too.
    codex_home = tmp_path_factory.mktemp("codex-home")
    (codex_home / "auth.json").write_text(f'{{"tokens": {{"access_token": "{CANARY}"}}}}\n')
    podman.run(
        "run", "--detach", "--name", name,
        "--publish", f"127.0.0.1:{port}:8787",
        "--env", f"IMAGEGEN_BRIDGE_TOKEN={CANARY}",
        "--volume", f"{volume}:/data",
        "--volume", f"{codex_home}:/codex:ro", "--env", "CODEX_HOME=/codex",
        image.name,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health/live")
        job = mock_job(base, CANARY, "a paper fox on a shelf")
        item = job["result"]["data"][0]
        answer = httpx.get(f"{base}/v1/artifacts/{item['id']}", headers={
            "authorization": f"Bearer {CANARY}"}, timeout=30)  # fmt: skip
        assert answer.status_code == 200, answer.text
        yield Served(image, name, volume, base, job, answer.content)
    except BaseException:
        print(podman.logs(name))
        raise
    finally:
        podman.run("rm", "--force", "--time", "0", name, check=False)


def test_without_a_token_the_image_refuses_to_start_and_names_the_variable(
    image: BuiltImage,
) -> None:
    done = image.podman.run("run", "--rm", image.name, check=False, timeout=120)
    assert done.returncode != 0
    assert "bearer token" in done.stderr
    assert "Set IMAGEGEN_BRIDGE_TOKEN " in done.stderr


def test_health_check_and_mock_generation_through_the_published_port(served: Served) -> None:
    assert served.artifact.startswith(b"\x89PNG\r\n\x1a\n")
    assert httpx.get(f"{served.base}/v1/jobs", timeout=10).status_code == 401
    healthcheck = served.image.podman.run("healthcheck", "run", served.name, check=False)
    assert healthcheck.returncode == 0, healthcheck.stdout + healthcheck.stderr


def test_the_image_file_is_on_the_volume(served: Served) -> None:
    item = served.job["result"]["data"][0]
    on_volume = served.volume_dir() / "artifacts" / item["name"]
    assert on_volume.read_bytes() == served.artifact
    assert on_volume.stat().st_uid == BRIDGE_UID
    assert (served.volume_dir() / "jobs.sqlite3").is_file()


def test_the_server_process_is_not_root(served: Served) -> None:
    status = served.image.podman.run("exec", served.name, "cat", "/proc/1/status").stdout
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    assert {int(uid) for uid in uids} == {BRIDGE_UID}
    config = served.image.podman.inspect("image", "inspect", served.image.name)["Config"]
    assert config["User"] == f"{BRIDGE_UID}:{BRIDGE_UID}"


def test_the_job_history_survives_a_restart(served: Served) -> None:
    podman = served.image.podman
    podman.run("restart", "--time", str(GRACE_SECS + 20), served.name, timeout=120)
    wait_http(f"{served.base}/health/live")
    job_id = served.job["id"]
    again = httpx.get(f"{served.base}/v1/jobs/{job_id}", headers=served.headers, timeout=30)
    assert again.status_code == 200 and again.json()["status"] == "succeeded"
    listed = httpx.get(f"{served.base}/v1/jobs", headers=served.headers, timeout=30).json()
    assert job_id in [entry["id"] for entry in listed["items"]]
    artifact_id = served.job["result"]["data"][0]["id"]
    image = httpx.get(f"{served.base}/v1/artifacts/{artifact_id}", headers=served.headers)
    assert image.content == served.artifact


def test_no_secret_lands_in_a_layer_of_the_image_or_the_container(served: Served) -> None:
    podman = served.image.podman
    image_layers = layer_dirs(podman, "image", "inspect", served.image.name)
    container_layer = layer_dirs(podman, "container", "inspect", served.name)
    for layers in (image_layers, container_layer):
        assert files_holding(layers, CANARY.encode()) == []
        assert [str(p) for p in walk_files(layers) if p.name in ("auth.json", ".env")] == []
    inspected = podman.run("image", "inspect", served.image.name).stdout
    history = podman.run("history", "--no-trunc", served.image.name).stdout
    assert CANARY not in inspected and CANARY not in history


def test_the_image_holds_no_build_tools_and_no_git(image: BuiltImage) -> None:
    layers = layer_dirs(image.podman, "image", "inspect", image.name)
    paths = list(walk_files(layers))
    assert [str(p) for p in paths if p.name == ".git"] == []
    assert [str(p) for p in paths if COMPILER.match(p.name) and p.is_file()] == []
    assert [str(p) for p in paths if p.match("opt/venv/bin/pip*")] == []
    done = image.podman.run(
        "run", "--rm", "--entrypoint", "python3", image.name, "-c",
        "import shutil; print([t for t in ('gcc', 'cc', 'make', 'pip', 'git') if shutil.which(t)])",
    )  # fmt: skip
    assert done.stdout.strip() == "[]"


def test_the_image_declares_what_operators_rely_on(image: BuiltImage) -> None:
    inspected = image.podman.inspect("image", "inspect", image.name)
    config = inspected["Config"]
    assert "8787/tcp" in config["ExposedPorts"]
    assert "/data" in config["Volumes"]
    assert config["StopSignal"] == "SIGTERM"
    assert "/health/live" in " ".join(inspected["Healthcheck"]["Test"])
    labels = config["Labels"]
    for key in ("title", "description", "licenses", "version", "revision", "created"):
        assert labels.get(f"org.opencontainers.image.{key}"), key
    assert config["Entrypoint"] == ["imagegen-bridge"] and config["Cmd"] == ["serve"]


def test_sigterm_stops_the_bridge_with_exit_0_within_the_grace(served: Served) -> None:
    podman = served.image.podman
    started = time.monotonic()
    # podman stop sends the image's STOPSIGNAL and waits up to --time before SIGKILL.
    podman.run("stop", "--time", str(GRACE_SECS + 20), served.name, timeout=120)
    took = time.monotonic() - started
    state = podman.inspect("container", "inspect", served.name)["State"]
    assert state["ExitCode"] == 0, podman.logs(served.name)
    assert took < GRACE_SECS + 5, f"stopping took {took:.1f} s"


def test_the_device_code_login_inside_the_container_lands_on_the_volume(
    image: BuiltImage,
) -> None:
    podman = image.podman
    name, volume = "bridge-login", "bridge-login-data"
    with MockIssuer() as issuer:
        # Host networking inside the tier's namespace: the container's 127.0.0.1 is the
        # test's, where the mock issuer listens; nothing else is reachable.
        done = podman.run(
            "run", "--name", name, "--network=host", "--volume", f"{volume}:/data",
            "--env", f"IMAGEGEN_BRIDGE__ACCOUNTS__LOGIN__ISSUER={issuer.origin}",
            "--env", f"IMAGEGEN_BRIDGE__ACCOUNTS__LOGIN__TOKEN_URL={issuer.token_url}",
            "--env", f"IMAGEGEN_BRIDGE__ACCOUNTS__LOGIN__CLIENT_ID={CLIENT_ID}",
            "--env", "IMAGEGEN_BRIDGE__ACCOUNTS__LOGIN__DEVICE_CODE_TIMEOUT_SECS=60",
            image.name, "login",
            check=False, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{issuer.origin}/codex/device" in done.stdout + done.stderr
        access = issuer.issued_access_tokens[-1]
    try:
        mountpoint = Path(podman.inspect("volume", "inspect", volume)["Mountpoint"])
        stored = mountpoint / "accounts" / "default" / "auth.json"
        assert access in stored.read_text()
        assert stored.stat().st_uid == BRIDGE_UID and stored.stat().st_mode & 0o777 == 0o600
        container_layer = layer_dirs(podman, "container", "inspect", name)
        assert files_holding(container_layer, access.encode()) == []
    finally:
        podman.run("rm", "--force", "--time", "0", name, check=False)
