"""The stderr progress display: which one is chosen, and what it shows."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from imagebridge.cli.generation import progress
from imagebridge.cli.output import Output, OutputMode
from imagebridge.contract.events import PartialImageEvent, ProgressEvent, StartedEvent


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _output(mode: OutputMode, *, tty: bool, quiet: bool = False) -> Output:
    stderr = _Tty() if tty else io.StringIO()
    return Output(mode=mode, quiet=quiet, stdout=io.StringIO(), stderr=stderr)


def test_display_follows_terminal_and_mode() -> None:
    live = progress.make_reporter(_output(OutputMode.HUMAN, tty=True), "gen", 2)
    lines = progress.make_reporter(_output(OutputMode.HUMAN, tty=False), "gen", 2)
    silent = [
        progress.make_reporter(_output(OutputMode.JSON, tty=True), "gen", 1),
        progress.make_reporter(_output(OutputMode.HUMAN, tty=True, quiet=True), "gen", 1),
    ]
    assert type(live).__name__ == "_Live" and type(lines).__name__ == "_Lines"
    assert all(type(item).__name__ == "_Silent" for item in silent)


def test_line_display_announces_the_start_once() -> None:
    output = _output(OutputMode.HUMAN, tty=False)
    reporter = progress.make_reporter(output, "generate · 1 image(s) · mock", 1)

    async def feed() -> None:
        await reporter.on_event(StartedEvent())
        await reporter.on_event(ProgressEvent(stage="generating"))

    asyncio.run(feed())
    reporter.cancelling()
    lines = output.stderr.getvalue().splitlines()
    assert lines == [
        "started: generate · 1 image(s) · mock",
        "cancelling: waiting for the provider to stop",
    ]


def test_live_display_shows_stage_elapsed_time_and_partials_per_output() -> None:
    reporter = progress._Live(_output(OutputMode.HUMAN, tty=True), "edit · 2 image(s)", 2)

    async def feed() -> None:
        await reporter.on_event(StartedEvent())
        await reporter.on_event(ProgressEvent(stage="generating"))
        await reporter.on_event(PartialImageEvent(index=1, partial_index=0, b64_json="AA=="))
        await reporter.on_event(PartialImageEvent(index=1, partial_index=1, b64_json="AA=="))

    asyncio.run(feed())
    console = Console(file=io.StringIO(), width=100, record=True, force_terminal=False)
    console.print(progress._Renderable(reporter._state, "edit · 2 image(s)"))
    text = console.export_text()
    assert "edit · 2 image(s) · generating" in text and "s" in text
    assert "output 0: waiting" in text
    assert "output 1: 2 partial preview(s)" in text
    reporter.cancelling()
    console.print(progress._Renderable(reporter._state, "x"))
    assert "cancelling…" in console.export_text()


def test_live_display_starts_and_stops_on_a_terminal() -> None:
    output = _output(OutputMode.HUMAN, tty=True)
    reporter = progress.make_reporter(output, "generate · 1 image(s) · mock", 1)
    reporter.start()
    reporter.stop()
    assert "generate · 1 image(s) · mock" in output.stderr.getvalue()
