"""Builders for capability documents used across engine tests."""

from __future__ import annotations

from typing import Any

from imagebridge.contract.capabilities import ProviderCapabilities

NO_INPUTS = {"support": "unsupported", "max_count": 0, "max_bytes_each": 0, "max_bytes_total": 0}
SOME_INPUTS = {
    "support": "native",
    "max_count": 5,
    "max_bytes_each": 1 << 25,
    "max_bytes_total": 1 << 26,
}


def capabilities(**overrides: Any) -> ProviderCapabilities:
    """The negotiation statements' provider: count 1..2 native, auto-only, png only."""
    body: dict[str, Any] = {
        "provider": "test-provider",
        "implementation_version": "0.0.1",
        "model": "test-image",
        "experimental": False,
        "generation": True,
        "edits": True,
        "count": {"min": 1, "max": 2},
        "batching": {
            "mode": "native",
            "native_count": {"min": 1, "max": 2},
            "max_parallel_outputs": 2,
        },
        "sizes": {"auto": True, "allowed": [], "arbitrary": False},
        "aspect_ratio": "unsupported",
        "resolution": "unsupported",
        "qualities": ["auto"],
        "output_formats": ["png"],
        "backgrounds": ["auto"],
        "transparent_background": "unsupported",
        "moderation": ["auto"],
        "negative_prompt": "emulated",
        "revised_prompt": "unsupported",
        "user_attribution": "unsupported",
        "input_fidelities": [],
        "actions": ["auto"],
        "reference_images": SOME_INPUTS,
        "edit_images": SOME_INPUTS,
        "masks": NO_INPUTS,
        "partial_images": {"min": 0, "max": 0},
        "persistent_sessions": False,
        "explicit_threads": False,
    }
    body.update(overrides)
    return ProviderCapabilities.model_validate(body)
