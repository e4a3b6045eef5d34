"""Gauges read from the stores at scrape time: key quotas, jobs, pool accounts, storage.

Prometheus's collector interface is synchronous, and these readings need the database or
a provider's hook, so they are never taken inside ``collect``: ``GET /metrics`` first awaits
:meth:`ScrapeGauges.refresh`, which reads each source on the event loop's own terms
(awaitable stores, worker threads), then renders from what was read. Its cost is bounded:

* a reading younger than ``server.metrics.scrape_cache_ms`` is reused, so any number of
  scrapers (an HA pair of Prometheus servers, a curl loop) cost one read per source per
  period, and concurrent scrapes share one refresh;
* each source gets ``server.metrics.scrape_timeout_ms``; one that does not answer in time
  keeps its previous reading (``imagegen_bridge_scrape_source_up{source} 0`` and a growing
  ``…_age_seconds``) and is not started again while its read is still running;
* key quota series exist only for keys within the key label budget.

The sources: ``keys`` (one read of the key table), ``jobs`` (the job store's counts, the
same query as ``/v1/diagnostics``), ``providers`` (each provider's ``diagnostics()`` hook,
as ``/v1/diagnostics/extended`` calls it; a Codex pool may read ``wham/usage`` for an
account whose reading is older than its ``quota_cache_ms``). Storage health is in memory
and read at every scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, get_args

from prometheus_client.core import GaugeMetricFamily, Metric

from imagebridge.contract.errors import BridgeError
from imagebridge.engine.provider import Provider, diagnostics_owner
from imagebridge.engine.storage_faults import STORAGE_HEALTH, StorageArea
from imagebridge.jobs.manager import JobManager
from imagebridge.keys import KeyService
from imagebridge.server.metrics.labels import OTHER, LabelBudget
from imagebridge.storage.rules.keys import WINDOWS

__all__ = ["SOURCES", "ScrapeGauges"]

logger = logging.getLogger("imagebridge.server")

SOURCES: Final = ("keys", "jobs", "providers")
_JOB_STATUSES: Final = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")
_JOB_LIMITS: Final = ("max_pending", "max_running", "max_retained", "max_database_bytes")
_KEY_STATES: Final = ("active", "expired", "revoked")


@dataclass(frozen=True, slots=True)
class _KeyQuota:
    key: str
    window: str
    limit: int
    used: int
    reset_at: int


@dataclass(frozen=True, slots=True)
class _AccountReading:
    provider: str
    account: str
    reason: str | None
    remaining_percent: float | None
    windows: tuple[tuple[str, float, int | None], ...]
    """``(window, used percent, reset Unix time)`` of each image window."""


@dataclass(slots=True)
class _Source:
    value: Any = None
    read_at: float | None = None
    up: bool = False
    task: asyncio.Task[Any] | None = None


@dataclass(slots=True)
class ScrapeGauges:
    """The readings, refreshed by :meth:`refresh` and rendered by :meth:`snapshot`."""

    key_budget: LabelBudget
    cache_s: float = 10.0
    timeout_s: float = 2.0
    clock: Callable[[], float] = time.monotonic
    _sources: dict[str, _Source] = field(default_factory=lambda: {s: _Source() for s in SOURCES})
    _lock: asyncio.Lock | None = None
    _refreshed_at: float | None = None

    async def refresh(
        self,
        *,
        keys: KeyService | None,
        jobs: JobManager | None,
        providers: Sequence[Provider],
    ) -> None:
        """Read every source unless the last reading is younger than ``cache_s``."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = self.clock()
            if self._refreshed_at is not None and now - self._refreshed_at < self.cache_s:
                return
            reads: dict[str, Callable[[], Awaitable[Any]] | None] = {
                "keys": None if keys is None else lambda: _read_keys(keys),
                "jobs": None if jobs is None else jobs.statistics,
                "providers": lambda: _read_accounts(providers, self.timeout_s),
            }
            await asyncio.gather(*(self._read(name, read) for name, read in reads.items()))
            self._refreshed_at = self.clock()

    async def _read(self, name: str, read: Callable[[], Awaitable[Any]] | None) -> None:
        source = self._sources[name]
        if read is None:
            self._sources[name] = _Source()
            return
        if source.task is None:  # else the last read is still running: wait for it again
            source.task = asyncio.ensure_future(read())
            source.task.add_done_callback(functools.partial(self._landed, source, name))
        done, _ = await asyncio.wait({source.task}, timeout=self.timeout_s)
        if not done:  # left running; its answer is kept when it lands
            source.up = False
            logger.warning("a metrics source did not answer in time", extra={"source": name})

    def _landed(self, source: _Source, name: str, task: asyncio.Task[Any]) -> None:
        """A read ended (in time or not): keep its answer, or the last one on failure."""
        source.task = None
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            source.up = False
            code = error.code.value if isinstance(error, BridgeError) else "internal"
            logger.warning("a metrics source failed", extra={"source": name, "code": code})
            return
        source.value = task.result()
        source.up = True
        source.read_at = self.clock()

    def stop(self) -> None:
        """Cancel reads still running (the app is shutting down)."""
        for source in self._sources.values():
            if source.task is not None and not source.task.done():
                source.task.cancel()

    def snapshot(self) -> Callable[[], Iterator[Metric]]:
        """The readings now (storage health read at this moment); families on any thread."""
        now = self.clock()
        status = {
            name: (source.up, None if source.read_at is None else now - source.read_at)
            for name, source in self._sources.items()
            if source.value is not None or source.task is not None
        }
        keys = self._sources["keys"].value
        quotas, states = ([], {}) if keys is None else self._key_readings(keys)
        jobs = self._sources["jobs"].value
        accounts = self._sources["providers"].value or []
        storage = STORAGE_HEALTH.reasons()
        return lambda: _families(status, quotas, states, jobs, accounts, storage)

    def _key_readings(
        self, reading: tuple[list[_KeyQuota], dict[str, int], list[str]]
    ) -> tuple[list[_KeyQuota], dict[str, int]]:
        """Quota rows of keys within the label budget (admitted here in creation order)."""
        quotas, states, names = reading
        labelled = {name for name in names if self.key_budget.label(name) != OTHER}
        return [row for row in quotas if row.key in labelled], states


