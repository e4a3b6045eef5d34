"""Fitting job results into the storage reserve (the original failed a job whose result
was too large, though its artifacts were written)."""

from __future__ import annotations

import json
from typing import Any

from imagebridge.contract.response import ImageResponse
from imagebridge.jobs.trimming import TRIMMED_WARNING, fit_result


def response(outputs: int = 2, prompt_chars: int = 10) -> ImageResponse:
    params = {"n": outputs, "size": "16x16"}
    data: dict[str, Any] = {
        "id": "01900000-0000-7000-8000-000000000001",
        "created": 5,
        "provider": "mock",
        "model": "mock-image-1",
        "requested": params,
        "effective": params,
        "normalizations": [
            {"field": "parameters.size", "requested": "x" * 500, "reason": "normalized"}
        ],
        "data": [
            {
                "index": i,
                "type": "artifact",
                "id": f"01900000-0000-7000-8000-{i:012d}",
                "name": f"gallery/fox-{i}.png",
                "format": "png",
                "width": 16,
                "height": 16,
                "bytes": 100,
                "sha256": f"{i:064x}",
                "generation_ms": 10,
                "metadata_name": f"gallery/fox-{i}.json",
            }
            for i in range(outputs)
        ],
        "failures": [
            {
                "index": outputs,
                "generation_ms": 3,
                "error": {
                    "code": "upstream",
                    "message": "failed",
                    "retryable": True,
                    "details": {"noise": "n" * 400},
                },
            }
        ],
        "revised_prompt": "p" * prompt_chars,
        "usage": {"input_tokens": 1},
        "session": {"thread_id": "thread-1", "reused": False},
        "warnings": ["partial_output_failure"],
    }
    return ImageResponse.model_validate(data)


def test_a_result_that_fits_is_stored_unchanged() -> None:
    full = response()
    text, trimmed = fit_result(full, 1_000_000)
    assert trimmed is False
    assert json.loads(text) == full.to_wire()


def test_an_oversized_result_keeps_artifact_references_and_says_so() -> None:
    full = response(prompt_chars=50_000)
    text, trimmed = fit_result(full, 4_000)
    assert trimmed is True and len(text.encode()) <= 4_000
    kept = ImageResponse.model_validate_json(text)
    assert kept.warnings == ["partial_output_failure", TRIMMED_WARNING]
    assert kept.revised_prompt is None and kept.usage is None and kept.normalizations == []
    assert kept.session == full.session and kept.id == full.id
    for before, after in zip(full.data, kept.data, strict=True):
        assert (after.id, after.name, after.sha256) == (before.id, before.name, before.sha256)
        assert (after.width, after.height, after.bytes) == (before.width, before.height, 100)
        assert after.generation_ms is None and after.metadata_name is None
    assert [f.index for f in kept.failures] == [2]
    assert kept.failures[0].error.details == {}


def test_names_go_last_and_an_impossible_fit_returns_the_smallest_form() -> None:
    full = response(outputs=40)
    whole, _ = fit_result(full, 1_000_000)
    with_names, trimmed = fit_result(full, len(whole) - 1)
    assert trimmed is True
    assert all(item.name is not None for item in ImageResponse.model_validate_json(with_names).data)

    smallest, trimmed = fit_result(full, 10)
    assert trimmed is True and len(smallest) < len(with_names)
    kept = ImageResponse.model_validate_json(smallest)
    assert all(item.name is None and item.id is not None for item in kept.data)
    assert fit_result(full, len(with_names) - 1)[0] == smallest
