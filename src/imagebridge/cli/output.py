"""Everything the CLI prints: output modes, escaping, errors and exit codes.

Three modes (``--json``, ``--plain``, human) decide how structured values look; every
string that reaches a terminal first passes through :func:`escape_text` (or the JSON
encoder plus :func:`_escape_json`), so a prompt, a file name or an upstream message can
never smuggle control sequences into the user's terminal. Importing this module is cheap:
it must not pull in the contract models or pydantic (``--help`` imports it).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from imagebridge.contract.errors import BridgeError

__all__ = [
    "EXIT_CODES",
    "Output",
    "OutputMode",
    "dumps_json",
    "escape_text",
    "exit_code_for",
]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_CANCELLED = 130

EXIT_CODES: Mapping[str, int] = {
    "invalid_request": 2,
    "configuration": 2,
    "idempotency_conflict": 2,
    "authentication": 3,
    "permission_denied": 3,
    "safety_rejected": 3,
    "input": 4,
    "artifact": 4,
    "session": 4,
    "rate_limited": 5,
    "overloaded": 5,
    "upstream": 6,
    "protocol": 6,
    "unsupported_capability": 6,
    "internal": 70,
    "timeout": 124,
    "cancelled": 130,
}
"""Native error code → process exit status (the original's ``output::exit_code``)."""


def exit_code_for(code: str) -> int:
    """The exit status for a native error code; unknown codes count as internal (70)."""
    return EXIT_CODES.get(str(code), 70)


# Control characters (C0, DEL, C1), bidirectional overrides and isolates, and the
# Unicode line/paragraph separators: anything that can move the cursor, recolour the
# terminal or visually reorder text.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_text(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``)."""
    return _UNSAFE.sub(_visible, text)


def _escape_json(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def dumps_json(value: Any, *, pretty: bool = False) -> str:
    """JSON text that is safe on a terminal: control characters are ``\\uXXXX`` escapes.

    ``json`` already escapes C0 controls inside strings; DEL, C1 and the bidi controls are
    escaped here. They can only occur inside strings, so the result stays valid JSON.
    """
    if pretty:
        text = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _UNSAFE_IN_JSON.sub(_escape_json, text)


class OutputMode(Enum):
    HUMAN = "human"
    PLAIN = "plain"
    JSON = "json"


@dataclass(slots=True)
class Output:
    """Where and how one CLI invocation writes.

    ``value`` prints structured results (pretty JSON for humans, compact JSON otherwise)
    and is never hidden by ``--quiet``; ``text`` is human/plain prose on stdout and
    ``status``/``notice`` are stderr lines, all three hidden by ``--quiet``.
    """

    mode: OutputMode = OutputMode.HUMAN
    quiet: bool = False
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)

    @property
    def machine(self) -> bool:
        return self.mode is not OutputMode.HUMAN

    @property
    def json(self) -> bool:
        return self.mode is OutputMode.JSON

    def stdout_is_tty(self) -> bool:
        return _isatty(self.stdout)

    def stderr_is_tty(self) -> bool:
        return _isatty(self.stderr)

    # -- stdout -------------------------------------------------------------------------

    def value(self, data: Any) -> None:
        """A structured result: pretty JSON in human mode, compact JSON otherwise."""
        self._write(self.stdout, dumps_json(data, pretty=self.mode is OutputMode.HUMAN))

    def text(self, line: str) -> None:
        """One line of human/plain output (already escaped by the caller where needed)."""
        if not self.quiet:
            self._write(self.stdout, line)

    def fields(self, *values: object) -> None:
        """One tab-separated line; each field is escaped on its own."""
        self.text("\t".join(escape_text(str(value)) for value in values))

    def raw(self, data: str) -> None:
        """Terminal graphics (preview images): written as-is, never escaped."""
        self.stdout.write(data)
        self.stdout.flush()

    # -- stderr -------------------------------------------------------------------------

    def status(self, message: str, **extra: Any) -> None:
        """A progress/status line on stderr: ``{"status": …}`` in JSON mode."""
        if self.quiet:
            return
        if self.json:
            self._write(self.stderr, dumps_json({"status": message, **extra}))
        else:
            self._write(self.stderr, escape_text(message))

    def notice(self, message: str) -> None:
        """A human-only hint on stderr (never in machine modes)."""
        if not self.quiet and not self.machine:
            self._write(self.stderr, escape_text(message))

    def error(self, error: BridgeError) -> None:
        """``error:``/``provider:``/``suggestion:`` lines, or the JSON ``BridgeError``."""
        if self.json:
            self._write(self.stderr, dumps_json(error.to_dict()))
            return
        lines = [f"error: {escape_text(error.message)}"]
        if error.provider:
            lines.append(f"provider: {escape_text(error.provider)}")
        field_name = error.details.get("field")
        if isinstance(field_name, str):
            lines.append(f"field: {escape_text(field_name)}")
        issues = error.details.get("issues")
        if isinstance(issues, list):
            for issue in issues:
                if isinstance(issue, Mapping):
                    where = escape_text(str(issue.get("field", "")))
                    what = escape_text(str(issue.get("message", "")))
                    lines.append(f"issue: {where}: {what}")
        upstream = error.details.get("upstream_message")
        if isinstance(upstream, str) and upstream:
            lines.append(f"upstream: {escape_text(upstream)}")
        outcome = _outcome_line(error)
        if outcome:
            lines.append(outcome)
        lines.extend(f"suggestion: {escape_text(s)}" for s in error.suggestions)
        self._write(self.stderr, "\n".join(lines))

    def usage_error(self, message: str, usage: str | None = None) -> None:
        """A command-line mistake (exit 2), clap style, or JSON in ``--json`` mode."""
        if self.json:
            body = {
                "code": "invalid_request",
                "message": message,
                "retryable": False,
                "details": {"kind": "usage"},
                "suggestions": ["Run the command with --help to see its arguments."],
            }
            self._write(self.stderr, dumps_json(body))
            return
        lines = [f"error: {_escape_lines(message)}"]
        if usage:
            lines += ["", _escape_lines(usage)]
        lines += ["", "For more information, try '--help'."]
        self._write(self.stderr, "\n".join(lines))

    def help_text(self, text: str) -> None:
        """Help shown because arguments are missing (stderr, like clap; exit 2)."""
        self._write(self.stderr, _escape_lines(text.rstrip("\n")))

    @staticmethod
    def _write(stream: TextIO, line: str) -> None:
        stream.write(line + "\n")
        stream.flush()


def _escape_lines(text: str) -> str:
    """Escape each line on its own, keeping the line structure of a multi-line message."""
    return "\n".join(escape_text(line) for line in text.split("\n"))


def _outcome_line(error: BridgeError) -> str | None:
    if error.details.get("outcome") == "unknown":
        return (
            "outcome: unknown - the provider may already have generated (and billed) this "
            "request; check before retrying"
        )
    return None


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False