async def _read_keys(keys: KeyService) -> tuple[list[_KeyQuota], dict[str, int], list[str]]:
    """Every key's windows now: quota rows of active keys with limits, counts by state,
    and active keys' names oldest first."""
    records = await keys.records()
    windows = keys.windows()
    states = dict.fromkeys(_KEY_STATES, 0)
    quotas: list[_KeyQuota] = []
    names: list[str] = []
    for record in sorted(records, key=lambda r: (r.created_at, r.id)):
        state = record.state(windows.now)
        states[state] = states.get(state, 0) + 1
        if state != "active":
            continue
        names.append(record.name)
        for window in WINDOWS:
            limit = record.limits.window_limit(window)
            if limit is not None:
                used = record.used_in(window, windows.start(window))
                quotas.append(_KeyQuota(record.name, window, limit, used, windows.end(window)))
    return quotas, states, names


async def _read_accounts(providers: Sequence[Provider], timeout_s: float) -> list[_AccountReading]:
    """Each pool account of each provider with a ``diagnostics()`` hook (docs/accounts.md)."""
    owners = [(p.name, diagnostics_owner(p)) for p in providers]
    owners = [(name, owner) for name, owner in owners if owner is not None]

    async def one(name: str, owner: Any) -> list[_AccountReading]:
        with contextlib.suppress(Exception):  # a provider's hook never fails a scrape
            body = await asyncio.wait_for(owner.diagnostics(), timeout_s)
            return _accounts_of(name, body)
        return []

    answers = await asyncio.gather(*(one(name, owner) for name, owner in owners))
    return [reading for answer in answers for reading in answer]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _accounts_of(provider: str, body: object) -> list[_AccountReading]:
    """The pool's accounts in a provider's diagnostics (``accounts.accounts``)."""
    pool = body.get("accounts") if isinstance(body, dict) else None
    items = pool.get("accounts") if isinstance(pool, dict) else None
    readings = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        found = item.get("quota")
        quota: dict[str, Any] = found if isinstance(found, dict) else {}
        windows: dict[str, tuple[str, float, int | None]] = {}
        for window in quota.get("image_windows") or ():
            if not isinstance(window, dict):
                continue
            label = window.get("label") or window.get("name")
            used = _number(window.get("used_percent"))
            if isinstance(label, str) and used is not None and label not in windows:
                reset = _number(window.get("resets_at"))
                windows[label] = (label, used, None if reset is None else int(reset))
        reason = item.get("reason")
        readings.append(
            _AccountReading(
                provider=provider,
                account=item["name"],
                reason=None if item.get("ready") else str(reason or "unavailable"),
                remaining_percent=_number(quota.get("image_remaining_percent")),
                windows=tuple(windows.values()),
            )
        )
    return readings


