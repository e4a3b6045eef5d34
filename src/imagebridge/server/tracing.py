"""Structured JSON logs on stderr (``server.tracing.enabled``).

One JSON object per line with the timestamp, level, logger, message and whatever safe
fields the caller attached through ``extra`` (request id, trace id, route, status,
provider, error code, timings). Call sites pass identifiers and numbers only; the
formatter never serializes arguments it was not given explicitly, and prompts, tokens,
bodies and image bytes are never handed to a logger in the first place.

A line that names no trace gets the current one's ``trace_id`` and ``span_id``: the
innermost OpenTelemetry span when traces are on (:mod:`imagebridge.server.otel`), else
the ids of the request being served (the ``traceparent`` its answer carries).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

from imagebridge.engine import tracing
from imagebridge.server.context import CURRENT_REQUEST

__all__ = ["ACCESS_LOGGER", "JsonFormatter", "configure_logging"]

ACCESS_LOGGER = "imagebridge.server.access"
_SAFE_FIELDS = (
    "request_id",
    "trace_id",
    "span_id",
    "method",
    "route",
    "status",
    "duration_ms",
    "provider",
    "code",
    "total_ms",
    "provider_ms",
    "queue_ms",
    "bind",
)
_HANDLER_MARK = "_imagebridge_json_handler"


class JsonFormatter(logging.Formatter):
    """Render a record as one compact JSON line with only allow-listed extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _SAFE_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if "trace_id" not in entry:
            ids = _current_ids()
            if ids is not None:
                entry["trace_id"], entry["span_id"] = ids
        if record.exc_info and record.exc_info[0] is not None:
            entry["error_type"] = record.exc_info[0].__name__
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)


def _current_ids() -> tuple[str, str] | None:
    """The current span's ids, else the served request's, else ``None``."""
    ids = tracing.current_ids()
    if ids is not None:
        return ids
    request = CURRENT_REQUEST.get()
    if request is None:
        return None
    return request.trace.trace_id, request.trace.span_id


def configure_logging(enabled: bool, stream: IO[str] | None = None) -> None:
    """Install (once) an INFO JSON handler for ``imagebridge`` loggers on stderr."""
    root = logging.getLogger("imagebridge")
    for handler in list(root.handlers):
        if getattr(handler, _HANDLER_MARK, False):
            root.removeHandler(handler)
    if not enabled:
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False
