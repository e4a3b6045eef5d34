"""Bridge server processes for multi-instance tests and the multi-instance benchmark.

:func:`start_bridge` runs ``python -m imagebridge.server`` on ``127.0.0.1`` with a random
port, in shared mode on a PostgreSQL database (the password travels in an environment
variable, never on the command line), and returns once it announces its URL.
:class:`BridgeProcess` can stop it gracefully or ``kill -9`` it. Every process started here
is stopped by :func:`bridge_processes` when its ``with`` block ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.bridge_server import MOCK_ONLY, ServerProcess, spawn_bridge
from tests.support.postgres import APP_DATABASE, APP_ROLE, PostgresServer
from tests.support.waiting import STARTUP_S

__all__ = [
    "PASSWORD_ENV",
    "BridgeProcess",
    "SharedDatabase",
    "bridge_processes",
    "start_bridge",
]

PASSWORD_ENV = "MULTI_INSTANCE_PG_PASSWORD"


@dataclass(frozen=True)
class SharedDatabase:
    """Where every instance keeps its jobs: a password-free URL, a schema, the password."""

    url: str
    schema: str
    password: str

    @classmethod
    def on(cls, server: PostgresServer, schema: str) -> SharedDatabase:
        """The session server's test database (:mod:`tests.support.postgres`) in ``schema``,
        as its ``bridge`` role; the password stays out of the URL."""
        url = f"postgresql://{APP_ROLE}@{server.host}:{server.port}/{APP_DATABASE}"
        return cls(url=url, schema=schema, password=server.password)

    def sets(self) -> list[str]:
        return [
            f'server.jobs.database="{self.url}"',
            f'server.jobs.postgres_schema="{self.schema}"',
            f'server.jobs.postgres_password_env="{PASSWORD_ENV}"',
        ]


@dataclass
class BridgeProcess(ServerProcess):
    """A :class:`ServerProcess` that is one named instance of a shared deployment."""

    name: str = ""

    @property
    def pid(self) -> int:
        return self.process.pid


def start_bridge(
    name: str,
    database: SharedDatabase,
    data_dir: Path,
    *sets: str,
    timeout: float = STARTUP_S,
    env: dict[str, str] | None = None,
) -> BridgeProcess:
    """Start one instance named ``name`` (its ``server.jobs.instance_id``); ``env`` adds
    variables (the S3 keys a ``*_env`` setting names)."""
    settings = [*MOCK_ONLY, *database.sets(), f'server.jobs.instance_id="{name}"', *sets]
    process, url, output = spawn_bridge(
        data_dir,
        settings,
        env={**(env or {}), PASSWORD_ENV: database.password},
        drop_env=("IMAGEGEN_BRIDGE", "PG"),
        timeout=timeout,
    )
    return BridgeProcess(process, url, output, name=name)


@contextlib.contextmanager
def bridge_processes() -> Iterator[list[BridgeProcess]]:
    """A list to put started bridges in; each is stopped (or killed) on exit."""
    started: list[BridgeProcess] = []
    try:
        yield started
    finally:
        for bridge in started:
            bridge.stop(timeout=10)
