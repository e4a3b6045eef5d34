"""A private PostgreSQL server that a test restarts: fast shutdown, ``kill -9``, start again.

The session server of :mod:`tests.support.postgres` is shared by every test, so a test
that takes the database away uses its own: :func:`restartable_postgres` runs ``initdb``
into a temporary directory and starts ``postgres`` on a free loopback port (as the
``postgres`` user under root, like the session server). :meth:`RestartablePostgres.stop`
stops it the way ``pg_ctl stop -m fast`` does (SIGINT), :meth:`RestartablePostgres.kill`
``kill -9``-s the postmaster and waits until its children noticed and exited, and
:meth:`RestartablePostgres.start` starts it again on the same port and data directory
(after a kill, PostgreSQL runs crash recovery first). Everything is stopped and removed
when the ``with`` block ends. The ``restartable_postgres_server`` fixture gives a test one
(registered once, as a plugin in ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support.postgres import (
    APP_DATABASE,
    APP_ROLE,
    _as_server_user,
    _children,
    _free_port,
    _running,
    _server_user,
    _stop,
    _wait_ready,
    init_cluster,
    require_postgres_bin,
)

__all__ = ["RestartablePostgres", "restartable_postgres", "restartable_postgres_server"]

_EXIT_TIMEOUT_S = 30.0


class RestartablePostgres:
    def __init__(self, bin_dir: Path, root: Path, port: int, superuser_password: str) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.port = port
        self.password = secrets.token_urlsafe(24)
        self._superuser_password = superuser_password
        self._user = _server_user()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    def url(self, *, with_password: bool = True) -> str:
        secret = f":{self.password}" if with_password else ""
        return f"postgresql://{APP_ROLE}{secret}@127.0.0.1:{self.port}/{APP_DATABASE}"

    def _admin_url(self, database: str = "postgres") -> str:
        return (
            f"postgresql://imagebridge:{self._superuser_password}@127.0.0.1:{self.port}/{database}"
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the server (again) on its port; returns once it accepts connections."""
        assert not self.running
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                _as_server_user(
                    [
                        str(self.bin_dir / "postgres"),
                        "-D",
                        str(self.data),
                        "-p",
                        str(self.port),
                        "-c",
                        "listen_addresses=127.0.0.1",
                        "-c",
                        "unix_socket_directories=",
                        "-c",
                        "fsync=off",
                        "-c",
                        "max_connections=100",
                    ],
                    self._user,
                ),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        _wait_ready(self._admin_url(), self.process, self.log)

    def stop(self) -> None:
        """Fast shutdown (``pg_ctl stop -m fast``): sessions are ended, the server exits."""
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=_EXIT_TIMEOUT_S)

    def kill(self) -> None:
        """``kill -9`` of the postmaster; returns once its children have gone too."""
        assert self.process is not None
        children = _children(self.process.pid)
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=_EXIT_TIMEOUT_S)
        deadline = time.monotonic() + _EXIT_TIMEOUT_S
        while any(_running(pid) for pid in children):
            if time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL backends outlived their postmaster")
            time.sleep(0.05)

    def _create_app_database(self) -> None:
        with psycopg.connect(self._admin_url(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN PASSWORD '{self.password}'")
            conn.execute(
                f"CREATE DATABASE {APP_DATABASE} OWNER {APP_ROLE} TEMPLATE template0 "
                "ENCODING 'UTF8'"
            )


@contextlib.contextmanager
def restartable_postgres(bin_dir: Path) -> Iterator[RestartablePostgres]:
    root = Path(tempfile.mkdtemp(prefix="imagebridge-pg-restart-"))
    server: RestartablePostgres | None = None
    try:
        superuser_password = init_cluster(bin_dir, root)
        for _attempt in range(5):
            server = RestartablePostgres(bin_dir, root, _free_port(), superuser_password)
            try:
                server.start()
                break
            except RuntimeError:
                if "could not bind" not in server.log.read_text(errors="replace"):
                    raise
        else:
            raise RuntimeError("could not find a free port for PostgreSQL")
        server._create_app_database()
        yield server
    finally:
        try:
            if server is not None and server.process is not None:
                _stop(server.process)
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def restartable_postgres_server() -> Iterator[RestartablePostgres]:
    """A server of the test's own (see the module docstring); skips without PostgreSQL."""
    with restartable_postgres(require_postgres_bin()) as server:
        yield server
