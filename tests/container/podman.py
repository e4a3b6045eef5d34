"""A private podman for the container tier: its own storage, runtime settings and networks.

Nothing it does touches the machine's own podman state: images, containers, volumes and
network definitions live under one temporary directory that :meth:`Podman.destroy` removes.
The settings are the ones this kind of machine needs (found by trying): ``runc`` with the
``cgroupfs`` manager (crun fails on the cgroup v1/v2 hybrid), default rlimits at or below
the host's hard limits (no CAP_SYS_RESOURCE to raise them) and file-based events (no
systemd). Containers publish ports on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("podman", "runc", "podman-compose", "mmdebstrap")
NETAVARK = Path("/usr/lib/podman/netavark")  # Debian's podman helper directory


def missing_prerequisites() -> str | None:
    """Why this tier cannot run here, or ``None`` when it can."""
    if os.geteuid() != 0:
        return "the container tier needs root (podman with runc, overlay storage)"
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if not NETAVARK.is_file():
        absent.append("netavark")
    if absent:
        return f"{', '.join(absent)} missing (scripts/install-test-deps installs them)"
    manifest = prepared()
    if manifest["missing"]:
        return (
            f"prepared inputs missing: {', '.join(manifest['missing'])} "
            "(scripts/container-prepare makes them; scripts/check runs it)"
        )
    return None


def prepared() -> dict[str, Any]:
    """scripts/container-prepare's manifest: the bases, the wheelhouse, what is missing."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "container-prepare"), "--print"],
        capture_output=True,
        text=True,
        check=True,
    )
    manifest: dict[str, Any] = json.loads(done.stdout)
    return manifest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Podman:
    work: Path
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, work: Path) -> Podman:
        for name in ("storage", "runroot", "tmp", "networks"):
            (work / name).mkdir(parents=True, exist_ok=True)
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nofile = hard if hard != resource.RLIM_INFINITY else 1048576
        (work / "containers.conf").write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc=16384:16384"]\n'
            "[network]\n"
            # netavark + aardvark-dns: compose services find each other by name (CNI
            # would need the dnsname plugin, which Debian 12 does not package).
            'network_backend = "netavark"\n'
            f'network_config_dir = "{work / "networks"}"\n'
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n',
            encoding="utf-8",
        )
        (work / "storage.conf").write_text(
            "[storage]\n"
            'driver = "overlay"\n'
            f'graphroot = "{work / "storage"}"\n'
            f'runroot = "{work / "runroot"}"\n',
            encoding="utf-8",
        )
        (work / "registries.conf").write_text("unqualified-search-registries = []\n")
        env = {
            **os.environ,
            "CONTAINERS_CONF": str(work / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(work / "storage.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(work / "registries.conf"),
            "TMPDIR": str(work / "tmp"),
        }
        return cls(work, env)

    def run(
        self,
        *args: str,
        check: bool = True,
        timeout: float = 120,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        program: str = "podman",
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [program, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**self.env, **(env or {})},
            cwd=cwd,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{program} {' '.join(args)} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def inspect(self, *args: str) -> Any:
        return json.loads(self.run(*args).stdout)[0]

    def logs(self, name: str) -> str:
        done = self.run("logs", name, check=False)
        return (done.stdout + done.stderr)[-4000:]

    def destroy(self) -> None:
        """Remove every container, image and volume of this store, then the store itself."""
        self.run("rm", "--all", "--force", "--time", "0", check=False)
        self.run("volume", "rm", "--all", "--force", check=False)
        self.run("rmi", "--all", "--force", check=False, timeout=300)
        # Podman leaves its overlay folder bind-mounted on itself (sometimes several times
        # over) and may leave layers mounted: unmount, deepest first, until nothing is left.
        for _ in range(100):
            table = Path("/proc/self/mounts").read_text().splitlines()
            inside = sorted(
                {line.split()[1] for line in table if line.split()[1].startswith(f"{self.work}/")},
                reverse=True,
            )
            if not inside:
                break
            for point in inside:
                subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
        shutil.rmtree(self.work, ignore_errors=True)


class Inspects(Protocol):
    """An engine whose ``inspect`` reads podman's or Docker's JSON (the same overlay fields)."""

    def inspect(self, *args: str) -> Any: ...


def layer_dirs(engine: Inspects, *inspect_args: str) -> list[Path]:
    """The overlay directories of an image's layers, or of a container's own writable layer."""
    data = engine.inspect(*inspect_args)["GraphDriver"]["Data"]
    if inspect_args[0] == "container":
        return [Path(data["UpperDir"])]
    lower = [Path(d) for d in data.get("LowerDir", "").split(":") if d]
    return [*lower, Path(data["UpperDir"])]


def walk_files(roots: Sequence[Path]) -> Iterator[Path]:
    """Every regular file and every directory below ``roots`` (symlinks not followed)."""
    for root in roots:
        for directory, dirnames, filenames in os.walk(root):
            base = Path(directory)
            for name in dirnames:
                yield base / name
            for name in filenames:
                yield base / name


def files_holding(roots: Sequence[Path], needle: bytes) -> list[str]:
    """Regular files below ``roots`` whose bytes contain ``needle``."""
    found: list[str] = []
    for path in walk_files(roots):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if needle in data:
            found.append(str(path))
    return found


def wait_http(url: str, *, headers: Mapping[str, str] | None = None, timeout: float = 90) -> None:
    """Poll ``url`` until it answers 200 (a slow, shared machine may take a while)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(url, headers=headers, timeout=5)
            if answer.status_code == 200:
                return
            last = answer.status_code
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.25)
    raise AssertionError(f"{url} did not answer 200 within {timeout} s (last: {last!r})")


def mock_job(base: str, token: str, prompt: str, *, timeout: float = 90) -> dict[str, Any]:
    """Submit one mock job through ``base`` and wait until it has succeeded."""
    headers = {"authorization": f"Bearer {token}"}
    body = {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"n": 1, "size": "256x256"},
        "routing": {"provider": "mock"},
    }
    created = httpx.post(f"{base}/v1/jobs", json=body, headers=headers, timeout=30)
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = httpx.get(
            f"{base}/v1/jobs/{job_id}", headers=headers, timeout=30
        ).json()
        if job["status"] not in ("queued", "running"):
            assert job["status"] == "succeeded", job
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish within {timeout} s")
