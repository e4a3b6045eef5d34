"""tests/support/postgres.py: the throwaway server is private, loopback-only and leaves nothing."""

from __future__ import annotations

import os

import psycopg
import pytest

from tests.support.postgres import (
    PostgresServer,
    _children,
    _running,
    find_postgres_bin,
    running_postgres,
)

pytestmark = pytest.mark.postgres


def test_the_session_server_listens_on_loopback_only(postgres_server: PostgresServer) -> None:
    with psycopg.connect(postgres_server.admin_url()) as conn:
        settings: dict[str, str] = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('listen_addresses', 'unix_socket_directories', 'password_encryption')"
            ).fetchall()
        )
    with psycopg.connect(postgres_server.url()) as conn:
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert superuser.fetchone() == (False,)  # the stores run unprivileged
    assert settings == {
        "listen_addresses": "127.0.0.1",
        "unix_socket_directories": "",
        "password_encryption": "scram-sha-256",
    }
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(postgres_server.url(password="not-the-password"), connect_timeout=5)


def test_no_process_or_file_outlives_a_server() -> None:
    bin_dir = find_postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed; run scripts/install-test-deps")
    with running_postgres(bin_dir) as server:
        pids = [server.pid, *_children(server.pid)]
        assert len(pids) > 1  # the postmaster and its background workers
        # the postmaster runs; a background worker may already have done its job and gone
        assert _running(server.pid) and any(_running(pid) for pid in pids[1:])
        data_dir = server.data_dir
        assert data_dir.is_dir()
    assert not any(_running(pid) for pid in pids)
    assert not os.path.exists(data_dir.parent)
