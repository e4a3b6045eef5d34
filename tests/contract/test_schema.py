"""The exported JSON Schema covers the original contract's definitions and fields."""

from __future__ import annotations

import json

from imagebridge.contract.schema import contract_json_schema
from tests.support.fixture_files import ORIGINAL_SCHEMA

ORIGINAL = ORIGINAL_SCHEMA

# Definitions the original names as separate string/union types that we inline.
INLINED = {"AspectRatio", "ImageSize", "PresetOperation"}


def test_every_original_definition_exists() -> None:
    ours = contract_json_schema()["$defs"]
    original = json.loads(ORIGINAL.read_text())["$defs"]
    assert set(original) - set(ours) == INLINED


def test_object_definitions_have_the_original_properties() -> None:
    ours = contract_json_schema()["$defs"]
    original = json.loads(ORIGINAL.read_text())["$defs"]
    checked = 0
    for name, body in original.items():
        if name in INLINED or "properties" not in body:
            continue
        expected = set(body["properties"])
        for variant in body.get("oneOf", []):
            expected |= set(variant.get("properties", {}))
        assert expected <= set(ours[name]["properties"]), name
        checked += 1
    assert checked >= 30


def test_enum_values_match() -> None:
    ours = contract_json_schema()["$defs"]
    original = json.loads(ORIGINAL.read_text())["$defs"]
    for name, body in original.items():
        values = body.get("enum") or [v.get("const") for v in body.get("oneOf", []) if "const" in v]
        if not values or name not in ours:
            continue
        assert set(values) == set(ours[name]["enum"]), name


def test_message_kinds_match() -> None:
    ours = [m["properties"]["message"]["const"] for m in contract_json_schema()["oneOf"]]
    original = json.loads(ORIGINAL.read_text())["oneOf"]
    assert ours == [m["properties"]["message"]["const"] for m in original]
