"""Wiring: turn a validated :class:`BridgeConfig` into a running engine.

This is the one place that reads configuration values and builds providers, the artifact
store, the input loader (the engine's input port), admission limits and breakers. Surfaces
(server, CLI, MCP) call :func:`build_application` and use the result; the engine itself
never sees the config.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from imagebridge.application.artifact_backend import choose_artifact_backend
from imagebridge.application.codex import (
    build_codex_images,
    build_codex_responses,
    shared_codex_pool,
)
from imagebridge.application.codex_app_server import build_codex_app_server_provider
from imagebridge.application.inputs import build_input_loader, image_limits
from imagebridge.application.limits import breaker_config, gate_limits
from imagebridge.application.openai import build_openai_provider, is_openai_provider
from imagebridge.artifacts.filesystem.links import LinkKeySource, SignedArtifactLinks
from imagebridge.artifacts.interfaces import ArtifactBackend
from imagebridge.artifacts.publication import Publication
from imagebridge.artifacts.s3.links import PresignedArtifactLinks
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine import tracing
from imagebridge.engine.decorator import ProviderDecorator
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.engine.idempotency import IdempotencyConfig
from imagebridge.engine.materialize import MaterializeLimits, Materializer
from imagebridge.engine.provider import Provider, ProviderContext
from imagebridge.engine.publishing import ArtifactLinker, PublishedArtifact
from imagebridge.engine.registry import ProviderRegistry
from imagebridge.engine.runtime import ImageRuntime, ImageRuntimeSettings
from imagebridge.engine.validation import RequestLimits
from imagebridge.providers.mock import MockProvider, MockSettings

ProviderFactory = Callable[[BridgeConfig], Provider]


def request_limits(config: BridgeConfig) -> RequestLimits:
    limits = config.runtime.request
    return RequestLimits(
        max_prompt_bytes=limits.max_prompt_bytes,
        max_negative_prompt_bytes=limits.max_negative_prompt_bytes,
        max_outputs=limits.max_outputs,
        max_inputs=limits.max_inputs,
        max_inline_encoded_bytes=limits.max_inline_encoded_bytes,
        max_edge=limits.max_edge,
        max_timeout_ms=limits.max_timeout_ms,
        max_identifier_bytes=limits.max_identifier_bytes,
    )


def _with_fanout(
    provider: Provider, native_count: int, max_outputs: int, parallel: int, config: BridgeConfig
) -> Provider:
    """Every provider whose native count is below its output limit goes through fan-out."""
    if native_count >= max_outputs:
        return provider
    return FanoutProvider(
        provider,
        max_outputs=max_outputs,
        max_parallel_outputs=parallel,
        limits=request_limits(config),
    )


class CallLogProvider(ProviderDecorator):
    """Appends ``<pid> <request id>`` to a file before each call of the provider it wraps.

    For tests and benchmarks that count provider calls across processes
    (``providers.mock.call_log``): each line is one ``O_APPEND`` write, so lines from
    several processes never interleave, and a line is written before the call starts, so a
    process killed mid-call still counts it. Nothing else (no prompt) is written.
    """

    def __init__(self, inner: Provider, path: Path) -> None:
        super().__init__(inner)
        self.path = path

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        line = f"{os.getpid()} {context.request_id}\n".encode()
        await asyncio.to_thread(self._append, line)
        return await self.inner.execute(request, context)

    def _append(self, line: bytes) -> None:
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)


def _mock(config: BridgeConfig) -> Provider:
    settings = config.providers.mock
    provider: Provider = MockProvider(
        MockSettings(
            native_count=settings.native_count,
            latency_ms=settings.latency_ms,
            latency_jitter_ms=settings.latency_jitter_ms,
            failure_rate=settings.failure_rate,
            seed=settings.seed,
            models=tuple(settings.models),
            max_sessions=settings.max_sessions,
        )
    )
    if settings.call_log is not None:
        provider = CallLogProvider(provider, Path(settings.call_log))
    return _with_fanout(
        provider,
        settings.native_count,
        settings.max_outputs,
        settings.max_parallel_outputs_value,
        config,
    )


class _Built(Protocol):
    """A built transport plus what the fan-out decorator needs to wrap it."""

    @property
    def provider(self) -> Provider: ...

    @property
    def native_count(self) -> int: ...

    @property
    def max_outputs(self) -> int: ...

    @property
    def max_parallel_outputs(self) -> int: ...


def _fanned_out(build: Callable[[BridgeConfig], _Built]) -> ProviderFactory:
    """A factory that builds a transport and wraps it in fan-out when it needs it."""

    def factory(config: BridgeConfig) -> Provider:
        built = build(config)
        return _with_fanout(
            built.provider,
            built.native_count,
            built.max_outputs,
            built.max_parallel_outputs,
            config,
        )

    return factory


def _openai_family(name: str) -> ProviderFactory:
    """``openai`` or one ``[providers.openai_compatible.<name>]`` instance."""
    return _fanned_out(lambda config: build_openai_provider(config, name))


PROVIDER_FACTORIES: dict[str, ProviderFactory] = {
    "mock": _mock,
    "openai": _openai_family("openai"),
    "codex-responses": _fanned_out(build_codex_responses),  # native count 1: fan-out wrapped
    "codex-images": _fanned_out(build_codex_images),
    "codex-app-server": _fanned_out(build_codex_app_server_provider),
}
"""Registered provider name → factory. Transports add themselves here."""


def build_providers(config: BridgeConfig) -> list[Provider]:
    """Instantiate every enabled provider; an enabled one we cannot build is an error.

    The Codex transports built here share one account pool."""
    providers: list[Provider] = []
    with shared_codex_pool():
        for name in config.enabled_providers():
            factory = PROVIDER_FACTORIES.get(name)
            if factory is None and is_openai_provider(config, name):
                factory = _openai_family(name)
            if factory is None:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    "an enabled provider is not available in this build",
                    details={"provider": name},
                )
            providers.append(factory(config))
    return providers


def runtime_settings(config: BridgeConfig, registered: Sequence[str]) -> ImageRuntimeSettings:
    runtime = config.runtime
    idempotency = runtime.idempotency
    return ImageRuntimeSettings(
        default_timeout_ms=runtime.default_timeout_ms,
        cancellation_grace_ms=runtime.cancellation_grace_ms,
        shutdown_grace_ms=runtime.shutdown_grace_ms,
        request_limits=request_limits(config),
        global_gate=gate_limits(runtime.global_),
        provider_default_gate=gate_limits(runtime.provider_default),
        provider_gates={
            name: gate_limits(gate)
            for name, gate in runtime.providers.items()
            if name in registered
        },
        breaker=breaker_config(runtime.circuit_breaker),
        breakers={name: breaker_config(runtime.circuit_breaker_for(name)) for name in registered},
        idempotency=IdempotencyConfig(
            max_entries=idempotency.max_entries,
            max_completed_bytes=idempotency.max_completed_bytes,
            completed_ttl_secs=idempotency.completed_ttl_secs,
            in_flight_ttl_secs=idempotency.in_flight_ttl_secs,
            unknown_ttl_secs=idempotency.unknown_ttl_secs,
        ),
        mask_feather_px=runtime.images.feather_px,
        size_match_window=runtime.images.size_match_window,
        prefer=runtime.images.prefer,
    )


@dataclass(slots=True)
class StoreSink:
    """The artifact store as the materializer's publication target.

    An adapter, not a copy: the chosen backend does the work (the filesystem store in a
    thread, or the S3 bucket), taking the engine's one
    :class:`~imagebridge.engine.publishing.Publication`, and only the artifact's public
    id and name reach the engine.
    """

    store: ArtifactBackend

    @property
    def backend(self) -> str:
        """``s3`` or ``filesystem``: what the ``artifact.publish`` spans name."""
        return "s3" if isinstance(self.store, S3ArtifactStore) else "filesystem"

    async def publish(self, publication: Publication) -> PublishedArtifact:
        attributes: tracing.Attributes = {
            tracing.BACKEND: self.backend,
            "imagebridge.artifact.bytes": len(publication.data),
        }
        with tracing.span(tracing.ARTIFACT_PUBLISH, attributes) as span:
            published = await self.store.publish(publication)
            span.set_attribute("imagebridge.artifact.id", published.id)
        return PublishedArtifact(id=published.id, name=published.name)

    async def attach_metadata(self, artifact_id: str, name: str, record: dict[str, Any]) -> str:
        return await self.store.attach_metadata(artifact_id, name, record)


@dataclass(slots=True)
class Application:
    """Everything a surface needs: the config, the runtime and the artifact backend.

    ``artifacts`` is the one backend ``artifacts.backend`` chose (or the one the surface
    passed to :func:`build_application`): where the engine publishes and the server reads.
    ``links`` are the bridge's own signed links, keyed like every instance on the same
    root (their key file is read on first use, whatever the backend).
    """

    config: BridgeConfig
    runtime: ImageRuntime
    artifacts: ArtifactBackend
    links: SignedArtifactLinks
    providers: list[Provider] = field(default_factory=list)

    @property
    def object_store(self) -> S3ObjectStore | None:
        """The bucket's connection when the backend is S3 (readiness checks it)."""
        return self.artifacts.objects if isinstance(self.artifacts, S3ArtifactStore) else None

    async def aclose(self) -> None:
        try:
            await self.runtime.shutdown()
        finally:
            if self.object_store is not None:
                await self.object_store.close()


