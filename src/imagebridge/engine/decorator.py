"""A provider that wraps another one without changing its registry identity.

Decorators (the fan-out emulation, the call log used by tests and benchmarks) add one
behaviour and must forward everything else unchanged, so the registry, readiness checks
and sessions still reach the transport. ``doctor`` unwraps decorators through ``inner``.
"""

from __future__ import annotations

from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse, SessionMetadata
from imagebridge.engine.provider import AccountCounters, Provider, ProviderContext

__all__ = ["ProviderDecorator"]


class ProviderDecorator(Provider):
    """Forwards every provider call to ``inner``; subclasses override what they add.

    Two members are deliberately not forwarded: ``execute_negotiated`` keeps the port's
    default, which runs this decorator's own :meth:`execute` (so what a subclass adds
    there is never bypassed), and for the same reason ``validates_requests`` stays the
    port's ``False`` rather than the inner provider's answer.
    """

    def __init__(self, inner: Provider) -> None:
        self.inner = inner

    @property
    def descriptor(self) -> ProviderDescriptor:
        return self.inner.descriptor

    async def capabilities(self, model: str | None) -> ProviderCapabilities:
        return await self.inner.capabilities(model)

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        return await self.inner.execute(request, context)

    async def check_ready(self) -> None:
        await self.inner.check_ready()

    async def get_session(self, key: str) -> SessionMetadata:
        return await self.inner.get_session(key)

    async def delete_session(self, key: str) -> None:
        await self.inner.delete_session(key)

    def restart_count(self) -> int | None:
        return self.inner.restart_count()

    def account_counters(self) -> list[AccountCounters]:
        return self.inner.account_counters()

    async def shutdown(self) -> None:
        await self.inner.shutdown()
