"""The ``codex app-server`` child process: spawn, drain, watch, restart and stop it.

:class:`ChildProcess` is one spawned child. Its stderr is drained all the time into a
small ring buffer (a full pipe would freeze codex), and :meth:`ChildProcess.stop` always
reaps it within a bounded time: close stdin, then SIGTERM, then SIGKILL to its whole
process group. :class:`AppServerProcess` supervises the sequence of children: it starts
one, replaces a dead one after ``restart_backoff_ms`` and counts the restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.stderr_tail import StderrRing

__all__ = ["AppServerProcess", "ChildProcess", "SpawnFunction"]

logger = logging.getLogger(__name__)

_STDERR_CHUNK = 64 * 1024
_REAP_GRACE = 1.0
"""Extra seconds granted after SIGKILL when the budget is already spent: the kernel
reaps a killed child at once, so this only guards against a stuck wait."""


class ChildProcess:
    """One running ``<executable> app-server <args>`` with piped stdio."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        *,
        generation: int,
        stderr_capacity: int,
    ) -> None:
        if process.stdin is None or process.stdout is None or process.stderr is None:
            raise BridgeError(ErrorCode.INTERNAL, "app-server child was spawned without pipes")
        self._process = process
        self.generation = generation
        self.pid: int = process.pid
        self.stdin: asyncio.StreamWriter = process.stdin
        self.stdout: asyncio.StreamReader = process.stdout
        self.stderr_tail = StderrRing(stderr_capacity)
        self.started_at = asyncio.get_running_loop().time()
        self._stderr_task = asyncio.create_task(
            self._drain_stderr(process.stderr), name=f"codex-app-server-stderr-{self.pid}"
        )

    @classmethod
    async def spawn(cls, options: AppServerOptions, *, generation: int) -> ChildProcess:
        """Start the child in its own process group (so it can be stopped as a whole)."""
        env = dict(os.environ)
        env.update(options.env)
        if options.codex_home is not None:
            env["CODEX_HOME"] = str(options.codex_home)
        try:
            process = await asyncio.create_subprocess_exec(
                options.executable,
                "app-server",
                *options.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=options.cwd,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError as error:
            missing = "working directory" if _cwd_missing(options) else "executable"
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                f"cannot start codex app-server: {missing} not found",
                details={"executable": options.executable, "errno": error.errno},
                suggestions=[
                    "Install the codex CLI or set providers.codex_app_server.executable "
                    "to its full path.",
                ],
            ) from None
        except PermissionError as error:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "cannot start codex app-server: permission denied",
                details={"executable": options.executable, "errno": error.errno},
            ) from None
        except OSError as error:
            raise BridgeError(
                ErrorCode.UPSTREAM,
                "cannot start codex app-server",
                retryable=True,
                details={"executable": options.executable, "errno": error.errno},
            ) from None
        return cls(process, generation=generation, stderr_capacity=options.stderr_buffer_bytes)

    # -- state -----------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    @property
    def alive(self) -> bool:
        """True until the child has exited and been reaped."""
        return self._process.returncode is None

    async def wait(self) -> int:
        return await self._process.wait()

    # -- stopping --------------------------------------------------------------------

    async def stop(self, timeout: float) -> int:
        """Stop and reap the child within ``timeout`` seconds (plus a short reap grace).

        The caller must have stopped reading stdout (closed its link) first: whatever the
        child still writes is discarded.

        Closing stdin asks codex to exit by itself; half of the budget is given to that,
        a third to SIGTERM, the rest to SIGKILL. Raises ``timeout`` only if the child
        could not be reaped even after SIGKILL.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Nobody reads stdout any more: discard it, so a child blocked writing can exit.
        discard = asyncio.create_task(self._discard_stdout())
        try:
            if self.alive:
                self._close_stdin()
                if not await self._wait_until(loop.time() + timeout * 0.5):
                    self._signal_group(signal.SIGTERM)
                    if not await self._wait_until(loop.time() + timeout * 0.3):
                        self._signal_group(signal.SIGKILL)
                        reap_by = max(deadline, loop.time() + _REAP_GRACE)
                        if not await self._wait_until(reap_by):
                            raise BridgeError(
                                ErrorCode.TIMEOUT,
                                "codex app-server did not exit after SIGKILL",
                                details={"pid": self.pid, "shutdown_timeout_ms": timeout * 1000},
                            )
            else:
                self._close_stdin()
        finally:
            discard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await discard
            await self._finish_stderr()
            if not self.alive:
                self._close_transport()
        code = self._process.returncode
        return -1 if code is None else code

    def _close_transport(self) -> None:
        # asyncio closes the pipes of an exited child only once every pipe saw EOF; a
        # stdout nobody reads any more (or a grandchild holding it) would keep them open
        # until garbage collection, possibly after the loop is gone. Close them now.
        transport = getattr(self._process, "_transport", None)
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()

    def _close_stdin(self) -> None:
        with contextlib.suppress(Exception):
            if not self.stdin.is_closing():
                self.stdin.close()

    async def _wait_until(self, when: float) -> bool:
        remaining = when - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(0.0, remaining)):
                await self._process.wait()
        except TimeoutError:
            return False
        return True

    def _signal_group(self, signum: int) -> None:
        # The child leads its own process group (start_new_session), so the group id is
        # its pid; signalling the group also stops helpers codex started. Only while the
        # leader is unreaped: after that its pid (and group id) may belong to a stranger.
        if not self.alive:
            return
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(signum)
        except PermissionError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                self._process.send_signal(signum)

    async def _discard_stdout(self) -> None:
        # Fails at once (RuntimeError) if a reader is still attached; then there is
        # nothing to do.
        with contextlib.suppress(Exception):
            while await self.stdout.read(_STDERR_CHUNK):
                pass

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while chunk := await stream.read(_STDERR_CHUNK):
                self.stderr_tail.write(chunk)

    async def _finish_stderr(self) -> None:
        # Give the drain a moment to collect the last words, then stop it.
        done, _ = await asyncio.wait({self._stderr_task}, timeout=0.2)
        if not done:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stderr_task


def _cwd_missing(options: AppServerOptions) -> bool:
    return options.cwd is not None and not options.cwd.is_dir()


SpawnFunction = Callable[[AppServerOptions, int], Awaitable[ChildProcess]]


async def _default_spawn(options: AppServerOptions, generation: int) -> ChildProcess:
    return await ChildProcess.spawn(options, generation=generation)


class AppServerProcess:
    """Supervises the succession of app-server children (one alive at a time).

    ``generation`` counts successful spawns, ``restart_count`` is ``generation - 1``.
    Restarts are lazy — the caller asks for one when it finds the child dead or its
    link broken — and never come sooner than ``restart_backoff_ms`` after the previous
    start. After :meth:`shutdown` every further start fails with ``cancelled``.
    """

    def __init__(self, options: AppServerOptions, *, spawn: SpawnFunction | None = None) -> None:
        self._options = options
        self._spawn = spawn or _default_spawn
        self._current: ChildProcess | None = None
        self._generation = 0
        self._last_start: float | None = None
        self._closed = False
        self._lock = asyncio.Lock()
        self.spawned_pids: list[int] = []
        """Every pid this supervisor started, oldest first (for diagnostics and tests)."""

    @property
    def current(self) -> ChildProcess | None:
        return self._current

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def restart_count(self) -> int:
        return max(0, self._generation - 1)

    @property
    def closed(self) -> bool:
        return self._closed

    def is_alive(self) -> bool:
        return self._current is not None and self._current.alive

    async def start(self) -> ChildProcess:
        """The running child, spawning the first one if there is none yet."""
        async with self._lock:
            self._check_open()
            if self._current is not None and self._current.alive:
                return self._current
            return await self._replace_locked()

    async def restart(self) -> ChildProcess:
        """Stop the current child (if any) and spawn a fresh one after the backoff."""
        async with self._lock:
            self._check_open()
            return await self._replace_locked()

    async def shutdown(self) -> None:
        """Refuse new children and stop the current one within ``shutdown_timeout_ms``."""
        async with self._lock:
            self._closed = True
            child, self._current = self._current, None
        if child is not None:
            await self._stop_child(child, reason="shutdown")

    async def _replace_locked(self) -> ChildProcess:
        old, self._current = self._current, None
        if old is not None:
            await self._stop_child(old, reason="restart")
        if self._last_start is not None:
            loop = asyncio.get_running_loop()
            wait = self._options.restart_backoff - (loop.time() - self._last_start)
            if wait > 0:
                await asyncio.sleep(wait)
            self._check_open()
        self._last_start = asyncio.get_running_loop().time()
        child = await self._spawn(self._options, self._generation + 1)
        self._generation += 1
        self._current = child
        self.spawned_pids.append(child.pid)
        logger.info("codex app-server started (pid %s, generation %s)", child.pid, self._generation)
        return child

    async def _stop_child(self, child: ChildProcess, *, reason: str) -> None:
        # Shielded: a caller cancelled meanwhile must not leave the child half-stopped.
        code = await asyncio.shield(child.stop(self._options.shutdown_timeout))
        if reason == "restart":
            # A child is only replaced after it died or broke its link — whether or not its
            # exit was reaped yet when the restart began — so its last words explain why.
            logger.warning(
                "codex app-server (pid %s) replaced after a failure (exit code %s); "
                "stderr tail: %s",
                child.pid,
                code,
                child.stderr_tail.tail() or "<empty>",
            )
        else:
            logger.info("codex app-server (pid %s) stopped (%s, code %s)", child.pid, reason, code)

    def _check_open(self) -> None:
        if self._closed:
            raise BridgeError(ErrorCode.CANCELLED, "the codex app-server provider is shut down")
