"""Providers by name, the default route, discovery and readiness."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass

from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.provider import Provider

__all__ = ["PROVIDER_NAME_RE", "ProviderReadiness", "ProviderRegistry", "is_provider_name"]

PROVIDER_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,63}$")


def is_provider_name(name: str) -> bool:
    return PROVIDER_NAME_RE.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class ProviderReadiness:
    provider: str
    error: BridgeError | None = None

    @property
    def ready(self) -> bool:
        return self.error is None

    def to_wire(self) -> dict[str, object]:
        if self.error is None:
            return {"provider": self.provider, "status": "ready"}
        return {"provider": self.provider, "status": "not_ready", "error": self.error.to_dict()}


class ProviderRegistry:
    """An immutable set of providers with one default."""

    def __init__(self, providers: Iterable[Provider], default: str) -> None:
        self._providers: dict[str, Provider] = {}
        for provider in providers:
            name = provider.name
            if not is_provider_name(name):
                raise BridgeError(
                    ErrorCode.CONFIGURATION, "provider names must be lowercase ASCII identifiers"
                )
            if name in self._providers:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    "provider name is registered twice",
                    details={"provider": name},
                )
            self._providers[name] = provider
        if not self._providers:
            raise BridgeError(ErrorCode.CONFIGURATION, "no image provider is enabled")
        if default not in self._providers:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "the default provider is not registered",
                details={"provider": default},
            )
        self.default = default

    @property
    def names(self) -> list[str]:
        return sorted(self._providers)

    def providers(self) -> list[Provider]:
        return [self._providers[name] for name in self.names]

    def resolve(self, name: str | None) -> Provider:
        """The named provider, or the default for ``None``."""
        if name is None:
            return self._providers[self.default]
        if not is_provider_name(name):
            raise BridgeError(
                ErrorCode.CONFIGURATION, "provider names must be lowercase ASCII identifiers"
            )
        provider = self._providers.get(name)
        if provider is None:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "requested provider is not registered",
                details={"provider": name},
            )
        return provider

    def descriptors(self) -> list[ProviderDescriptor]:
        return [provider.descriptor for provider in self.providers()]

    async def capabilities(self, name: str | None, model: str | None) -> ProviderCapabilities:
        """Discover and check one capability document (identity and consistency)."""
        provider = self.resolve(name)
        try:
            caps = await provider.capabilities(model)
        except BridgeError as error:
            raise error.with_provider(provider.name) from None
        if caps.provider != provider.name:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "provider capability identity does not match its registry identity",
                provider=provider.name,
            )
        caps.validate_consistency()
        return caps

    async def readiness(self, timeout: float = 10.0) -> list[ProviderReadiness]:
        """Run every provider's ``check_ready`` concurrently, each bounded by ``timeout``."""

        async def probe(provider: Provider) -> ProviderReadiness:
            try:
                await asyncio.wait_for(provider.check_ready(), timeout)
            except BridgeError as error:
                return ProviderReadiness(provider.name, error.with_provider(provider.name))
            except TimeoutError:
                timeout_error = BridgeError(
                    ErrorCode.TIMEOUT, "provider readiness probe timed out", provider=provider.name
                )
                return ProviderReadiness(provider.name, timeout_error)
            return ProviderReadiness(provider.name)

        return list(await asyncio.gather(*(probe(p) for p in self.providers())))
