"""Bounds of the durable job manager: ``server.jobs.*`` plus two process-local limits.

The manager never reads configuration itself; whoever wires the bridge builds these settings
(:meth:`JobManagerSettings.from_config` accepts the config's ``server.jobs`` section).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Protocol

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["JobConfigSection", "JobManagerSettings"]

MiB = 1024 * 1024


class JobConfigSection(Protocol):
    """The part of ``server.jobs`` the manager needs (the config model satisfies it)."""

    @property
    def max_pending(self) -> int: ...
    @property
    def max_running(self) -> int: ...
    @property
    def retention_secs(self) -> int: ...
    @property
    def max_retained(self) -> int: ...
    @property
    def max_retained_bytes(self) -> int: ...
    @property
    def max_database_bytes(self) -> int: ...


@dataclass(frozen=True, slots=True)
class JobManagerSettings:
    """Defaults are the original's."""

    max_pending: int = 1_000
    """Queued rows (across scopes) above which new submissions are refused."""
    max_running: int = 4
    """Jobs executing at once."""
    retention_secs: int = 604_800
    """Terminal, non-favourite history older than this is pruned."""
    max_retained: int = 10_000
    """Terminal, non-favourite rows kept at most (newest first)."""
    max_retained_bytes: int = 256 * MiB
    """Logical bytes of terminal, non-favourite history kept at most."""
    max_database_bytes: int = 1024 * MiB
    """Logical size of the whole job table above which submissions are refused."""
    partial_preview_max_bytes: int = 16 * MiB
    """Largest decoded partial preview held in memory per running job."""
    shutdown_timeout_s: float = 1_860.0
    """How long :meth:`JobManager.shutdown` lets running jobs finish before interrupting them."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "shutdown_timeout_s":
                valid = (
                    isinstance(value, int | float)
                    and not isinstance(value, bool)
                    and math.isfinite(value)
                    and value >= 0
                )
            else:
                valid = isinstance(value, int) and not isinstance(value, bool) and value > 0
            if not valid:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    f"job manager setting {item.name} is out of range",
                    details={"field": f"server.jobs.{item.name}"},
                )

    @property
    def retention_period_s(self) -> float:
        """How often the retention loop prunes: half the retention, within 1..60 seconds."""
        return min(60.0, max(1.0, self.retention_secs / 2))

    @classmethod
    def from_config(
        cls,
        section: JobConfigSection,
        *,
        partial_preview_max_bytes: int = 16 * MiB,
        shutdown_timeout_s: float = 1_860.0,
    ) -> JobManagerSettings:
        return cls(
            max_pending=section.max_pending,
            max_running=section.max_running,
            retention_secs=section.retention_secs,
            max_retained=section.max_retained,
            max_retained_bytes=section.max_retained_bytes,
            max_database_bytes=section.max_database_bytes,
            partial_preview_max_bytes=partial_preview_max_bytes,
            shutdown_timeout_s=shutdown_timeout_s,
        )
