"""Settings of the app-server transport: what to spawn and every bound it enforces.

A plain frozen dataclass, so the transport never reads configuration files; the surface
that wires the bridge copies the ``providers.codex_app_server`` keys into it (the field
names are the config keys). Defaults and hard maxima are the original's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "MAX_NOTIFICATION_BUFFER_BYTES",
    "MAX_NOTIFICATION_BYTES",
    "MAX_RESTART_BACKOFF_MS",
    "MAX_RPC_MESSAGE_BYTES",
    "AppServerOptions",
]

MiB = 1024 * 1024
MAX_RPC_MESSAGE_BYTES = 64 * MiB
MAX_NOTIFICATION_BYTES = 48 * MiB
MAX_NOTIFICATION_CAPACITY = 64
MAX_NOTIFICATION_BUFFER_BYTES = 256 * MiB
MAX_RESTART_BACKOFF_MS = 30_000


def _next_power_of_two(value: int) -> int:
    return 1 << max(0, value - 1).bit_length()


@dataclass(frozen=True, slots=True)
class AppServerOptions:
    """How to run ``<executable> app-server <args>`` and the limits of its JSON-RPC link."""

    executable: str = "codex"
    args: tuple[str, ...] = ()
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for the child, on top of the bridge's own (which is inherited)."""
    codex_home: Path | None = None
    """Sets ``CODEX_HOME`` for the child; ``None`` passes the bridge's own through."""
    rpc_max_message_bytes: int = 64 * MiB
    rpc_max_notification_bytes: int = 48 * MiB
    rpc_timeout_ms: int = 60_000
    notification_capacity: int = 4
    shutdown_timeout_ms: int = 5_000
    restart_backoff_ms: int = 250
    stderr_buffer_bytes: int = 64 * 1024
    """Added: size of the ring buffer that keeps the tail of the child's stderr."""
    slow_consumer_timeout_ms: int = 10_000
    """Added: how long the reader waits for a full notification channel before the
    consumer is dropped with ``overloaded`` (the link is never blocked for longer)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", dict(self.env))
        if not self.executable.strip():
            raise _bad("executable", "must not be empty")
        _check_range(
            "rpc_max_message_bytes", self.rpc_max_message_bytes, 1024, MAX_RPC_MESSAGE_BYTES
        )
        _check_range(
            "rpc_max_notification_bytes",
            self.rpc_max_notification_bytes,
            1024,
            min(MAX_NOTIFICATION_BYTES, self.rpc_max_message_bytes),
        )
        _check_range("rpc_timeout_ms", self.rpc_timeout_ms, 1, 24 * 3600 * 1000)
        _check_range(
            "notification_capacity", self.notification_capacity, 1, MAX_NOTIFICATION_CAPACITY
        )
        buffered = self.rpc_max_notification_bytes * _next_power_of_two(self.notification_capacity)
        if buffered > MAX_NOTIFICATION_BUFFER_BYTES:
            raise _bad(
                "notification_capacity",
                "rpc_max_notification_bytes × next power of two of notification_capacity "
                "must not exceed 256 MiB",
            )
        _check_range("shutdown_timeout_ms", self.shutdown_timeout_ms, 1, 600_000)
        _check_range("restart_backoff_ms", self.restart_backoff_ms, 0, MAX_RESTART_BACKOFF_MS)
        _check_range("stderr_buffer_bytes", self.stderr_buffer_bytes, 1024, 16 * MiB)
        _check_range("slow_consumer_timeout_ms", self.slow_consumer_timeout_ms, 1, 600_000)

    @property
    def rpc_timeout(self) -> float:
        return self.rpc_timeout_ms / 1000

    @property
    def shutdown_timeout(self) -> float:
        return self.shutdown_timeout_ms / 1000

    @property
    def restart_backoff(self) -> float:
        return self.restart_backoff_ms / 1000

    @property
    def slow_consumer_timeout(self) -> float:
        return self.slow_consumer_timeout_ms / 1000


def _bad(name: str, problem: str) -> BridgeError:
    return BridgeError(
        ErrorCode.CONFIGURATION,
        f"providers.codex_app_server.{name} {problem}",
        details={"field": f"providers.codex_app_server.{name}"},
    )


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(name, f"must be an integer from {low} to {high}")
