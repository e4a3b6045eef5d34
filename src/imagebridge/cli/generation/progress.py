"""What the user sees on stderr while a generation runs.

On a terminal: a live ``rich`` display with the elapsed time, the provider's current stage
and, for several outputs, one row per output (waiting, partial previews received, …).
When stderr is not a terminal: one status line when the provider starts, for logs. With
``--quiet`` or ``--json``: nothing. Event handling only records state; rendering happens
on rich's refresh thread, so a slow terminal never slows the generation down.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from imagebridge.cli.output import Output, OutputMode, escape_text
from imagebridge.contract.events import PartialImageEvent, ProgressEvent, StartedEvent

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.live import Live

__all__ = ["ProgressReporter", "make_reporter"]


class ProgressReporter(Protocol):
    def start(self) -> None: ...

    async def on_event(self, event: Any) -> None: ...

    def cancelling(self) -> None: ...

    def stop(self) -> None: ...


class _Silent:
    def start(self) -> None:
        return None

    async def on_event(self, event: Any) -> None:
        return None

    def cancelling(self) -> None:
        return None

    def stop(self) -> None:
        return None


@dataclass(slots=True)
class _Lines:
    """Non-terminal stderr: a single line once the provider has started."""

    output: Output
    label: str
    _announced: bool = False

    def start(self) -> None:
        return None

    async def on_event(self, event: Any) -> None:
        if isinstance(event, StartedEvent | ProgressEvent) and not self._announced:
            self._announced = True
            self.output.status(f"started: {self.label}")

    def cancelling(self) -> None:
        self.output.status("cancelling: waiting for the provider to stop")

    def stop(self) -> None:
        return None


@dataclass(slots=True)
class _State:
    count: int
    stage: str = "waiting for the provider"
    partials: dict[int, int] = field(default_factory=dict)
    cancelling: bool = False
    started_at: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Live:
    """A rich live display on stderr."""

    def __init__(self, output: Output, label: str, count: int) -> None:
        self._output = output
        self._label = label
        self._state = _State(count=count)
        self._live: Live | None = None

    def start(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self._output.stderr, stderr=True)
        self._live = Live(
            _Renderable(self._state, self._label),
            console=console,
            refresh_per_second=8,
            transient=True,
        )
        self._live.start()

    async def on_event(self, event: Any) -> None:
        with self._state.lock:
            if isinstance(event, StartedEvent):
                self._state.stage = "provider started"
            elif isinstance(event, ProgressEvent):
                self._state.stage = event.stage
            elif isinstance(event, PartialImageEvent):
                seen = self._state.partials.get(event.index, 0)
                self._state.partials[event.index] = max(seen, event.partial_index + 1)

    def cancelling(self) -> None:
        with self._state.lock:
            self._state.cancelling = True

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


class _Renderable:
    def __init__(self, state: _State, label: str) -> None:
        self._state = state
        self._label = label
        from rich.spinner import Spinner

        self._spinner = Spinner("dots")

    def __rich__(self) -> RenderableType:
        from rich.table import Table

        with self._state.lock:
            elapsed = time.monotonic() - self._state.started_at
            stage = "cancelling…" if self._state.cancelling else self._state.stage
            partials = dict(self._state.partials)
            count = self._state.count
        self._spinner.update(
            text=f"{escape_text(self._label)} · {escape_text(stage)} · {elapsed:5.1f}s"
        )
        grid = Table.grid(padding=(0, 1))
        grid.add_row(self._spinner)
        if count > 1 or partials:
            for index in range(min(count, 32)):
                received = partials.get(index, 0)
                status = f"{received} partial preview(s)" if received else "waiting"
                grid.add_row(f"  output {index}: {status}")
            if count > 32:
                grid.add_row(f"  … and {count - 32} more outputs")
        return grid


def make_reporter(output: Output, label: str, count: int) -> ProgressReporter:
    """The right display for this terminal and output mode."""
    if output.quiet or output.mode is OutputMode.JSON:
        return _Silent()
    if output.stderr_is_tty():
        return _Live(output, label, count)
    return _Lines(output, label)
