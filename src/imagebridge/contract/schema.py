"""JSON Schema export of the v1 contract, shaped like the original's ``ContractMessage``.

``imagegen-bridge schema`` writes it; tests compare it with the original document.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.events import ProviderEvent
from imagebridge.contract.jobs import ImageJob, ImageJobPage, ImageJobUpdate
from imagebridge.contract.presets import (
    ImagePreset,
    ImagePresetCreate,
    ImagePresetPage,
    ImagePresetWrite,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import BridgeErrorBody, ImageResponse, ValidationIssue

__all__ = ["CONTRACT_MESSAGES", "contract_json_schema", "contract_json_schema_text"]

CONTRACT_MESSAGES: tuple[tuple[str, type[BaseModel], str], ...] = (
    ("request", ImageRequest, "Normalized request."),
    ("response", ImageResponse, "Normalized response."),
    ("capabilities", ProviderCapabilities, "Provider capability document."),
    ("provider", ProviderDescriptor, "Provider discovery document."),
    ("job", ImageJob, "Complete durable job detail."),
    ("job_page", ImageJobPage, "Cursor-paginated durable job summaries."),
    ("job_update", ImageJobUpdate, "Mutable retained-history fields."),
    ("preset", ImagePreset, "Persisted reusable request preset."),
    ("preset_create", ImagePresetCreate, "Preset create payload."),
    ("preset_write", ImagePresetWrite, "Preset replacement payload."),
    ("preset_page", ImagePresetPage, "Cursor-paginated preset collection."),
    ("error", BridgeErrorBody, "Public bridge error."),
    ("validation_issue", ValidationIssue, "One validation issue."),
)

_RENAMES = {"BridgeErrorBody": "BridgeError"}


def _rename_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                name = value.rsplit("/", 1)[-1]
                value = f"#/$defs/{_RENAMES.get(name, name)}"
            out[key] = _rename_refs(value)
        return out
    if isinstance(node, list):
        return [_rename_refs(item) for item in node]
    return node


def contract_json_schema() -> dict[str, Any]:
    """One JSON Schema (draft 2020-12) covering every message of the contract."""
    mode: JsonSchemaMode = "serialization"
    entries: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (model, mode) for _, model, _ in CONTRACT_MESSAGES
    ]
    refs, schema = models_json_schema(entries, ref_template="#/$defs/{model}")
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    event_schema = TypeAdapter(ProviderEvent).json_schema(mode=mode, ref_template="#/$defs/{model}")
    defs.update(event_schema.pop("$defs", {}))
    defs["ProviderEvent"] = event_schema
    defs = {_RENAMES.get(name, name): body for name, body in defs.items()}
    messages: list[dict[str, Any]] = []
    for message, model, description in CONTRACT_MESSAGES:
        ref = refs[(model, mode)]["$ref"]
        messages.append(
            {
                "description": description,
                "type": "object",
                "properties": {
                    "message": {"type": "string", "const": message},
                    "body": {"$ref": ref},
                },
                "required": ["message", "body"],
            }
        )
    messages.insert(
        4,
        {
            "description": "Incremental provider event.",
            "type": "object",
            "properties": {
                "message": {"type": "string", "const": "event"},
                "body": {"$ref": "#/$defs/ProviderEvent"},
            },
            "required": ["message", "body"],
        },
    )
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ContractMessage",
        "description": "Every message of the imagegen-bridge v1 contract.",
        "oneOf": messages,
        "$defs": dict(sorted(defs.items())),
    }
    result: dict[str, Any] = _rename_refs(document)
    return result


def contract_json_schema_text() -> str:
    return json.dumps(contract_json_schema(), indent=2, sort_keys=False) + "\n"
