"""Wait for a provider's upstream work unless the caller cancels or the time runs out.

Every transport races its work against the request's cancellation token and a time
budget. The race is the same everywhere; what happens to work that lost it is not (close
the connection, interrupt the codex turn, report an unknown outcome), so that stays with
each caller.
"""

from __future__ import annotations

import asyncio
from typing import Any

from imagebridge.engine.cancellation import CancelToken

__all__ = ["wait_unless_interrupted"]


async def wait_unless_interrupted(
    task: asyncio.Future[Any], cancellation: CancelToken, timeout: float | None
) -> bool:
    """Wait until ``task`` is done, ``cancellation`` fires or ``timeout`` passes.

    Returns whether ``task`` is done; if not, it is still running and the caller decides
    its fate. When this wait is itself cancelled, ``task`` is cancelled too, so the work
    never outlives its caller.
    """
    cancelled = asyncio.ensure_future(cancellation.wait())
    try:
        await asyncio.wait({task, cancelled}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        cancelled.cancel()
    return task.done()
