"""A private Docker daemon for the container tier: its own containerd, storage and socket.

Debian's ``docker.io`` (dockerd 20.10, containerd, runc) and ``docker-compose`` (1.29) are
what CI can install without a registry. The daemon started here shares nothing with a
Docker the machine may run: its own containerd (started first, so dockerd never picks up a
system one at /run/containerd), data root, exec root, socket and an empty daemon.json, all
under one temporary directory that :meth:`Docker.destroy` removes.

It runs only inside scripts/loopback-only's network namespace: its default bridge
(``docker0``), the compose networks and every published port then exist in a namespace
whose only way out is loopback, and dockerd is told to leave iptables alone (nothing to
NAT to). Ports are published on 127.0.0.1 by ``docker-proxy``; builds that need the
wheelhouse use ``--network=host``, which is that same namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.container.podman import prepared
from tests.support.interfaces import current_interfaces

TOOLS = ("dockerd", "containerd", "docker-proxy", "docker-compose", "runc")


def docker_cli() -> str | None:
    """Debian's client, shipped beside its dockerd (another ``docker`` may come first on PATH)."""
    return shutil.which("docker", path="/usr/bin:/bin") or shutil.which("docker")


def missing_prerequisites() -> str | None:
    """Why the Docker part of the tier cannot run here, or ``None`` when it can."""
    if os.geteuid() != 0:
        return "the Docker tier needs root (a private dockerd with overlay2 storage)"
    absent = [tool for tool in TOOLS if shutil.which(tool, path=_sbin_path()) is None]
    if docker_cli() is None:
        absent.append("docker")
    if absent:
        return (
            f"{', '.join(absent)} missing "
            "(scripts/install-test-deps installs docker.io and docker-compose)"
        )
    if os.environ.get("IMAGEBRIDGE_LOOPBACK_ONLY") != "1":
        return (
            "the Docker tier starts dockerd only inside scripts/loopback-only (its bridge and "
            "published ports must live in a namespace with nothing but loopback); scripts/check "
            "runs pytest there"
        )
    manifest = prepared()
    if manifest["missing"]:
        return (
            f"prepared inputs missing: {', '.join(manifest['missing'])} "
            "(scripts/container-prepare makes them; scripts/check runs it)"
        )
    return None


def _sbin_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin"])


def _wait_for(what: str, ready: Any, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited {process.returncode}:\n{_tail(log)}")
        if ready():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not come up within 90 s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:] if log.exists() else ""


@dataclass
class Docker:
    work: Path
    env: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    # The interfaces before dockerd: its bridges (docker0, br-*) outlive it unless removed.
    interfaces_before: set[str] = field(default_factory=current_interfaces)

    @classmethod
    def start(cls, work: Path) -> Docker:
        sbin = _sbin_path()
        containerd_sock = work / "containerd.sock"
        (work / "containerd.toml").write_text(
            "version = 2\n"
            # dockerd needs none of Kubernetes' CRI (which would also open a stream port).
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            f'root = "{work / "containerd-root"}"\n'
            f'state = "{work / "containerd-state"}"\n'
            f'[grpc]\n  address = "{containerd_sock}"\n'
            f'[ttrpc]\n  address = "{containerd_sock}.ttrpc"\n'
            '[debug]\n  address = ""\n'
            '[metrics]\n  address = ""\n',
            encoding="utf-8",
        )
        (work / "daemon.json").write_text("{}\n", encoding="utf-8")
        docker_sock = work / "docker.sock"
        engine = cls(
            work,
            {
                **os.environ,
                "PATH": sbin,
                "DOCKER_HOST": f"unix://{docker_sock}",
                "DOCKER_CONFIG": str(work / "client"),  # no host credentials or contexts
                "DOCKER_BUILDKIT": "0",  # the classic builder: BuildKit wants a registry
                "COMPOSE_DOCKER_CLI_BUILD": "0",
            },
        )
        try:
            containerd_log = work / "containerd.log"
            engine._spawn(
                [shutil.which("containerd", path=sbin) or "containerd",
                 "--config", str(work / "containerd.toml")],
                containerd_log,
            )  # fmt: skip
            _wait_for("containerd", containerd_sock.exists, engine.processes[-1], containerd_log)
            dockerd_log = work / "dockerd.log"
            engine._spawn(
                [
                    shutil.which("dockerd", path=sbin) or "dockerd",
                    "--config-file", str(work / "daemon.json"),
                    "--containerd", str(containerd_sock),
                    "--data-root", str(work / "data"),
                    "--exec-root", str(work / "exec"),
                    "--pidfile", str(work / "docker.pid"),
                    "--host", f"unix://{docker_sock}",
                    "--storage-driver", "overlay2",
                    # Nothing to route or NAT to inside the loopback-only namespace, and the
                    # host's firewall is not ours to touch.
                    "--iptables=false", "--ip6tables=false", "--ip-masq=false",
                ],
                dockerd_log,
            )  # fmt: skip
            _wait_for(
                "dockerd",
                lambda: engine.run("version", check=False, timeout=30).returncode == 0,
                engine.processes[-1],
                dockerd_log,
            )
        except BaseException:
            engine.destroy()
            raise
        return engine

    def _spawn(self, command: list[str], log: Path) -> None:
        with log.open("wb") as out:
            self.processes.append(
                subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=self.env)
            )

    def run(
        self,
        *args: str,
        check: bool = True,
        timeout: float = 120,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        program: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        command = [program or docker_cli() or "docker", *args]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**self.env, **(env or {})},
            cwd=cwd,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(command)} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def inspect(self, *args: str) -> Any:
        return json.loads(self.run(*args).stdout)[0]

    def logs(self, name: str) -> str:
        done = self.run("logs", name, check=False)
        return (done.stdout + done.stderr)[-4000:]

    def destroy(self) -> None:
        """Remove every container, stop dockerd then containerd, unmount, delete the folder."""
        if self.processes and self.processes[-1].poll() is None:
            names = self.run("ps", "--all", "--quiet", check=False).stdout.split()
            if names:
                self.run("rm", "--force", "--volumes", *names, check=False)
        for process in reversed(self.processes):  # dockerd before its containerd
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=30)
        # The daemons share the machine's mount namespace: their overlay and network
        # namespace mounts stay behind them until unmounted, deepest first.
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
        # dockerd leaves docker0 and the compose bridges up after it stops; the namespace is
        # the suite's (loopback only), so every link it added goes.
        for link in sorted(current_interfaces() - self.interfaces_before):
            subprocess.run(["ip", "link", "delete", link], capture_output=True, check=False)


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """Serve ``folder`` read-only on 127.0.0.1 (a pip ``--find-links`` index); yield its URL.

    Docker's classic builder cannot mount a folder into a build step, so the wheelhouse
    reaches ``pip`` over loopback (the build runs with ``--network=host``) instead.
    """

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