def artifact_links(config: BridgeConfig) -> SignedArtifactLinks:
    """The signed links ``url`` outputs are, keyed like every instance on the same root."""
    artifacts = config.artifacts
    keys = LinkKeySource(artifacts.root, env_name=artifacts.url_signing_key_env)
    return SignedArtifactLinks(keys, artifacts.url_ttl_secs)


def url_linker(
    config: BridgeConfig, backend: ArtifactBackend, links: SignedArtifactLinks
) -> ArtifactLinker:
    """What a ``url`` output is: a presigned object URL with ``url_mode = "presigned"`` on
    the S3 backend, else the bridge's own signed link."""
    if config.artifacts.url_mode == "presigned" and isinstance(backend, S3ArtifactStore):
        return PresignedArtifactLinks(backend, config.artifacts.url_ttl_secs)
    return links


def build_application(
    config: BridgeConfig,
    *,
    providers: Sequence[Provider] | None = None,
    artifacts: ArtifactBackend | None = None,
) -> Application:
    """Build the engine for ``config`` (``providers`` replaces the configured set in tests;
    ``artifacts`` replaces the backend ``artifacts.backend`` chooses: surfaces that answer
    with local file paths pass the filesystem store they read those paths from)."""
    built = list(providers) if providers is not None else build_providers(config)
    registry = ProviderRegistry(built, default=config.default_provider)
    backend = artifacts if artifacts is not None else choose_artifact_backend(config)
    links = artifact_links(config)
    materializer = Materializer(
        MaterializeLimits(
            max_base64_chars=config.artifacts.max_base64_chars,
            max_response_bytes=config.artifacts.max_response_bytes,
            image=image_limits(config),
        ),
        artifacts=StoreSink(backend),
        public_base_url=config.artifacts.public_base_url,
        links=url_linker(config, backend, links),
    )
    runtime = ImageRuntime(
        registry,
        materializer,
        runtime_settings(config, registry.names),
        inputs=build_input_loader(config),
    )
    return Application(
        config=config, runtime=runtime, artifacts=backend, links=links, providers=built
    )
