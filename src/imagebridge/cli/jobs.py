"""``jobs list|get|cancel|wait``: durable jobs live in a running bridge, so these talk HTTP.

The bridge is ``--remote``, else ``$IMAGEGEN_BRIDGE_URL``, else the configured
``server.bind`` on this machine (a wildcard bind is reached through loopback).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from imagebridge.cli.context import CliContext
from imagebridge.cli.output import exit_code_for
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["bridge_url", "jobs_cancel", "jobs_get", "jobs_list", "jobs_wait"]

TERMINAL = frozenset({"succeeded", "failed", "cancelled", "interrupted"})


def bridge_url(ctx: CliContext) -> str:
    """Where the jobs live: ``--remote``/``$IMAGEGEN_BRIDGE_URL`` or the configured bind."""
    explicit = ctx.remote_url()
    if explicit is not None:
        return explicit
    from imagebridge.config._net import parse_socket_address

    address, port = parse_socket_address(ctx.config().server.bind)
    if address.is_unspecified:
        host = "127.0.0.1" if address.version == 4 else "[::1]"
    else:
        host = f"[{address}]" if address.version == 6 else str(address)
    return f"http://{host}:{port}"


async def _with_bridge(ctx: CliContext, call: Any) -> Any:
    from imagebridge.cli.remote import RemoteBridge

    async with RemoteBridge(bridge_url(ctx), token=ctx.bearer_token()) as bridge:
        return await call(bridge)


def jobs_list(
    ctx: CliContext,
    *,
    limit: int,
    cursor: str | None,
    status: str | None,
    visibility: str | None,
    favorite: bool | None,
    search: str | None,
) -> int:
    filters: dict[str, Any] = {
        "limit": limit,
        "cursor": cursor,
        "status": status,
        "visibility": visibility,
        "favorite": favorite,
        "search": search,
    }
    ctx.output.value(asyncio.run(_with_bridge(ctx, lambda b: b.list_jobs(**filters))))
    return 0


def jobs_get(ctx: CliContext, job_id: str) -> int:
    ctx.output.value(asyncio.run(_with_bridge(ctx, lambda b: b.get_job(job_id))))
    return 0


def jobs_cancel(ctx: CliContext, job_id: str) -> int:
    ctx.output.value(asyncio.run(_with_bridge(ctx, lambda b: b.cancel_job(job_id))))
    return 0


def job_exit_code(job: Any) -> int:
    """0 for a succeeded job, 130 for a cancelled one, else its error's exit code."""
    status = job.get("status") if isinstance(job, dict) else None
    if status == "succeeded":
        return 0
    if status == "cancelled":
        return exit_code_for("cancelled")
    error = job.get("error") if isinstance(job, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return exit_code_for(code if isinstance(code, str) else "internal")


def jobs_wait(ctx: CliContext, job_id: str, *, timeout_ms: int, interval_ms: int) -> int:
    """Poll until the job is terminal; print it; exit like the job."""

    async def wait(bridge: Any) -> Any:
        deadline = time.monotonic() + timeout_ms / 1000
        last_stage: str | None = None
        while True:
            job = await bridge.get_job(job_id)
            status = job.get("status") if isinstance(job, dict) else None
            if status in TERMINAL:
                return job
            progress = job.get("progress") if isinstance(job, dict) else None
            stage = progress.get("stage") if isinstance(progress, dict) else status
            if isinstance(stage, str) and stage != last_stage:
                ctx.output.status(f"job {job_id}: {stage}")
                last_stage = stage
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BridgeError(
                    ErrorCode.TIMEOUT,
                    "the job did not finish before --timeout-ms",
                    retryable=True,
                    details={"job_id": job_id, "status": status},
                )
            await asyncio.sleep(min(interval_ms / 1000, remaining))

    job = asyncio.run(_with_bridge(ctx, wait))
    ctx.output.value(job)
    return job_exit_code(job)
