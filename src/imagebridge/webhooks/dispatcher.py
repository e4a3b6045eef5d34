"""Delivery off the request path: a background loop that claims due deliveries and sends them.

The loop claims at most as many deliveries as it has free attempt slots
(``max_concurrent``), each under a lease of ``lease_secs`` (longer than one attempt's
timeout), so one instance delivers each at a time; it wakes on an emit in this process, when
an attempt ends, or every ``poll_interval_ms`` (events written by a job store or another
instance are found by that poll). Each attempt is signed afresh (a new
``webhook-timestamp``, the same ``webhook-id`` and body) and its outcome recorded, fenced by
the lease:

* a 2xx answer: ``delivered``;
* anything else: due again after an exponential backoff with jitter (``retry_initial_ms``
  doubling per attempt, at most ``retry_max_interval_ms``, each pause drawn between half and
  all of that), unless the next try would fall after the delivery's deadline (its retry
  period): then ``failed``, kept for the admin.

A killed instance records nothing: its claimed deliveries come back when their lease runs
out, and are sent again (at least once; the receiver de-duplicates by ``webhook-id``).
Stopping (the SIGTERM drain) stops claiming, gives attempts in flight what is left of the
grace, then cancels them and hands their deliveries back at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from imagebridge.contract.errors import BridgeError
from imagebridge.engine.crash_points import crash_point
from imagebridge.storage.interfaces import WebhookStore
from imagebridge.storage.records import OutboxStatistics, WebhookSecrets, WebhookTarget
from imagebridge.webhooks.sender import Attempt, WebhookSender
from imagebridge.webhooks.settings import WebhookSettings
from imagebridge.webhooks.signing import signed_headers

__all__ = ["DeliveryObserver", "WebhookDispatcher", "backoff_ms", "signing_secrets"]

logger = logging.getLogger("imagebridge.webhooks")

DeliveryObserver = Callable[[str], None]
"""Told each attempt's outcome: ``delivered``, ``retried`` or ``failed`` (given up)."""

SECRET_MISSING = "webhook_secret_missing"  # noqa: S105 - an error code, not a secret
_MAINTENANCE_INTERVAL_S = 300.0


def backoff_ms(attempts: int, settings: WebhookSettings, rng: random.Random) -> int:
    """The pause before try ``attempts + 1``: exponential, capped, with jitter."""
    ceiling = min(
        settings.retry_max_interval_ms,
        settings.retry_initial_ms * 2 ** min(max(attempts - 1, 0), 40),
    )
    return max(1, int(ceiling * (0.5 + rng.random() / 2)))


def signing_secrets(
    secrets: WebhookSecrets, env: Mapping[str, str], now_ms: int
) -> list[str] | None:
    """The secrets that sign an attempt (the previous one too during a rotation's overlap);
    ``None`` when a configured endpoint's variable is unset here."""
    if secrets.secret is not None:
        current = secrets.secret
    elif secrets.secret_env is not None and env.get(secrets.secret_env):
        current = env[secrets.secret_env]
    else:
        return None
    previous = secrets.previous
    expires = secrets.previous_expires_at
    if previous is not None and expires is not None and expires > now_ms:
        return [current, previous]
    return [current]


@dataclass(slots=True)
class _Stats:
    backlog: OutboxStatistics | None = None


