"""The container tier: one private podman (and dockerd), the bridge image built once, offline.

The image is built from the repository's own Containerfile on a local Debian base (no
registry is reachable in CI) with wheels from a local folder, both made beforehand by
scripts/container-prepare (the tier itself needs no network: scripts/check runs it inside
the loopback-only namespace, and the build runs with ``--network=none``). The build
context is a copy of what a user's checkout holds plus planted secrets (a token in
``.env``, a codex ``auth.json``, a ``.git`` folder), so the secret checks prove the
ignore files keep them out. Build time and image size are printed in the test summary.

The engines are package fixtures: they stop when the suite leaves tests/container, so the
rest of the suite runs in a namespace holding loopback again (dockerd's bridges removed).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from imagebridge import __version__
from tests.container import docker as docker_engine
from tests.container.docker import Docker, serve_folder
from tests.container.podman import ROOT, Podman, missing_prerequisites, prepared
from tests.support.figures import report_figure

IMAGE = "localhost/imagebridge:ci"
PYTHON_BASE = "localhost/imagebridge-ci/python-base:latest"
POSTGRES_BASE = "localhost/imagebridge-ci/postgres-base:latest"
POSTGRES_IMAGE = "localhost/imagebridge-ci/postgres:15"
DOCKER_IMAGE = "imagebridge:ci"
DOCKER_PYTHON_BASE = "imagebridge-ci/python-base:latest"
# Planted into the build context and used as the running container's token: it must never
# be found in a layer of the image or of the container.
CANARY = "canary-3f9d0c5e7a1b4e28-secret"
CONTEXT_FILES = (
    "Containerfile",
    ".containerignore",
    ".dockerignore",
    "README.md",
    "pyproject.toml",
)


@dataclass(frozen=True)
class BuiltImage:
    podman: Podman
    name: str
    build_secs: float
    size_bytes: int


def _report(config: pytest.Config, line: str) -> None:
    """A measured figure for the end-of-run summary (tests/support/figures.py)."""
    report_figure(config, "container tier", line)


@pytest.fixture(scope="package")
def podman() -> Iterator[Podman]:
    reason = missing_prerequisites()
    if reason:
        pytest.skip(reason)
    manifest = prepared()
    engine = Podman.create(Path(tempfile.mkdtemp(prefix="imagebridge-podman-")))
    try:
        engine.run("import", "--quiet", manifest["python_base"], PYTHON_BASE, timeout=300)
        yield engine
    finally:
        engine.destroy()


def _build_context(into: Path) -> Path:
    """What the Containerfile may read, plus secrets a careless checkout might hold."""
    for name in CONTEXT_FILES:
        shutil.copy2(ROOT / name, into / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "container", into / "container", ignore=ignore)
    shutil.copytree(ROOT / "src", into / "src", ignore=ignore)
    (into / ".env").write_text(f"IMAGEGEN_BRIDGE_TOKEN={CANARY}\n")
    (into / "auth.json").write_text(f'{{"tokens": {{"access_token": "{CANARY}"}}}}\n')
    (into / ".codex").mkdir()
    (into / ".codex" / "auth.json").write_text(f'{{"OPENAI_API_KEY": "{CANARY}"}}\n')
    # Inside the package folder: without the ignore rules these would be in the wheel, and
    # so in the final image's venv.
    package = into / "src" / "imagebridge"
    (package / ".env").write_text(f"IMAGEGEN_BRIDGE_TOKEN={CANARY}\n")
    (package / "auth.json").write_text(f'{{"tokens": {{"refresh_token": "{CANARY}"}}}}\n')
    (into / ".git").mkdir()
    (into / ".git" / "config").write_text(f"[credential]\n\thelper = store {CANARY}\n")
    (into / "data").mkdir()
    (into / "data" / "jobs.sqlite3").write_text(CANARY)
    return into


@pytest.fixture(scope="package")
def image(podman: Podman, request: pytest.FixtureRequest) -> BuiltImage:
    context = _build_context(Path(tempfile.mkdtemp(prefix="ctx-", dir=podman.work)))
    wheelhouse = prepared()["wheelhouse"]
    started = time.monotonic()
    podman.run(
        "build",
        "--format=docker",  # HEALTHCHECK and STOPSIGNAL are Docker-format fields
        "--network=none",
        f"--volume={wheelhouse}:/wheelhouse:ro",
        "--build-arg=WHEELHOUSE=/wheelhouse",
        f"--build-arg=BASE_IMAGE={PYTHON_BASE}",
        f"--build-arg=VERSION={__version__}",
        "--tag",
        IMAGE,
        str(context),
        timeout=900,
    )
    build_secs = time.monotonic() - started
    size = int(podman.run("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    base = int(podman.run("image", "inspect", "--format", "{{.Size}}", PYTHON_BASE).stdout)
    _report(
        request.config,
        f"bridge image built in {build_secs:.1f} s: {size / 1e6:.0f} MB "
        f"({(size - base) / 1e6:.0f} MB over the {base / 1e6:.0f} MB Debian python3 base)",
    )
    return BuiltImage(podman, IMAGE, build_secs, size)


@pytest.fixture(scope="package")
def postgres_image(podman: Podman, request: pytest.FixtureRequest) -> str:
    started = time.monotonic()
    podman.run("import", "--quiet", prepared()["postgres_base"], POSTGRES_BASE, timeout=300)
    podman.run(
        "build",
        "--network=none",
        f"--build-arg=BASE_IMAGE={POSTGRES_BASE}",
        "--tag",
        POSTGRES_IMAGE,
        str(ROOT / "tests" / "container" / "postgres"),
        timeout=600,
    )
    _report(
        request.config,
        f"PostgreSQL stand-in imported and built in {time.monotonic() - started:.1f} s",
    )
    return POSTGRES_IMAGE


@dataclass(frozen=True)
class DockerImage:
    docker: Docker
    name: str


@pytest.fixture(scope="package")
def docker() -> Iterator[Docker]:
    """A private dockerd (tests/container/docker.py), started once and removed at the end."""
    reason = docker_engine.missing_prerequisites()
    if reason:
        pytest.skip(reason)
    engine = Docker.start(Path(tempfile.mkdtemp(prefix="imagebridge-docker-")))
    try:
        engine.run("import", prepared()["python_base"], DOCKER_PYTHON_BASE, timeout=300)
        yield engine
    finally:
        engine.destroy()


@pytest.fixture(scope="package")
def docker_image(docker: Docker, request: pytest.FixtureRequest) -> DockerImage:
    """The image built by ``docker build`` (classic builder) from the same planted context.

    Docker reads ``.dockerignore`` where podman reads ``.containerignore``; the wheelhouse
    reaches pip over 127.0.0.1 (``--network=host`` is the loopback-only namespace).
    """
    context = _build_context(Path(tempfile.mkdtemp(prefix="ctx-", dir=docker.work)))
    started = time.monotonic()
    with serve_folder(Path(prepared()["wheelhouse"])) as wheelhouse:
        docker.run(
            "build",
            "--network=host",
            f"--build-arg=WHEELHOUSE={wheelhouse}",
            f"--build-arg=BASE_IMAGE={DOCKER_PYTHON_BASE}",
            f"--build-arg=VERSION={__version__}",
            "--file", str(context / "Containerfile"),
            "--tag", DOCKER_IMAGE,
            str(context),
            timeout=900,
        )  # fmt: skip
    build_secs = time.monotonic() - started
    size = int(docker.run("image", "inspect", "--format", "{{.Size}}", DOCKER_IMAGE).stdout)
    _report(
        request.config,
        f"bridge image built by docker build (classic builder) in {build_secs:.1f} s: "
        f"{size / 1e6:.0f} MB",
    )
    return DockerImage(docker, DOCKER_IMAGE)
