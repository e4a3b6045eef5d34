"""Run one request: in-process through the engine, or on a bridge over HTTP.

Both paths load local input files here (confined to ``inputs.local_roots``) and send them
inline, report engine events to the progress display, and turn Ctrl-C (or SIGTERM) into a
clean cancellation: the first signal cancels through the runtime's cancellation token
and waits for the provider to stop; a second one abandons the wait. Either way the error
says whether the upstream outcome is unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError

from imagebridge.cli.generation.progress import ProgressReporter
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.cancellation import CancelToken

if TYPE_CHECKING:
    from imagebridge.artifacts.filesystem.store import ArtifactStore
    from imagebridge.config import BridgeConfig

__all__ = [
    "LOCAL_OWNER",
    "Execution",
    "execute_in_process",
    "execute_remote",
    "resolve_file_inputs",
    "run_cancellable",
]

LOCAL_OWNER = "anonymous-local"
"""Artifacts made by the CLI belong to the same scope as an unauthenticated local server."""
REMOTE_WAIT_MARGIN_S = 60.0
T = TypeVar("T")


@dataclass(slots=True)
class Execution:
    response: ImageResponse
    store: ArtifactStore | None = None
    """The artifact store the response's artifacts live in (in-process runs only)."""


async def resolve_file_inputs(request: ImageRequest, config: BridgeConfig) -> ImageRequest:
    """Replace ``file`` inputs by verified inline images, confined to ``inputs.local_roots``."""
    if not any(item.type == "file" for _, item in request.all_inputs()):
        return request  # no loader (and no application import) for the common case
    from imagebridge.application import image_limits
    from imagebridge.artifacts.inputs.inline import inline_file_inputs
    from imagebridge.artifacts.inputs.loader import InputLoader

    loader = await asyncio.to_thread(
        InputLoader,
        [str(root) for root in config.inputs.local_roots],
        image_limits(config),
        max_inline_encoded_bytes=config.runtime.request.max_inline_encoded_bytes,
    )
    return await inline_file_inputs(request, loader)


async def run_cancellable(
    work: Callable[[CancelToken], Awaitable[T]], reporter: ProgressReporter
) -> T:
    """Run ``work`` with SIGINT/SIGTERM wired to its cancellation token."""
    loop = asyncio.get_running_loop()
    token = CancelToken()
    task = asyncio.current_task()
    presses = 0

    def interrupted() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            reporter.cancelling()
            token.cancel("cancelled")
        elif task is not None:
            task.cancel()

    installed: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, interrupted)
            installed.append(signum)
    try:
        return await work(token)
    except asyncio.CancelledError:
        if presses < 2 or task is None:
            raise
        task.uncancel()
        raise BridgeError(
            ErrorCode.CANCELLED, "generation was abandoned after a second interrupt"
        ).mark_unknown_outcome() from None
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


async def execute_in_process(
    request: ImageRequest,
    config: BridgeConfig,
    token: CancelToken,
    reporter: ProgressReporter,
) -> Execution:
    """The same engine path as the server's ``POST /v1/images``, publishing to the
    filesystem store under ``artifacts.root`` whatever ``artifacts.backend`` says (the
    output names local files)."""
    from imagebridge.application import build_application
    from imagebridge.application.artifact_backend import filesystem_store
    from imagebridge.artifacts.filesystem.store import AsyncArtifactStore
    from imagebridge.engine.runtime import ExecutionContext

    request = await resolve_file_inputs(request, config)
    store = filesystem_store(config)
    app = build_application(config, artifacts=AsyncArtifactStore(store))
    try:
        response = await app.runtime.execute(
            request,
            ExecutionContext(owner=LOCAL_OWNER, cancellation=token, events=reporter.on_event),
        )
    finally:
        # A provider that fails to stop cleanly must not hide the result or the real error.
        with contextlib.suppress(BridgeError):
            await app.aclose()
    return Execution(response, store)


async def execute_remote(
    request: ImageRequest,
    config: BridgeConfig,
    base_url: str,
    bearer: str | None,
    token: CancelToken,
    reporter: ProgressReporter,
) -> Execution:
    """``POST /v1/images`` on a running bridge (no progress events over this route)."""
    from imagebridge.cli.remote import RemoteBridge
    from imagebridge.contract.events import StartedEvent

    request = await resolve_file_inputs(request, config)
    await reporter.on_event(StartedEvent())
    timeout_ms = request.timeout_ms or config.runtime.default_timeout_ms
    async with RemoteBridge(
        base_url, token=bearer, max_response_bytes=config.artifacts.max_response_bytes
    ) as bridge:
        call = asyncio.ensure_future(
            bridge.generate(request.to_wire(), timeout_s=timeout_ms / 1000 + REMOTE_WAIT_MARGIN_S)
        )

        def abandon() -> None:
            call.cancel()

        unregister = token.on_cancel(abandon)
        try:
            body = await call
        except asyncio.CancelledError:
            if not token.cancelled:
                raise
            raise BridgeError(
                ErrorCode.CANCELLED, "request was cancelled while the bridge was working on it"
            ).mark_unknown_outcome() from None
        finally:
            unregister()
    try:
        return Execution(ImageResponse.model_validate(body))
    except ValidationError:
        raise BridgeError(
            ErrorCode.PROTOCOL, "the bridge sent a malformed image response"
        ) from None
