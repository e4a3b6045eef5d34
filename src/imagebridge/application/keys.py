"""Open the API-key service from ``[server.keys]`` on the jobs database.

The keys live in ``server.jobs.database`` whether or not jobs are enabled: with jobs off the
same location is opened for the key tables alone (SQLite: the file; PostgreSQL: the schema
``server.jobs.postgres_schema``), so a bridge without jobs can still have keys and quotas.
"""

from __future__ import annotations

from collections.abc import Mapping

from imagebridge.config.model import BridgeConfig
from imagebridge.keys import KeyService, KeyServiceSettings
from imagebridge.storage import is_postgres_url, open_key_store, postgres_options

__all__ = ["key_service_settings", "open_key_service"]


def key_service_settings(config: BridgeConfig) -> KeyServiceSettings:
    keys = config.server.keys
    return KeyServiceSettings(
        time_zone=keys.time_zone,
        max_keys=keys.max_keys,
        slot_lease_secs=keys.slot_lease_secs,
        slot_poll_max_ms=keys.slot_poll_max_ms,
    )


async def open_key_service(config: BridgeConfig, env: Mapping[str, str]) -> KeyService:
    """The key service on the jobs database (the caller closes it: ``service.aclose()``)."""
    jobs = config.server.jobs
    location = jobs.database
    postgres = postgres_options(jobs, env) if is_postgres_url(location) else None
    store = await open_key_store(location, postgres=postgres)
    try:
        return KeyService(store, key_service_settings(config))
    except BaseException:
        await store.close()
        raise
