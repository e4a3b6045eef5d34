"""Provider doubles for server tests (built on the engine's scriptable FakeProvider)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from imagebridge.application import PROVIDER_FACTORIES
from imagebridge.config import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.provider import Provider
from imagebridge.providers.mock import MockProvider
from tests.support import images
from tests.support.fakes import FakeProvider
from tests.support.images import png_bytes

if TYPE_CHECKING:
    from tests.server.conftest import LiveServer

__all__ = [
    "UnreadyProvider",
    "codex_fake",
    "mock_of",
    "mock_provider",
    "png",
    "png_b64",
    "ready_provider",
    "with_mock",
]


def png(width: int = 4, height: int = 4, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """The server tests' input image: a 4×4 PNG unless they say otherwise."""
    return png_bytes(width, height, color)


def png_b64(width: int = 4, height: int = 4) -> str:
    return images.png_b64(width, height, (200, 30, 30))


def ready_provider() -> FakeProvider:
    """Like the original's test provider "ready": count 1–2, auto size, png, 1×1 output."""
    return FakeProvider("ready")


def codex_fake() -> FakeProvider:
    """A ``codex-*`` named provider without mask support."""
    return FakeProvider("codex-fake")


class UnreadyProvider(FakeProvider):
    async def check_ready(self) -> None:
        raise BridgeError(
            ErrorCode.AUTHENTICATION,
            "credentials are missing",
            details={"path": "/secret/home/.codex/auth.json", "retry_after_ms": 5},
        )


def mock_provider(config: BridgeConfig) -> Provider:
    """The configured mock provider exactly as the application builds it (with fan-out)."""
    return PROVIDER_FACTORIES["mock"](config)


def with_mock(*others: Provider) -> object:
    """A provider spec: the configured mock plus ``others``."""

    def build(config: BridgeConfig) -> Sequence[Provider]:
        return [mock_provider(config), *others]

    return build


def mock_of(server: LiveServer) -> MockProvider:
    """The served app's offline mock provider: its counters (``in_flight``,
    ``cancellations``) say where a request is."""
    mock = server.state.find_provider(MockProvider)
    assert mock is not None
    return mock
