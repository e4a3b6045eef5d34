"""Reading a PostgreSQL store's schema version without creating anything."""

from __future__ import annotations

import pytest

from imagebridge.storage import (
    PostgresSharedJobStore,
)
from imagebridge.storage.postgres.jobs import inspect_job_schema

from .conftest import schema_exists

pytestmark = pytest.mark.postgres


async def test_inspection_is_read_only(postgres_url: str, postgres_schema: str) -> None:
    status = await inspect_job_schema(postgres_url, schema=postgres_schema)
    assert status.to_dict() == {"initialized": False, "version": None, "current_version": 3}
    assert not schema_exists(postgres_url, postgres_schema)
    await (await PostgresSharedJobStore.open(postgres_url, schema=postgres_schema)).close()
    status = await inspect_job_schema(postgres_url, schema=postgres_schema)
    assert (status.initialized, status.version, status.current) == (True, 3, True)
