"""The durable job manager's worker pool: the dispatch loop and each claimed job's run.

:class:`JobWorkers` is the half of :class:`~imagebridge.jobs.manager.JobManager` that turns a
scheduled job into a running one: one instance's dispatcher hands queued jobs, in order, to at
most ``max_running`` workers that claim each in the store; in shared mode
(:mod:`imagebridge.jobs.shared_mode`) the store hands out claimed jobs and
:meth:`JobWorkers._launch_claimed` runs them. Either way the run itself is
:class:`~imagebridge.jobs.execution.JobRunner`'s. Apart from the manager so that its submit,
cancel, list and lifecycle code stays readable on its own; the state is the manager's.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from imagebridge.contract.errors import BridgeError
from imagebridge.engine.cancellation import CancelToken
from imagebridge.jobs.execution import JobRunner
from imagebridge.jobs.previews import JobKey, PreviewCache
from imagebridge.jobs.retention import Retention
from imagebridge.jobs.tracing import JobTrace, claim_clock, describe_outcome
from imagebridge.storage.interfaces import JobStore
from imagebridge.storage.records import JobRecord

__all__ = ["JobWorkers"]

logger = logging.getLogger("imagebridge.jobs")


class JobWorkers:
    """Scheduling, dispatch and the workers of :class:`~imagebridge.jobs.manager.JobManager`
    (a mixin: the manager's ``__init__`` sets every attribute below)."""

    _store: JobStore
    _runner: JobRunner
    _previews: PreviewCache
    _pruning: Retention
    _instance_id: str
    _stopping: bool
    _queue: asyncio.Queue[JobKey]
    _scheduled: set[JobKey]
    _tokens: dict[JobKey, CancelToken]
    _tasks: set[asyncio.Task[None]]
    _slots: asyncio.Semaphore
    _running_ids: dict[str, CancelToken]
    _now: Callable[[], int]

    def _schedule(self, key: JobKey) -> None:
        if key in self._scheduled:
            return
        self._scheduled.add(key)
        self._queue.put_nowait(key)

    async def _dispatch(self) -> None:
        """Hand queued jobs, in order, to at most ``max_running`` workers."""
        while True:
            await self._slots.acquire()
            try:
                key = await self._queue.get()
            except BaseException:
                self._slots.release()
                raise
            if self._stopping:
                self._slots.release()
                return
            task = asyncio.create_task(self._work(key), name="imagebridge-job")
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._work_done, key=key))

    def _work_done(self, task: asyncio.Task[None], key: JobKey) -> None:
        self._tasks.discard(task)
        self._scheduled.discard(key)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "durable job worker failed",
                exc_info=task.exception(),
                extra={"job_id": key[1]},
            )

    async def _work(self, key: JobKey) -> None:
        scope, job_id = key
        if self._stopping:
            return
        # Registered before the claim, so a cancel racing with the claim is never lost.
        token = CancelToken()
        self._tokens[key] = token
        try:
            try:
                claim_started = claim_clock()
                claimed = await self._store.claim(scope, job_id, now=self._now())
            except BridgeError as error:
                logger.error(
                    "could not claim durable job",
                    extra={"job_id": job_id, "code": error.code.value},
                )
                return
            if not claimed:  # cancelled while queued, or already taken
                return
            trace = JobTrace.claimed(
                job_id, claim_started, instance=self._instance_id, shared=False
            )
            await self._run_claimed(key, token, None, trace)
        finally:
            self._tokens.pop(key, None)
        self._pruning.request()

    def _launch_claimed(self, record: JobRecord, trace: JobTrace) -> None:
        """Shared mode: run a job the store just gave this instance (its slot is held)."""
        key = (record.auth_scope, record.id)
        token = CancelToken()
        self._tokens[key] = token
        self._running_ids[record.id] = token
        task = asyncio.create_task(
            self._work_claimed(key, token, record.provider, trace), name="imagebridge-job"
        )
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._work_done, key=key))

    async def _work_claimed(
        self, key: JobKey, token: CancelToken, route: str | None, trace: JobTrace
    ) -> None:
        try:
            await self._run_claimed(key, token, route, trace)
        finally:
            self._tokens.pop(key, None)
            self._running_ids.pop(key[1], None)
        self._pruning.request()

    async def _run_claimed(
        self, key: JobKey, token: CancelToken, route: str | None, trace: JobTrace
    ) -> None:
        with trace.running() as span:  # the job's trace: job → job.run → the engine's spans
            self._previews.open(key)
            try:
                outcome = await self._runner.execute(key, token, route)
            finally:
                self._previews.close(key)
                # Settled here: heartbeats stop renewing it while its outcome is written.
                self._running_ids.pop(key[1], None)
            describe_outcome(span, outcome)
            await self._runner.record(key, token, outcome)
