"""Fitting a finished job's result into the store's per-row reserve.

The original failed a job whose result JSON exceeded the reserve, although its artifacts had
been produced and paid for. Here the result is trimmed instead: the artifact references
(id, name, sha256 and the verified image facts) are kept, everything descriptive is dropped,
and a warning says so. Only if even that does not fit does the job fail.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from imagebridge.contract.response import ImageResponse

__all__ = ["TRIMMED_WARNING", "fit_result", "result_text"]

TRIMMED_WARNING = "job_result_trimmed"
"""Warning on a stored job result that lost descriptive fields to fit the storage reserve."""

_IMAGE_KEYS = ("index", "type", "id", "name", "format", "width", "height", "bytes", "sha256")
_RESPONSE_KEYS = (
    "id",
    "created",
    "provider",
    "model",
    "requested",
    "effective",
    "session",
    "timings",
)


def result_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _trimmed(full: dict[str, Any], *, keep_names: bool) -> dict[str, Any]:
    keys = _IMAGE_KEYS if keep_names else tuple(k for k in _IMAGE_KEYS if k != "name")
    trimmed = {key: full[key] for key in _RESPONSE_KEYS if key in full}
    trimmed["data"] = [{k: item[k] for k in keys if k in item} for item in full.get("data", [])]
    failures = full.get("failures") or []
    if failures:
        # Which outputs failed, and why in one word; the error details are what grew.
        trimmed["failures"] = [
            {
                "index": item["index"],
                "generation_ms": item.get("generation_ms", 0),
                "error": {
                    "code": item["error"]["code"],
                    "message": item["error"]["message"],
                    "retryable": item["error"].get("retryable", False),
                },
            }
            for item in failures
        ]
    warnings = [w for w in full.get("warnings", []) if isinstance(w, str) and len(w) <= 64]
    trimmed["warnings"] = [*dict.fromkeys([*warnings, TRIMMED_WARNING])]
    return trimmed


def _candidates(full: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield full
    yield _trimmed(full, keep_names=True)
    yield _trimmed(full, keep_names=False)


def fit_result(response: ImageResponse, max_bytes: int) -> tuple[str, bool]:
    """Blocking: the result JSON to store and whether it was trimmed.

    Returns the smallest candidate even when it is still too large; the store then refuses
    it and the job fails with the store's own error.
    """
    full = response.to_wire()
    text = ""
    for index, candidate in enumerate(_candidates(full)):
        if index:
            # A trimmed result must still be a valid ImageResponse when read back.
            candidate = ImageResponse.model_validate(candidate).to_wire()
        text = result_text(candidate)
        if _size(text) <= max_bytes:
            return text, index > 0
    return text, True
