"""JSON ``null`` for an optional request field means the field is absent.

The original's SDKs send ``null`` for every unset optional field, at every level; each
request model must read that exactly as if the key were missing, while a ``null`` for a
required field is still refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from imagebridge.contract import BridgeError
from imagebridge.contract._base import RequestModel, decode_model
from imagebridge.contract.jobs import ImageJobUpdate
from imagebridge.contract.openai.images import CompatibleGenerationRequest
from imagebridge.contract.presets import ImagePresetCreate, ImagePresetWrite
from imagebridge.contract.request import ImageRequest

SECTIONS = {
    "parameters": ["n", "size", "aspect_ratio", "resolution", "quality", "output_format",
                   "output_compression", "background", "moderation", "partial_images",
                   "failure_policy", "input_fidelity", "action"],
    "routing": ["provider", "model", "fallbacks", "fallback_policy"],
    "session": ["mode", "key", "thread_id"],
    "output": ["response_format", "filename_prefix", "directory", "filename", "collision",
               "metadata", "transparency"],
    "policies": ["compatibility", "negative_prompt", "revised_prompt", "batch_execution"],
}  # fmt: skip
TOP = ["version", "negative_prompt", "reference_images", "idempotency_key", "timeout_ms", "user"]


def nulls_everywhere(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` plus a ``null`` for every optional key it lacks, nested sections included."""
    filled: dict[str, Any] = dict.fromkeys(TOP) | body
    for section, keys in SECTIONS.items():
        filled[section] = dict.fromkeys(keys) | body.get(section, {})
    return filled


def decode(model: type[RequestModel], body: dict[str, Any]) -> RequestModel:
    return decode_model(model, json.dumps(body), "bad body")


@pytest.mark.parametrize(
    "body",
    [
        {"operation": "generate", "prompt": "a fox", "mask": None, "images": None},
        {
            "operation": "edit",
            "prompt": "make it blue",
            "images": [{"type": "base64", "data": "AAAA", "url": None, "path": None}],
            "mask": None,
        },
    ],
)
def test_every_null_of_an_image_request_means_absent(body: dict[str, Any]) -> None:
    bare = {key: value for key, value in body.items() if value is not None}
    bare["images"] = [
        {k: v for k, v in item.items() if v is not None} for item in body.get("images") or []
    ] or None
    bare = {key: value for key, value in bare.items() if value is not None}
    assert decode(ImageRequest, nulls_everywhere(body)) == decode(ImageRequest, bare)


def test_preset_job_and_compat_bodies_read_null_as_absent() -> None:
    sections = {section: dict.fromkeys(keys) for section, keys in SECTIONS.items()}
    template = dict.fromkeys(["prompt", "negative_prompt", "operation", "timeout_ms", "user"])
    template.update(sections)
    created = decode(ImagePresetCreate, {"name": "p", "description": None, "template": template})
    assert created == decode(ImagePresetCreate, {"name": "p", "template": {}})
    written = decode(ImagePresetWrite, {"description": None, "template": {"routing": None}})
    assert written == decode(ImagePresetWrite, {"template": {}})
    update = decode(ImageJobUpdate, {"favorite": None, "deleted": True})
    assert update == decode(ImageJobUpdate, {"deleted": True})
    compat = {"prompt": "x", "n": None, "size": None, "quality": None, "model": None,
              "user": None, "imagegen_bridge": None}  # fmt: skip
    assert decode(CompatibleGenerationRequest, compat) == decode(
        CompatibleGenerationRequest, {"prompt": "x"}
    )


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (ImageRequest, {"operation": "generate", "prompt": None}),
        (ImageRequest, {"operation": None, "prompt": "a fox"}),
        (ImagePresetCreate, {"name": None, "template": {}}),
        (ImagePresetWrite, {"template": None}),
    ],
)
def test_a_null_required_field_is_still_refused(model: type[RequestModel], body: Any) -> None:
    with pytest.raises(BridgeError, match="bad body"):
        decode(model, body)
