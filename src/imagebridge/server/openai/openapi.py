"""The OpenAI-compatible surface's part of the OpenAPI document.

:func:`imagebridge.server.openapi.build_openapi` builds one document for every route; what
only the OpenAI dialect needs lives here, beside its routes: the edits route's multipart
form (its routes read their bodies themselves, so FastAPI cannot see it), the generation
request's model, and the names the original gives the compatible shapes (``Compat*`` in our
contract, ``Compatible*`` in its document).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from imagebridge.contract.openai.images import CompatibleGenerationRequest

__all__ = [
    "EDIT_FORM_SCHEMA",
    "OPENAI_MODELS",
    "OPENAI_NAMES",
    "OPENAI_STANDALONE",
    "edit_request_body",
]

#: Contract models whose schemas the document adds to ``components``.
OPENAI_MODELS: tuple[type[BaseModel], ...] = (CompatibleGenerationRequest,)

#: Our model name -> the original's component name, for the same shape.
OPENAI_NAMES: dict[str, str] = {
    "CompatImagesResponse": "CompatibleImagesResponse",
    "CompatBridgeExtension": "CompatibleExtensions",
}

EDIT_FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["prompt", "image"],
    "properties": {
        "image": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "reference_image": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "mask": {"type": "string", "format": "binary"},
        "prompt": {"type": "string"},
        "model": {"type": "string"},
        "n": {"type": "integer", "minimum": 1, "maximum": 255},
        "size": {"type": "string", "pattern": "^(auto|[1-9][0-9]*x[1-9][0-9]*)$"},
        "quality": {"enum": ["auto", "low", "medium", "high", "standard", "hd", "xhigh", "max"]},
        "output_format": {"enum": ["png", "jpeg", "webp", "gif", "svg"]},
        "output_compression": {"type": "integer", "minimum": 0, "maximum": 100},
        "background": {"enum": ["auto", "opaque", "transparent"]},
        "moderation": {"enum": ["auto", "low"]},
        "input_fidelity": {"enum": ["low", "high"]},
        "response_format": {"enum": ["b64_json", "url"]},
        "user": {"type": "string"},
        # OpenAI's other images.edit fields (docs/api-decisions.md, "OpenAI clients")
        "safety_identifier": {"type": "string"},
        "style": {"enum": ["vivid", "natural"]},
        "complexity": {"enum": ["low", "medium", "high"]},
        "partial_images": {"type": "integer", "minimum": 0, "maximum": 3},
        "stream": {"enum": ["true", "false"]},
        "frame_count": {"type": "integer", "minimum": 2, "maximum": 16},
        "frame_duration_ms": {"type": "integer", "minimum": 0},
        "markup": {"type": "string", "format": "binary"},
        "provider": {"type": "string"},
        "negative_prompt": {"type": "string"},
        "compatibility": {"enum": ["strict", "normalize", "best_effort"]},
        "revised_prompt": {"enum": ["include", "omit", "require"]},
        "session_key": {"type": "string"},
    },
}

edit_request_body: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {"$ref": "#/components/schemas/CompatibleEditRequest"},
            "encoding": {
                "image": {"contentType": "image/png, image/jpeg, image/webp"},
                "reference_image": {"contentType": "image/png, image/jpeg, image/webp"},
                "mask": {"contentType": "image/png"},
            },
        }
    },
}


#: Schemas the routes refer to that no model generates, under the original's names.
OPENAI_STANDALONE: dict[str, Any] = {"CompatibleEditRequest": EDIT_FORM_SCHEMA}
