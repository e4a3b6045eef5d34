"""Open the webhook service from ``[server.webhooks]`` on the jobs database.

The outbox lives in ``server.jobs.database`` (SQLite: the file; PostgreSQL: the schema
``server.jobs.postgres_schema``) whether or not jobs are enabled, so the job stores can write
their events in the transaction of each job's final status (``JobServices.open(webhooks=…)``).
Configured endpoints are checked (address rules, secret variables) and written to the
database when the service opens; a refusal is a ``configuration`` error naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping

from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.jobs.shared_mode import default_instance_id
from imagebridge.keys import KeyService
from imagebridge.storage import is_postgres_url, open_webhook_store, postgres_options
from imagebridge.webhooks import (
    ConfiguredEndpoint,
    DeliveryObserver,
    Resolver,
    TargetPolicy,
    WebhookService,
    WebhookSettings,
)

__all__ = [
    "configured_endpoints",
    "open_webhook_service",
    "webhook_settings",
]


def webhook_settings(config: BridgeConfig) -> WebhookSettings:
    hooks = config.server.webhooks
    return WebhookSettings(
        targets=TargetPolicy(
            allow_private_networks=hooks.allow_private_networks,
            allowed_ports=frozenset(hooks.allowed_ports),
        ),
        timeout_ms=hooks.timeout_ms,
        retry_period_secs=hooks.retry_period_secs,
        retry_initial_ms=hooks.retry_initial_ms,
        retry_max_interval_ms=hooks.retry_max_interval_ms,
        lease_secs=hooks.lease_secs,
        max_concurrent=hooks.max_concurrent,
        poll_interval_ms=hooks.poll_interval_ms,
        max_payload_bytes=hooks.max_payload_bytes,
        max_pending=hooks.max_pending,
        max_endpoints=hooks.max_endpoints,
        max_response_bytes=hooks.max_response_bytes,
        retention_secs=hooks.retention_secs,
        max_retained=hooks.max_retained,
    )


async def configured_endpoints(
    config: BridgeConfig, keys: KeyService | None
) -> list[ConfiguredEndpoint]:
    """``[server.webhooks.endpoints]``, each key named resolved to its id."""
    endpoints: list[ConfiguredEndpoint] = []
    for name, endpoint in sorted(config.server.webhooks.endpoints.items()):
        key_id: str | None = None
        if endpoint.key is not None:
            field = f"server.webhooks.endpoints.{name}.key"
            if keys is None:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    "a key's endpoint needs server.keys.enabled",
                    details={"field": field},
                )
            try:
                key_id = (await keys.find(endpoint.key)).id
            except BridgeError:
                raise BridgeError(
                    ErrorCode.CONFIGURATION, "names no API key", details={"field": field}
                ) from None
        endpoints.append(
            ConfiguredEndpoint(
                name=name,
                url=endpoint.url,
                secret_env=endpoint.secret_env,
                event_types=tuple(endpoint.events),
                key_id=key_id,
            )
        )
    return endpoints


async def open_webhook_service(
    config: BridgeConfig,
    env: Mapping[str, str],
    *,
    keys: KeyService | None = None,
    observer: DeliveryObserver | None = None,
    resolver: Resolver | None = None,
) -> WebhookService:
    """The service on the jobs database, its configured endpoints written (not started:
    call ``start()``; the caller closes it with ``aclose()``)."""
    jobs = config.server.jobs
    location = jobs.database
    postgres = postgres_options(jobs, env) if is_postgres_url(location) else None
    store = await open_webhook_store(location, postgres=postgres)
    try:
        service = WebhookService(
            store,
            webhook_settings(config),
            owner=jobs.instance_id or default_instance_id(),
            env=env,
            resolver=resolver,
            observer=observer,
        )
        await service.sync_configured(await configured_endpoints(config, keys))
    except BaseException:
        await store.close()
        raise
    return service
