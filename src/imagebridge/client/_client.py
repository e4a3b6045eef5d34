"""The two clients: :class:`ImageBridgeClient` (blocking) and :class:`AsyncImageBridgeClient`.

Both take the same settings, expose the same namespaces (``images``, ``jobs``,
``presets``, ``providers``, ``sessions``, ``health``, ``artifacts``) and raise only
:class:`~imagebridge.client.BridgeAPIError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

import httpx

from imagebridge.client._base_client import AsyncTransport, SyncTransport
from imagebridge.client._config import ClientSettings, TimeoutTypes, resolve_settings
from imagebridge.client._retry import RetryPolicy
from imagebridge.client.resources import (
    Artifacts,
    AsyncArtifacts,
    AsyncHealth,
    AsyncImages,
    AsyncJobs,
    AsyncPresets,
    AsyncProviders,
    AsyncSessions,
    Health,
    Images,
    Jobs,
    Presets,
    Providers,
    Sessions,
)
from imagebridge.client.resources.operations import diagnostics_spec

__all__ = ["AsyncImageBridgeClient", "ImageBridgeClient"]


def _settings(
    base_url: str | None,
    token: str | None,
    timeout: TimeoutTypes | None,
    max_retries: int | None,
    retry: RetryPolicy | None,
    max_response_bytes: int | None,
    max_stream_bytes: int | None,
    default_headers: Mapping[str, str] | None,
    allow_insecure_token: bool,
    env: Mapping[str, str] | None,
) -> ClientSettings:
    return resolve_settings(
        base_url=base_url,
        token=token,
        timeout=timeout,
        retry=retry,
        max_retries=max_retries,
        max_response_bytes=max_response_bytes,
        max_stream_bytes=max_stream_bytes,
        default_headers=default_headers,
        allow_insecure_token=allow_insecure_token,
        env=env,
    )


class ImageBridgeClient:
    """A blocking client for one bridge.

    ``base_url`` defaults to ``$IMAGEGEN_BRIDGE_URL``, then ``http://127.0.0.1:8787``;
    ``token`` to ``$IMAGEGEN_BRIDGE_TOKEN``. ``timeout`` is seconds (or an
    ``httpx.Timeout``); the default allows 10 minutes of silence while a generation runs.
    ``max_retries`` (default 2) applies only where retrying cannot run work twice.
    ``http_client`` lets you bring your own ``httpx.Client`` (proxies, certificates).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: TimeoutTypes | None = None,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        max_response_bytes: int | None = None,
        max_stream_bytes: int | None = None,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
        allow_insecure_token: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        settings = _settings(
            base_url,
            token,
            timeout,
            max_retries,
            retry,
            max_response_bytes,
            max_stream_bytes,
            default_headers,
            allow_insecure_token,
            env,
        )
        self._transport = SyncTransport(settings, http_client)
        self.images = Images(self._transport)
        self.jobs = Jobs(self._transport)
        self.presets = Presets(self._transport)
        self.providers = Providers(self._transport)
        self.sessions = Sessions(self._transport)
        self.health = Health(self._transport)
        self.artifacts = Artifacts(self._transport)

    @property
    def base_url(self) -> str:
        return self._transport.settings.base_url

    @property
    def settings(self) -> ClientSettings:
        return self._transport.settings

    def diagnostics(
        self, *, extended: bool = False, request_id: str | None = None
    ) -> dict[str, Any]:
        """``GET /v1/diagnostics``: the bridge's redacted operator state (a JSON object).

        ``extended=True`` reads ``/v1/diagnostics/extended`` instead: the same document plus
        imagebridge's additions (circuit breakers, shared-queue leases, provider extras such
        as quota windows). The original bridge has no such route (404).
        """
        return self._transport.execute(diagnostics_spec(request_id, extended=extended))

    def close(self) -> None:
        """Release connections (a client passed as ``http_client`` stays open)."""
        self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ImageBridgeClient(base_url={self.base_url!r})"


class AsyncImageBridgeClient:
    """The asynchronous client; same arguments as :class:`ImageBridgeClient`."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: TimeoutTypes | None = None,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        max_response_bytes: int | None = None,
        max_stream_bytes: int | None = None,
        default_headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        allow_insecure_token: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        settings = _settings(
            base_url,
            token,
            timeout,
            max_retries,
            retry,
            max_response_bytes,
            max_stream_bytes,
            default_headers,
            allow_insecure_token,
            env,
        )
        self._transport = AsyncTransport(settings, http_client)
        self.images = AsyncImages(self._transport)
        self.jobs = AsyncJobs(self._transport)
        self.presets = AsyncPresets(self._transport)
        self.providers = AsyncProviders(self._transport)
        self.sessions = AsyncSessions(self._transport)
        self.health = AsyncHealth(self._transport)
        self.artifacts = AsyncArtifacts(self._transport)

    @property
    def base_url(self) -> str:
        return self._transport.settings.base_url

    @property
    def settings(self) -> ClientSettings:
        return self._transport.settings

    async def diagnostics(
        self, *, extended: bool = False, request_id: str | None = None
    ) -> dict[str, Any]:
        return await self._transport.execute(diagnostics_spec(request_id, extended=extended))

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncImageBridgeClient(base_url={self.base_url!r})"
