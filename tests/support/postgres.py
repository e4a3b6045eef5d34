"""A throwaway PostgreSQL server for one test session, listening on 127.0.0.1 only.

``postgres_server`` (session scope) runs ``initdb`` into a private temporary directory, starts
``postgres`` on a free loopback port with Unix sockets disabled and password (SCRAM)
authentication, creates a non-superuser ``bridge`` role owning a fresh database, and at the
end stops the server and checks by PID that neither the postmaster nor any of its children
outlived the run. PostgreSQL refuses to run as root, so under root (as in CI) both programs run
as the ``postgres`` system user through ``setpriv``, which also asks the kernel to stop the
server should the test process die without cleaning up.

Tests using it skip, saying why, only when no PostgreSQL binaries are installed
(``scripts/install-test-deps`` installs them). Each test should use its own schema
(``postgres_schema``): the stores take the schema as a parameter, so tests never share
tables and need no cleanup.

The fixtures are registered once, as a plugin in ``tests/conftest.py``, so the whole run
shares one server; import only the helpers (``PostgresServer`` …) from here.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.support.waiting import STARTUP_S

__all__ = [
    "PostgresServer",
    "find_postgres_bin",
    "postgres_schema",
    "postgres_server",
    "postgres_url",
    "running_postgres",
]

_BIN_GLOB = "/usr/lib/postgresql/*/bin"
_STOP_TIMEOUT_S = 30.0
APP_ROLE = "bridge"
APP_DATABASE = "imagebridge_test"


def find_postgres_bin() -> Path | None:
    """The newest directory holding both ``initdb`` and ``postgres``, or ``None``."""

    def version(path: str) -> tuple[int, ...]:
        match = re.search(r"/postgresql/([0-9.]+)/bin$", path)
        return tuple(int(p) for p in match.group(1).split(".")) if match else (0,)

    candidates = sorted(glob.glob(_BIN_GLOB), key=version, reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        path = Path(candidate)
        if (path / "initdb").is_file() and (path / "postgres").is_file():
            return path
    return None


@dataclass(frozen=True)
class PostgresServer:
    """Where the session's server listens and how to log in (as the ``bridge`` role)."""

    host: str
    port: int
    password: str
    superuser_password: str
    pid: int
    data_dir: Path

    def url(
        self, *, database: str = APP_DATABASE, user: str = APP_ROLE, password: str | None = None
    ) -> str:
        secret = self.password if password is None else password
        return f"postgresql://{user}:{secret}@{self.host}:{self.port}/{database}"

    def bare_url(self, *, database: str = APP_DATABASE, user: str = APP_ROLE) -> str:
        """:meth:`url` without the password: a bridge reads it from the variable its
        ``server.jobs.postgres_password_env`` names."""
        return f"postgresql://{user}@{self.host}:{self.port}/{database}"

    def admin_url(self, database: str = APP_DATABASE) -> str:
        """The bootstrap superuser, for tests that set up roles or odd databases."""
        return self.url(database=database, user="imagebridge", password=self.superuser_password)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user(command: list[str], user: pwd.struct_passwd | None) -> list[str]:
    """``command`` run as ``user`` (when we are root), stopped if this process dies."""
    prefix: list[str] = []
    if shutil.which("setpriv"):
        prefix = ["setpriv"]
        if user is not None:
            prefix += ["--reuid", str(user.pw_uid), "--regid", str(user.pw_gid), "--clear-groups"]
        prefix += ["--pdeathsig", "INT", "--"]
    elif user is not None:
        prefix = ["runuser", "-u", user.pw_name, "--"]
    return prefix + command


