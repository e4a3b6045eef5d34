"""Serving the app with uvicorn: bind checks, graceful shutdown, activation lock.

``run_server`` refuses unsafe starts before binding anything (a non-loopback bind needs a
bearer token whose variable exists and is non-empty), then serves until SIGINT or SIGTERM:
the first signal drains (new requests 503, work in flight gets ``server.shutdown_grace_ms``,
:mod:`imagebridge.server.shutdown`), then the listener closes and the app's lifespan shuts
the jobs, the runtime and its providers down; a second signal exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import IO, Any

import uvicorn

from imagebridge.config._net import parse_socket_address
from imagebridge.config.loader import LoadedConfig
from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.server.allocator import tune_malloc
from imagebridge.server.app import create_app
from imagebridge.server.auth import read_bearer_token
from imagebridge.server.shutdown import ShutdownController, settle_seconds, shutdown_grace_seconds
from imagebridge.server.state import BridgeState, ServerOptions
from imagebridge.server.tracing import configure_logging

__all__ = ["ListenAddress", "apply_malloc_settings", "check_bind", "run_server", "uvicorn_config"]

ListenAddress = tuple[str, int]


def check_bind(config: BridgeConfig, bind: str, env: Mapping[str, str]) -> ListenAddress:
    """Parse ``bind`` and refuse a non-loopback listener that has no bearer token."""
    try:
        address, port = parse_socket_address(bind)
    except ValueError:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "bind address must be a numeric IP:PORT socket address",
            details={"field": "server.bind"},
        ) from None
    if not address.is_loopback:
        if config.server.bearer_token_env is None:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "a non-loopback bind requires server.bearer_token_env",
                details={"field": "server.bearer_token_env", "issue": "required_for_remote_bind"},
            )
        try:
            read_bearer_token(config, env)
        except BridgeError as exc:
            # The container image binds 0.0.0.0 by default: its first start without a token
            # must say which variable to set, not only that one is missing.
            name = config.server.bearer_token_env
            raise exc.with_suggestion(
                f"Set {name} to a long random secret (for a container: -e {name}=…), "
                "or bind a loopback address such as 127.0.0.1:8787."
            ) from None
    return str(address), port


def apply_malloc_settings(config: BridgeConfig) -> bool:
    """Fix the C allocator's thresholds for this process (``server.malloc``)."""
    malloc = config.server.malloc
    if not malloc.enabled:
        return False
    return tune_malloc(malloc.mmap_threshold_bytes, malloc.trim_threshold_bytes)


def uvicorn_config(app: Any, config: BridgeConfig) -> uvicorn.Config:
    """Uvicorn settings derived from ``[server]`` and ``[runtime]``."""
    server = config.server
    settings = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        server_header=False,
        # The header budget is enforced (431) by the app; h11 must not refuse first.
        h11_max_incomplete_event_size=server.max_header_bytes * 4 + 16_384,
    )
    # Uvicorn declares whole seconds but waits with asyncio.wait_for, which takes fractions:
    # the grace stays exactly as configured (1500 ms is 1.5 s, not 1 s; 200 ms is not 1 s).
    settings.timeout_graceful_shutdown = shutdown_grace_seconds(config)  # type: ignore[assignment]
    return settings


class _Server(uvicorn.Server):
    """Uvicorn that reports when it is serving and whose signals go to the shutdown
    controller (drain first, then stop; a second signal exits at once).

    Uvicorn's own handler re-raises the signal after shutdown; here a signal means
    "drain and return", so ``run_server`` can return an exit code.
    """

    def __init__(
        self, config: uvicorn.Config, on_ready: Callable[[], None], state: BridgeState
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self.controller = ShutdownController(
            state.drain,
            grace_s=shutdown_grace_seconds(state.config),
            settle_s=settle_seconds(state.config),
            request_stop=self._stop,
            stop_accepting_jobs=lambda: _stop_claiming(state),
            jobs_idle=lambda: _jobs_idle(state),
        )

    def _stop(self, remaining_s: float) -> None:
        # In-flight work already had the grace: what is left of it is uvicorn's last wait.
        self.config.timeout_graceful_shutdown = remaining_s  # type: ignore[assignment]
        self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        # From here a signal drains through the loop (it may end a startup wait early).
        self.controller.attach(asyncio.get_running_loop())
        try:
            await super().startup(sockets=sockets)
        except SystemExit:  # uvicorn exits the process when the lifespan fails to start
            self.should_exit = True
            return
        if self.started and not self.should_exit:
            # Everything built so far (the app, its models and schemas) lives as long as the
            # server: move it out of the collector's reach so full collections under load
            # scan only per-request garbage instead of pausing the loop for tens of ms.
            gc.collect()
            gc.freeze()
            self._on_ready()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self._request_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _request_exit(self, sig: int, frame: FrameType | None) -> None:
        self.controller.on_signal(sig)


async def _stop_claiming(state: BridgeState) -> None:
    if state.jobs is not None:
        await state.jobs.jobs.stop_claiming()


async def _jobs_idle(state: BridgeState) -> None:
    if state.jobs is not None:
        await state.jobs.jobs.wait_idle()


@contextlib.contextmanager
def _activation_lock(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    import fcntl

    try:
        handle = open(path, "a+b")  # noqa: SIM115 - held for the whole serve
    except OSError as exc:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "the activation lock file cannot be opened",
            details={"field": "server.activation_lock", "errno": exc.errno},
        ) from None
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BridgeError(
                ErrorCode.OVERLOADED,
                "another OAuth-active bridge slot holds the activation lock",
                retryable=True,
                details={"retry_after_ms": 1000},
            ) from None
        yield
    finally:
        handle.close()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose
    # protocol says TCP, and without it small responses wait for delayed ACKs (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "could not bind the listener address",
            details={"field": "server.bind", "errno": exc.errno},
        ) from None
    sock.set_inheritable(True)
    return sock


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _default_announce(stream: IO[str]) -> Callable[[str], None]:
    def announce(url: str) -> None:
        print(f"listening on {url}", file=stream, flush=True)

    return announce


def run_server(
    loaded: LoadedConfig,
    *,
    bind: str | None = None,
    env: Mapping[str, str] | None = None,
    announce: Callable[[str], None] | None = None,
) -> int:
    """Serve until SIGINT/SIGTERM; return 0 after a graceful stop.

    Refusals before serving (invalid configuration, unsafe bind, missing token, taken
    activation lock, address in use) raise :class:`BridgeError` so the caller can render
    them in its own output mode. ``announce`` receives the listening URL once the app
    has started (default: ``listening on URL`` on stderr).
    """
    config = loaded.require_valid()
    environ = os.environ if env is None else env
    host, port = check_bind(config, bind or config.server.bind, environ)
    with _activation_lock(config.server.activation_lock):
        configure_logging(config.server.tracing.enabled)
        apply_malloc_settings(config)
        sock = _listen(host, port)
        actual_port = int(sock.getsockname()[1])
        try:
            app = create_app(
                config,
                origins=loaded.origins,
                options=ServerOptions(listener=(host, actual_port), env=environ),
            )
            say = announce or _default_announce(sys.stderr)
            server = _Server(
                uvicorn_config(app, config),
                lambda: say(_url(host, actual_port)),
                app.state.bridge,
            )
            server.run(sockets=[sock])
        finally:
            sock.close()
    if not server.started:
        state = app.state.bridge
        if state.drain.draining:  # a stop signal during startup: a clean stop
            return 0
        raise state.startup_error or BridgeError(ErrorCode.INTERNAL, "the server did not start")
    return 0