class WebhookDispatcher:
    """Claims and sends deliveries for one bridge instance (``owner``)."""

    def __init__(
        self,
        store: WebhookStore,
        sender: WebhookSender,
        settings: WebhookSettings,
        *,
        owner: str,
        env: Mapping[str, str],
        observer: DeliveryObserver | None = None,
        clock_ms: Callable[[], int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._store = store
        self._sender = sender
        self._settings = settings
        self.owner = owner
        self._env = env
        self.observer = observer
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._attempts: dict[str, asyncio.Task[None]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._stats = _Stats()
        self._last_maintenance = 0.0

    @property
    def backlog(self) -> OutboxStatistics | None:
        """Undelivered deliveries as last counted (each poll), for the metrics."""
        return self._stats.backlog

    @property
    def in_flight(self) -> int:
        return len(self._attempts)

    def wake(self) -> None:
        """Look for due deliveries now (an event was just written)."""
        self._wake.set()

    def start(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._run(), name="imagebridge-webhooks")

    async def stop(self, grace_s: float = 0.0) -> None:
        """Stop claiming; attempts in flight get ``grace_s``, then are cancelled and their
        deliveries handed back (due at once, for this or another instance)."""
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        pending = set(self._attempts.values())
        if pending and grace_s > 0:
            await asyncio.wait(pending, timeout=grace_s)
        cut = [delivery for delivery, task in self._attempts.items() if not task.done()]
        for delivery in cut:
            self._attempts[delivery].cancel()
        if self._attempts:
            await asyncio.gather(*self._attempts.values(), return_exceptions=True)
        if cut:
            try:
                await self._store.release(cut, self.owner, now_ms=self._clock_ms())
            except BridgeError as error:  # they come back when their lease runs out
                logger.warning(
                    "could not hand webhook deliveries back", extra={"code": error.code.value}
                )

    async def run_once(self) -> int:
        """Claim what is due for the free slots and start those attempts; how many."""
        free = self._settings.max_concurrent - len(self._attempts)
        if free <= 0 or self._stopping:
            return 0
        targets = await self._store.claim(
            self.owner,
            limit=free,
            now_ms=self._clock_ms(),
            lease_ms=self._settings.lease_secs * 1000,
        )
        for target in targets:
            task = asyncio.create_task(self._attempt(target), name=f"webhook-{target.id}")
            self._attempts[target.id] = task
            task.add_done_callback(self._done)
        return len(targets)

    def _done(self, task: asyncio.Task[None]) -> None:
        for delivery_id, running in list(self._attempts.items()):
            if running is task:
                del self._attempts[delivery_id]
        self._wake.set()

    async def _run(self) -> None:
        pause = self._settings.poll_interval_ms / 1000
        failing = False
        while not self._stopping:
            self._wake.clear()
            try:
                await self.run_once()
                self._stats.backlog = await self._store.statistics()
                await self._maintain()
                if failing:
                    logger.info("webhook outbox reachable again")
                failing = False
            except BridgeError as error:
                if not failing:  # once per outage
                    logger.warning(
                        "webhook outbox unavailable; retrying", extra={"code": error.code.value}
                    )
                failing = True
            except Exception:
                logger.exception("webhook delivery loop failed unexpectedly")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self._wake.wait()

    async def _maintain(self) -> None:
        """Prune delivered and failed deliveries past their retention (bounded batches)."""
        now = time.monotonic()
        if now - self._last_maintenance < _MAINTENANCE_INTERVAL_S:
            return
        self._last_maintenance = now
        await self._store.prune(
            before_ms=self._clock_ms() - self._settings.retention_secs * 1000,
            max_retained=self._settings.max_retained,
        )

    async def _attempt(self, target: WebhookTarget) -> None:
        try:
            crash_point("webhook.delivery_claimed")
            outcome = await self._send(target)
            crash_point("webhook.delivery_sent")  # the receiver has it; nothing recorded yet
            await self._record(target, outcome)
        except asyncio.CancelledError:
            raise
        except BridgeError as error:  # the store is away: the lease brings it back
            logger.warning(
                "could not record a webhook attempt",
                extra={"delivery": target.id, "code": error.code.value},
            )
        except Exception:
            logger.exception("webhook attempt failed unexpectedly", extra={"delivery": target.id})

    async def _send(self, target: WebhookTarget) -> Attempt:
        if target.url is None:
            return Attempt(None, "webhook_endpoint_deleted", "the endpoint was deleted")
        now_ms = self._clock_ms()
        secrets = signing_secrets(target.secrets, self._env, now_ms)
        if secrets is None:
            return Attempt(
                None, SECRET_MISSING, "the endpoint's secret variable is not set on this instance"
            )
        body = target.payload.encode()
        headers = signed_headers(target.id, now_ms // 1000, body, secrets)
        return await self._sender.send(target.url, headers, body)

    async def _record(self, target: WebhookTarget, outcome: Attempt) -> None:
        now_ms = self._clock_ms()
        if outcome.delivered:
            result = "delivered"
            recorded = await self._store.finish(
                target.id, self.owner, status="delivered", now_ms=now_ms, http_status=outcome.status
            )
        else:
            due = now_ms + backoff_ms(target.attempts, self._settings, self._rng)
            gave_up = due > target.deadline_at or target.url is None
            result = "failed" if gave_up else "retried"
            recorded = await self._store.finish(
                target.id,
                self.owner,
                status="failed" if gave_up else "pending",
                now_ms=now_ms,
                next_attempt_at=None if gave_up else due,
                http_status=outcome.status,
                error_code=outcome.error_code,
                error=outcome.error,
            )
            logger.info(
                "webhook attempt failed",
                extra={
                    "delivery": target.id,
                    "attempt": target.attempts,
                    "code": outcome.error_code,
                    "status": outcome.status,
                    "gave_up": gave_up,
                },
            )
        if recorded and self.observer is not None:  # else the instance that took it over counts
            self.observer(result)