def _server_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root but neither a 'postgres' nor a 'nobody' user exists")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError):
            found.extend(int(p) for p in Path(path).read_text().split())
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` is still running (a zombie counts as gone: it has exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"postgres exited early:\n{log.read_text(errors='replace')[-2000:]}")
        try:
            with psycopg.connect(url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Fast shutdown, then harder signals; fail loudly if anything outlives it."""
    pids = [process.pid, *_children(process.pid)]
    for sig, wait in ((signal.SIGINT, _STOP_TIMEOUT_S), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5)):
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
    deadline = time.monotonic() + 5
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [pid for pid in pids if _running(pid)]
    if survivors:
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise RuntimeError(f"PostgreSQL processes outlived the test run: {survivors}")


def init_cluster(bin_dir: Path, root: Path) -> str:
    """``initdb`` into ``root/data`` (owned by the server's user, scram-sha-256, UTF-8);
    returns the password of its bootstrap superuser ``imagebridge``."""
    user = _server_user()
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    superuser_password = secrets.token_urlsafe(24)
    pwfile = root / "pwfile"
    pwfile.write_text(superuser_password + "\n")
    if user is not None:
        os.chown(pwfile, user.pw_uid, user.pw_gid)
    command = [
        str(bin_dir / "initdb"),
        "-D",
        str(root / "data"),
        "-U",
        "imagebridge",
        f"--pwfile={pwfile}",
        "--auth=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C.UTF-8",
        "--no-sync",
    ]
    subprocess.run(
        _as_server_user(command, user), check=True, capture_output=True, timeout=STARTUP_S
    )
    pwfile.unlink()
    return superuser_password


@contextlib.contextmanager
def running_postgres(bin_dir: Path) -> Iterator[PostgresServer]:
    """Start a private server from ``bin_dir``; stop it and remove its files on exit."""
    user = _server_user()
    root = Path(tempfile.mkdtemp(prefix="imagebridge-pg-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        superuser_password = init_cluster(bin_dir, root)
        password = secrets.token_urlsafe(24)
        data = root / "data"
        log = root / "postgres.log"
        for _attempt in range(5):
            port = _free_port()
            with log.open("wb") as sink:
                process = subprocess.Popen(
                    _as_server_user(
                        [
                            str(bin_dir / "postgres"),
                            "-D",
                            str(data),
                            "-p",
                            str(port),
                            "-c",
                            "listen_addresses=127.0.0.1",
                            "-c",
                            "unix_socket_directories=",
                            "-c",
                            "fsync=off",
                            "-c",
                            "synchronous_commit=off",
                            "-c",
                            "full_page_writes=off",
                            "-c",
                            "max_connections=200",
                        ],
                        user,
                    ),
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            admin = f"postgresql://imagebridge:{superuser_password}@127.0.0.1:{port}/postgres"
            try:
                _wait_ready(admin, process, log)
                break
            except RuntimeError:
                if "could not bind" not in log.read_text(errors="replace"):
                    raise
                process.wait(timeout=10)  # the port was taken meanwhile: try another
        else:
            raise RuntimeError("could not find a free port for PostgreSQL")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN PASSWORD '{password}'")
            try:
                # A linguistic default collation catches code that forgets COLLATE "C".
                conn.execute(
                    f"CREATE DATABASE {APP_DATABASE} OWNER {APP_ROLE} TEMPLATE template0 "
                    "ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'und'"
                )
            except psycopg.Error:
                conn.execute(
                    f"CREATE DATABASE {APP_DATABASE} OWNER {APP_ROLE} TEMPLATE template0 "
                    "ENCODING 'UTF8'"
                )
        yield PostgresServer(
            host="127.0.0.1",
            port=port,
            password=password,
            superuser_password=superuser_password,
            pid=process.pid,
            data_dir=data,
        )
    finally:
        try:
            if process is not None:
                _stop(process)
        finally:
            shutil.rmtree(root, ignore_errors=True)


def require_postgres_bin() -> Path:
    """PostgreSQL's ``bin`` directory; skips the test, saying why, where it is not installed."""
    bin_dir = find_postgres_bin()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL is not installed (no initdb/postgres under /usr/lib/postgresql/*/bin "
            "or on PATH); run scripts/install-test-deps"
        )
    return bin_dir


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with running_postgres(require_postgres_bin()) as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The test database, as the unprivileged ``bridge`` role."""
    return postgres_server.url()


@pytest.fixture
def postgres_schema() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:20]}"