def _families(
    status: dict[str, tuple[bool, float | None]],
    quotas: list[_KeyQuota],
    key_states: dict[str, int],
    jobs: dict[str, Any] | None,
    accounts: list[_AccountReading],
    storage: dict[str, str],
) -> Iterator[Metric]:
    up = GaugeMetricFamily(
        "imagegen_bridge_scrape_source_up",
        "Whether a scrape-time source (keys, jobs, providers) answered its last read in time.",
        labels=("source",),
    )
    age = GaugeMetricFamily(
        "imagegen_bridge_scrape_source_age_seconds",
        "Age of the reading a scrape-time source's gauges show.",
        labels=("source",),
    )
    for name, (answered, seconds) in sorted(status.items()):
        up.add_metric([name], 1.0 if answered else 0.0)
        if seconds is not None:
            age.add_metric([name], seconds)
    yield up
    yield age
    yield from _key_families(quotas, key_states)
    if jobs is not None:
        yield from _job_families(jobs)
    yield from _account_families(accounts)
    degraded = GaugeMetricFamily(
        "imagegen_bridge_storage_degraded",
        "1 while a storage area is in fault (no space, I/O error, read-only, database away).",
        labels=("area",),
    )
    fault = GaugeMetricFamily(
        "imagegen_bridge_storage_fault",
        "The reason of each storage area in fault now (present only during a fault).",
        labels=("area", "reason"),
    )
    for area in get_args(StorageArea):
        reason = storage.get(area)
        degraded.add_metric([area], 0.0 if reason is None else 1.0)
        if reason is not None:
            fault.add_metric([area, reason], 1.0)
    yield degraded
    yield fault


def _key_families(quotas: list[_KeyQuota], states: dict[str, int]) -> Iterator[Metric]:
    if not states:
        return
    counted = GaugeMetricFamily(
        "imagegen_bridge_keys", "API keys in the key store by state.", labels=("state",)
    )
    for state, count in sorted(states.items()):
        counted.add_metric([state], float(count))
    yield counted
    labels = ("key", "window")
    limit = GaugeMetricFamily(
        "imagegen_bridge_key_quota_limit", "An API key's image limit per window.", labels=labels
    )
    used = GaugeMetricFamily(
        "imagegen_bridge_key_quota_used",
        "Images reserved on an API key in the window's current period.",
        labels=labels,
    )
    remaining = GaugeMetricFamily(
        "imagegen_bridge_key_quota_remaining",
        "Images an API key may still reserve in the window's current period.",
        labels=labels,
    )
    reset = GaugeMetricFamily(
        "imagegen_bridge_key_quota_reset_timestamp_seconds",
        "When the window's current period ends (Unix time).",
        labels=labels,
    )
    for row in sorted(quotas, key=lambda r: (r.key, r.window)):
        values = [row.key, row.window]
        limit.add_metric(values, float(row.limit))
        used.add_metric(values, float(row.used))
        remaining.add_metric(values, float(max(0, row.limit - row.used)))
        reset.add_metric(values, float(row.reset_at))
    yield from (limit, used, remaining, reset)


def _job_families(stats: dict[str, Any]) -> Iterator[Metric]:
    jobs = GaugeMetricFamily(
        "imagegen_bridge_jobs",
        "Durable jobs in the store by status (the whole shared queue in shared mode).",
        labels=("status",),
    )
    for status in _JOB_STATUSES:
        jobs.add_metric([status], float(stats.get(status) or 0))
    yield jobs
    limits = GaugeMetricFamily(
        "imagegen_bridge_jobs_limit", "The job manager's configured bounds.", labels=("limit",)
    )
    for name in _JOB_LIMITS:
        value = _number(stats.get(name))
        if value is not None:
            limits.add_metric([name], value)
    yield limits
    yield GaugeMetricFamily(
        "imagegen_bridge_jobs_database_bytes",
        "Size of the jobs database.",
        value=float(stats.get("database_bytes") or 0),
    )
    yield GaugeMetricFamily(
        "imagegen_bridge_jobs_active_workers",
        "Jobs claimed or running in this instance.",
        value=float(stats.get("active_workers") or 0),
    )


def _account_families(accounts: list[_AccountReading]) -> Iterator[Metric]:
    if not accounts:
        return
    labels = ("provider", "account")
    blocked = GaugeMetricFamily(
        "imagegen_bridge_account_blocked",
        "1 for the reason a pool account is skipped now (quota_exhausted, below_minimum, "
        "rate_limited, a login refusal, an open breaker).",
        labels=(*labels, "reason"),
    )
    remaining = GaugeMetricFamily(
        "imagegen_bridge_account_quota_remaining_percent",
        "Image quota left on a pool account (its fullest image window), in percent.",
        labels=labels,
    )
    used = GaugeMetricFamily(
        "imagegen_bridge_account_quota_used_percent",
        "How full each image window of a pool account is, in percent.",
        labels=(*labels, "window"),
    )
    reset = GaugeMetricFamily(
        "imagegen_bridge_account_quota_reset_timestamp_seconds",
        "When each image window of a pool account resets (Unix time).",
        labels=(*labels, "window"),
    )
    for row in sorted(accounts, key=lambda r: (r.provider, r.account)):
        names = [row.provider, row.account]
        if row.reason is not None:
            blocked.add_metric([*names, row.reason], 1.0)
        if row.remaining_percent is not None:
            remaining.add_metric(names, row.remaining_percent)
        for window, percent, resets_at in row.windows:
            used.add_metric([*names, window], percent)
            if resets_at is not None:
                reset.add_metric([*names, window], float(resets_at))
    yield from (blocked, remaining, used, reset)
