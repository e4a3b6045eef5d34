"""Structured JSON logs on stderr (``server.tracing.enabled``).

One JSON object per line with the timestamp, level, logger, message and whatever safe
fields the caller attached through ``extra`` (request id, trace id, route, status,
provider, error code, timings). Call sites pass identifiers and numbers only; the
formatter never serializes arguments it was not given explicitly, and prompts, tokens,
bodies and image bytes are never handed to a logger in the first place.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any

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
        if record.exc_info and record.exc_info[0] is not None:
            entry["error_type"] = record.exc_info[0].__name__
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)


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
