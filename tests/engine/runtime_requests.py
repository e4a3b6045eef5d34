"""Requests and a capability document for the runtime's tests (test_runtime, test_routing,
test_fallback). ``ONE``: one output per call, and only the 2×2 size offered."""

from __future__ import annotations

from typing import Any

from imagebridge.contract.request import ImageRequest

SIZES_2X2 = {"sizes": {"auto": True, "allowed": ["2x2"], "arbitrary": False}}
ONE = {
    "count": {"min": 1, "max": 1},
    "batching": {"mode": "native", "native_count": {"min": 1, "max": 1}, "max_parallel_outputs": 1},
    **SIZES_2X2,
}


def request(**fields: Any) -> ImageRequest:
    body: dict[str, Any] = {"operation": "generate", "prompt": "test"}
    body.update(fields)
    return ImageRequest.model_validate(body)
