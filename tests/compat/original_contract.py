"""The original's OpenAPI document (tests/fixtures/contract), as a validator of our answers.

``validate(body, "ImageResponse")`` checks a JSON body against one of the original's
component schemas, references resolved inside the same document. Its objects say
``additionalProperties: false``, so an added key fails here as it fails the original's
strict clients.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

__all__ = ["DOCUMENT_PATH", "document", "validate"]

DOCUMENT_PATH = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "contract"
    / "imagegen-bridge-v1.openapi.json"
)


@functools.cache
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DOCUMENT_PATH.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def _validator(component: str) -> jsonschema.Draft202012Validator:
    schema = {"$ref": f"#/components/schemas/{component}", "components": document()["components"]}
    return jsonschema.Draft202012Validator(schema)


def validate(body: Any, component: str) -> None:
    """Raise ``AssertionError`` naming every place ``body`` breaks ``component``."""
    errors = sorted(_validator(component).iter_errors(body), key=lambda e: list(e.path))
    if errors:
        lines = [f"{'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:10]]
        raise AssertionError(f"not a valid original {component}:\n" + "\n".join(lines))
