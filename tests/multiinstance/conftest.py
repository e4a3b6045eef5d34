"""Multi-instance tests run real bridge processes on the session's PostgreSQL server."""

from __future__ import annotations

from tests.support.postgres import postgres_schema, postgres_server, postgres_url

__all__ = ["postgres_schema", "postgres_server", "postgres_url"]
