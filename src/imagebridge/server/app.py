"""The application factory: configuration in, a ready FastAPI app out.

``create_app`` builds (or accepts) the engine, decides which routers exist — metrics only
when enabled; jobs, presets, artifacts and the dashboard with ``server.jobs.enabled`` —
installs the one ASGI middleware and the envelope error handlers, and ties the job
services, background readiness probing and runtime shutdown to the app's lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from fastapi import APIRouter, FastAPI

from imagebridge._version import __version__
from imagebridge.application import Application, build_application
from imagebridge.application.job_services import JobServices
from imagebridge.application.keys import open_key_service
from imagebridge.application.webhooks import open_webhook_service
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.config.loader import ConfigOrigin
from imagebridge.config.model import BridgeConfig, JobSettings
from imagebridge.contract.errors import BridgeError
from imagebridge.jobs import JobManagerSettings, SharedQueueSettings
from imagebridge.jobs.outcomes import OutcomeObserver
from imagebridge.jobs.sync_records import SyncRecordSettings
from imagebridge.keys import KeyService
from imagebridge.server import dashboard
from imagebridge.server.auth import AccessPolicy, FailureThrottle, read_bearer_token
from imagebridge.server.errors import install_error_handlers
from imagebridge.server.events import OperatorEvents
from imagebridge.server.metrics import BridgeMetrics
from imagebridge.server.middleware import BridgeMiddleware, MiddlewareSettings
from imagebridge.server.openai import images as openai_images
from imagebridge.server.openai import models as openai_models
from imagebridge.server.openai import responses as openai_responses
from imagebridge.server.openai import responses_routes as openai_kept_responses
from imagebridge.server.openapi import TITLE, build_openapi
from imagebridge.server.otel import start_tracing, with_tracing
from imagebridge.server.readiness import ReadinessMonitor
from imagebridge.server.recovery import ArtifactRecovery
from imagebridge.server.routes import (
    artifacts,
    diagnostics,
    gallery,
    health,
    images,
    jobs,
    links,
    metrics,
    openapi,
    presets,
    providers,
    sessions,
    stream,
)
from imagebridge.server.routes import keys as key_routes
from imagebridge.server.routes import webhooks as webhook_routes
from imagebridge.server.shutdown import Drain, settle_seconds, shutdown_grace_seconds
from imagebridge.server.state import BridgeState, ServerOptions
from imagebridge.server.webhook_metrics import WebhookMetrics
from imagebridge.storage import is_postgres_url, postgres_options
from imagebridge.webhooks import WebhookService

__all__ = ["create_app"]

logger = logging.getLogger("imagebridge.server")


def _routers(state: BridgeState) -> list[APIRouter]:
    """The mounted routers; an unmounted route answers like any unknown path (404)."""
    mounted = [
        health.router,
        openapi.router,
        providers.router,
        sessions.router,
        images.router,
        stream.router,
        openai_images.router,
        openai_models.router,
        openai_responses.router,
        diagnostics.router,
        links.router,
    ]
    if state.metrics is not None:
        mounted.append(metrics.router)
    if state.config.server.keys.enabled:
        mounted.append(key_routes.router)
    if state.config.server.webhooks.enabled:
        mounted.append(webhook_routes.router)
    if state.jobs_enabled:
        mounted.extend(
            [
                jobs.router,
                gallery.router,
                presets.router,
                artifacts.router,
                dashboard.router,
                openai_kept_responses.router,
            ]
        )
    return mounted


async def _open_jobs(
    config: BridgeConfig,
    engine: Application,
    env: Mapping[str, str],
    keys: KeyService | None,
    drain: Drain,
    observer: OutcomeObserver | None = None,
    webhooks: WebhookService | None = None,
) -> JobServices:
    """The job services on ``server.jobs.database``: shared mode for a PostgreSQL URL."""
    jobs = config.server.jobs
    grace_s = shutdown_grace_seconds(config)
    location = jobs.database
    postgres = postgres_options(jobs, env) if is_postgres_url(location) else None

    async def open_services() -> JobServices:
        return await JobServices.open(
            location,
            engine.runtime,
            JobManagerSettings.from_config(jobs, shutdown_timeout_s=grace_s),
            queue=SharedQueueSettings.from_config(jobs),
            postgres=postgres,
            settle_timeout_s=settle_seconds(config),
            keys=keys,
            observer=observer,
            webhooks=webhooks,
            sync=SyncRecordSettings(
                retry_join_window_s=config.server.sync.retry_join_window_secs,
                join_poll_s=config.server.sync.join_poll_ms / 1000,
            ),
        )

    if postgres is None:
        services = await open_services()
    else:
        services = await _wait_for_database(open_services, jobs, drain)
    try:
        await services.start()
    except BaseException:
        await services.aclose(0)
        raise
    return services


async def _wait_for_database(
    open_services: Callable[[], Awaitable[JobServices]], jobs: JobSettings, drain: Drain
) -> JobServices:
    """Open the PostgreSQL job services, retrying while the database is unreachable.

    Pauses grow from ``poll_interval_ms`` to ``heartbeat_secs``; after
    ``postgres_startup_wait_ms`` the last failure becomes a clear startup error (the server
    exits non-zero). Only a retryable failure (unreachable, busy) is waited for: a wrong
    password or schema is reported at once. A stop signal ends the wait.
    """
    limit_s = jobs.postgres_startup_wait_ms / 1000
    deadline = time.monotonic() + limit_s
    pause = jobs.poll_interval_ms / 1000
    longest = max(pause, float(jobs.heartbeat_secs))
    attempts = 0
    while True:
        attempts += 1
        try:
            services = await open_services()
        except BridgeError as error:
            if not error.retryable:
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BridgeError(
                    error.code,
                    f"the jobs database (PostgreSQL) was unreachable for {limit_s:g} s at "
                    "startup; giving up (server.jobs.postgres_startup_wait_ms)",
                    retryable=True,  # a later start may find it
                    details={
                        **error.details,
                        "field": "server.jobs.database",
                        "storage": "database",
                        "attempts": attempts,
                        "waited_ms": jobs.postgres_startup_wait_ms,
                    },
                ) from None
            logger.warning(
                "jobs database unreachable at startup; waiting",
                extra={"attempt": attempts, "remaining_ms": int(remaining * 1000)},
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(pause, remaining)):
                    await drain.stop_requested.wait()
            if drain.stop_requested.is_set():
                raise BridgeError(
                    error.code,
                    "stopped while waiting for the jobs database at startup",
                    details={"field": "server.jobs.database", "reason": "stopped"},
                ) from None
            pause = min(pause * 2, longest)
            continue
        if attempts > 1:
            logger.info("jobs database reachable", extra={"attempt": attempts})
        return services


def _middleware_settings(config: BridgeConfig) -> MiddlewareSettings:
    server = config.server
    return MiddlewareSettings(
        max_header_bytes=server.max_header_bytes,
        max_body_bytes=server.max_body_bytes,
        max_connections=server.max_connections_value,
        read_timeout_ms=server.read_timeout_ms,
        write_timeout_ms=server.write_timeout_ms,
    )


async def _open_keys(state: BridgeState, env: Mapping[str, str]) -> None:
    """The key service on the jobs database, in the access policy (docs/keys.md)."""
    config = state.config
    service = await open_key_service(config, env)
    keys = config.server.keys
    throttle = FailureThrottle(
        keys.auth_failure_limit, keys.auth_failure_window_secs, keys.auth_failure_max_clients
    )
    state.access = dataclasses.replace(state.access, keys=service, throttle=throttle)


async def _open_webhooks(state: BridgeState, env: Mapping[str, str]) -> None:
    """The webhook service on the jobs database (docs/webhooks.md), counted in the metrics
    when they are on; it starts delivering once the jobs are open."""
    metrics = (
        WebhookMetrics(
            lambda: None if state.webhooks is None else state.webhooks.dispatcher.backlog
        )
        if state.metrics is not None
        else None
    )
    state.webhooks = await open_webhook_service(
        state.config,
        env,
        keys=state.access.keys,
        observer=None if metrics is None else metrics.record,
        resolver=state.options.webhook_resolver,
    )
    if metrics is not None and state.metrics is not None:
        state.metrics.register(metrics)


async def _close(state: BridgeState, engine: Application) -> None:
    """Jobs first (running ones get what is left of the shutdown grace), then webhook
    delivery (attempts in flight get what is left after that), the keys, the runtime and
    providers."""
    services, state.jobs = state.jobs, None
    webhooks, state.webhooks = state.webhooks, None
    keys = state.access.keys
    try:
        if services is not None:
            grace_s = state.drain.remaining(shutdown_grace_seconds(state.config))
            await services.aclose(grace_s)
        if webhooks is not None:
            await webhooks.aclose(state.drain.remaining(shutdown_grace_seconds(state.config)))
        if keys is not None:
            await keys.aclose()
    finally:
        try:
            await engine.aclose()
        except BridgeError as error:
            logger.warning("runtime shutdown was not clean", extra={"code": error.code.value})


def _bucket_answers(objects: S3ObjectStore) -> Callable[[], Awaitable[bool]]:
    """Readiness of the S3 artifact backend: the bucket answers to our credentials (an
    instance that can neither store nor serve artifacts is not ready)."""

    async def check() -> bool:
        try:
            await objects.check()
        except BridgeError as error:
            logger.warning(
                "the artifact object store does not answer",
                extra={"reason": error.details.get("reason")},
            )
            return False
        return True

    return check


def _metrics(config: BridgeConfig, engine: Application) -> BridgeMetrics | None:
    settings = config.server.metrics
    if not settings.enabled:
        return None
    runtime = engine.runtime
    return BridgeMetrics(
        runtime,
        runtime.registry.providers,
        max_key_labels=settings.max_key_labels,
        max_model_labels=settings.max_model_labels,
        scrape_cache_ms=settings.scrape_cache_ms,
        scrape_timeout_ms=settings.scrape_timeout_ms,
    )


def create_app(
    config: BridgeConfig,
    *,
    application: Application | None = None,
    origins: list[ConfigOrigin] | None = None,
    options: ServerOptions | None = None,
) -> FastAPI:
    """Build the HTTP app for ``config``.

    ``application`` replaces the engine built from ``config`` (tests register their own
    providers this way); either way the app's lifespan shuts the runtime down.
    ``origins`` is the configuration provenance shown by ``/v1/diagnostics``. Raises
    ``configuration`` when ``server.bearer_token_env`` names a missing or empty variable.
    """
    options = options or ServerOptions()
    token = read_bearer_token(config, options.env if options.env is not None else os.environ)
    traces = start_tracing(
        config.server.tracing.otel, options.env if options.env is not None else os.environ
    )
    access = AccessPolicy.with_token(token) if token else AccessPolicy.open()
    engine = application if application is not None else build_application(config)
    runtime = engine.runtime

    async def probe(timeout: float) -> Any:
        return await runtime.registry.readiness(timeout)

    state = BridgeState(
        config=config,
        application=engine,
        options=options,
        access=access,
        readiness=ReadinessMonitor(
            probe,
            interval=options.readiness_interval,
            timeout=options.readiness_timeout,
            stale_after=options.readiness_stale_after,
        ),
        events=OperatorEvents(options.event_capacity),
        metrics=_metrics(config, engine),
        origins=list(origins or []),
        jobs_enabled=config.server.jobs.enabled,
        recovery=ArtifactRecovery(
            engine.artifacts,
            interval_s=config.artifacts.retention.repair_interval_secs,
            max_scan=config.artifacts.retention.max_scan_entries,
            stale_temp_secs=config.artifacts.retention.stale_temp_secs,
        ),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        env = options.env if options.env is not None else os.environ

        async def opening(step: Awaitable[None]) -> None:
            """A start-up step; its failure is reported and what was opened is closed."""
            try:
                await step
            except BridgeError as error:
                state.startup_error = error
                await _close(state, engine)
                raise

        async def open_jobs() -> None:
            state.jobs = await _open_jobs(
                config,
                engine,
                env,
                state.access.keys,
                state.drain,
                observer=state.metrics,
                webhooks=state.webhooks,
            )

        if config.server.keys.enabled:
            await opening(_open_keys(state, env))
        if config.server.webhooks.enabled:
            await opening(_open_webhooks(state, env))
        if state.jobs_enabled:
            await opening(open_jobs())
            assert state.jobs is not None
            state.readiness.dependencies.append(state.jobs.jobs.healthy)
        if state.webhooks is not None:
            state.webhooks.start()
        if engine.object_store is not None:
            state.readiness.dependencies.append(_bucket_answers(engine.object_store))
        state.readiness.start()
        if state.recovery is not None:
            state.recovery.start()
        try:
            yield
        finally:
            if state.recovery is not None:
                await state.recovery.stop()
            await state.readiness.stop()
            if state.metrics is not None:
                state.metrics.gauges.stop()
            await _close(state, engine)

    app = FastAPI(
        title=TITLE,
        version=__version__,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        lifespan=with_tracing(lifespan, traces),
        separate_input_output_schemas=False,
    )
    app.state.bridge = state
    install_error_handlers(app)
    for router in _routers(state):
        app.include_router(router)
    app.add_middleware(
        BridgeMiddleware,
        settings=_middleware_settings(config),
        events=state.events,
        drain=state.drain,
        spans=traces.requests if traces is not None else None,
    )
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
    return app
