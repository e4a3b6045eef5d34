"""The JSON log formatter writes only allow-listed fields."""

from __future__ import annotations

import io
import json
import logging

from imagebridge.server.tracing import JsonFormatter, configure_logging


def test_only_allow_listed_fields_are_written() -> None:
    record = logging.LogRecord("imagebridge.server.access", logging.INFO, "f", 1, "done", (), None)
    record.__dict__.update(
        request_id="r-1", status=200, provider="mock", prompt="never logged", body=b"bytes"
    )
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "done" and line["level"] == "INFO"
    assert (line["request_id"], line["status"], line["provider"]) == ("r-1", 200, "mock")
    assert "prompt" not in line and "body" not in line


def test_exceptions_log_their_type_but_not_their_text() -> None:
    try:
        raise ValueError("secret value in the message")
    except ValueError as exc:
        record = logging.LogRecord(
            "imagebridge", logging.ERROR, "f", 1, "failed", (), (type(exc), exc, None)
        )
    text = JsonFormatter().format(record)
    assert json.loads(text)["error_type"] == "ValueError"
    assert "secret value" not in text


def test_configure_logging_can_be_turned_off() -> None:
    stream = io.StringIO()
    configure_logging(True, stream)
    logger = logging.getLogger("imagebridge.server.access")
    try:
        logger.info("one", extra={"request_id": "r-2"})
        configure_logging(False)
        logger.info("two")
    finally:
        configure_logging(False)
        root = logging.getLogger("imagebridge")
        root.propagate = True
        root.setLevel(logging.NOTSET)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["one"]
