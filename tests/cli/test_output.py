"""Output modes, terminal-safe escaping, error lines and the exit-code table."""

from __future__ import annotations

import io
import json

import pytest

from imagebridge.cli.output import EXIT_CODES, Output, OutputMode, dumps_json, escape_text
from imagebridge.contract.errors import BridgeError, ErrorCode


def _output(mode: OutputMode, quiet: bool = False) -> tuple[Output, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Output(mode=mode, quiet=quiet, stdout=out, stderr=err), out, err


def test_exit_code_table_matches_the_original() -> None:
    expected = {
        2: {"invalid_request", "configuration", "idempotency_conflict"},
        3: {"authentication", "permission_denied", "safety_rejected"},
        4: {"input", "artifact", "session"},
        5: {"rate_limited", "overloaded"},
        6: {"upstream", "protocol", "unsupported_capability"},
        70: {"internal"},
        124: {"timeout"},
        130: {"cancelled"},
    }
    actual: dict[int, set[str]] = {}
    for code, status in EXIT_CODES.items():
        actual.setdefault(status, set()).add(code)
    assert actual == expected
    assert set(EXIT_CODES) == {code.value for code in ErrorCode}


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[31mred", "\\x1b[31mred"),
        ("line\nbreak", "line\\x0abreak"),
        ("bell\x07", "bell\\x07"),
        ("c1\x9b", "c1\\x9b"),
        ("rtl\u202eevil", "rtl\\u202eevil"),
        ("café ☕ fine", "café ☕ fine"),
    ],
)
def test_escape_text_neutralises_control_characters(raw: str, shown: str) -> None:
    assert escape_text(raw) == shown


def test_json_output_escapes_controls_and_stays_valid() -> None:
    value = {"prompt": "\x1b]0;pwned\x07 \x9b \u202e ok é"}
    text = dumps_json(value)
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
    assert json.loads(text) == value
    assert "é" in text


def test_value_is_pretty_for_humans_and_compact_for_machines() -> None:
    human, out, _ = _output(OutputMode.HUMAN)
    human.value({"a": 1})
    assert out.getvalue() == '{\n  "a": 1\n}\n'
    for mode in (OutputMode.PLAIN, OutputMode.JSON):
        machine, out, _ = _output(mode)
        machine.value({"a": 1})
        assert out.getvalue() == '{"a":1}\n'


def test_quiet_hides_text_and_status_but_not_values() -> None:
    output, out, err = _output(OutputMode.HUMAN, quiet=True)
    output.text("hello")
    output.status("working")
    output.value({"kept": True})
    assert out.getvalue() == '{\n  "kept": true\n}\n'
    assert err.getvalue() == ""


def test_human_error_lines() -> None:
    output, _, err = _output(OutputMode.HUMAN)
    error = BridgeError(
        ErrorCode.RATE_LIMITED,
        "slow \x1b[2Jdown",
        provider="mock",
        suggestions=["wait", "retry"],
    )
    output.error(error)
    assert err.getvalue().splitlines() == [
        "error: slow \\x1b[2Jdown",
        "provider: mock",
        "suggestion: wait",
        "suggestion: retry",
    ]


def test_human_error_shows_the_upstream_message_escaped() -> None:
    output, _, err = _output(OutputMode.HUMAN)
    error = BridgeError(
        ErrorCode.UPSTREAM,
        "The Codex backend rejected the request (HTTP 400).",
        provider="codex-responses",
        details={"upstream_message": "model \x1b[31mrefused", "http_status": 400},
        suggestions=["check"],
    )
    output.error(error)
    assert err.getvalue().splitlines() == [
        "error: The Codex backend rejected the request (HTTP 400).",
        "provider: codex-responses",
        "upstream: model \\x1b[31mrefused",
        "suggestion: check",
    ]


def test_human_error_lists_validation_issues_and_unknown_outcome() -> None:
    output, _, err = _output(OutputMode.HUMAN)
    error = BridgeError.invalid_request(
        "request validation failed",
        issues=[{"field": "parameters.n", "code": "out_of_range", "message": "n too big"}],
    )
    output.error(error)
    assert "issue: parameters.n: n too big" in err.getvalue()
    output.error(BridgeError(ErrorCode.CANCELLED, "stopped").mark_unknown_outcome())
    assert "outcome: unknown" in err.getvalue()


def test_json_error_is_the_bridge_error_shape() -> None:
    output, _, err = _output(OutputMode.JSON)
    output.error(BridgeError(ErrorCode.TIMEOUT, "late", retryable=True, details={"x": 1}))
    body = json.loads(err.getvalue())
    assert body["code"] == "timeout" and body["retryable"] is True
    assert body["details"] == {"x": 1} and body["suggestions"]


def test_status_lines_are_json_in_json_mode() -> None:
    output, _, err = _output(OutputMode.JSON)
    output.status("listening on http://127.0.0.1:1")
    assert json.loads(err.getvalue()) == {"status": "listening on http://127.0.0.1:1"}


def test_usage_error_formats() -> None:
    output, _, err = _output(OutputMode.HUMAN)
    output.usage_error("bad flag", "Usage: imagegen-bridge generate [OPTIONS]")
    lines = err.getvalue().splitlines()
    assert lines[0] == "error: bad flag"
    assert "Usage: imagegen-bridge generate [OPTIONS]" in lines
    assert lines[-1] == "For more information, try '--help'."
    output, _, err = _output(OutputMode.JSON)
    output.usage_error("bad flag")
    assert json.loads(err.getvalue())["code"] == "invalid_request"
