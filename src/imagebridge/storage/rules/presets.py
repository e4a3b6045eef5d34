"""Preset rules: names, descriptions, the storable template shape, writes and their errors.

Validating a template as a request is the job service's work (it needs the contract models
and the configured limits); a store only checks what it can store.
"""

from __future__ import annotations

import json
import re

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.records import JsonInput, PresetRecord
from imagebridge.storage.rules.values import (
    check_timestamp,
    dump_json_object,
    has_control_characters,
    utf8_size,
)

__all__ = [
    "MAX_DESCRIPTION_BYTES",
    "MAX_PRESET_TEMPLATE_BYTES",
    "SHARED_OWNER",
    "check_description",
    "check_preset_name",
    "check_preset_owner",
    "check_preset_write",
    "prepare_template",
    "preset_exists",
    "preset_not_found",
    "replaced_preset",
]

MAX_PRESET_TEMPLATE_BYTES = 262_144
"""Largest stored preset template JSON."""

MAX_DESCRIPTION_BYTES = 512

_PRESET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FORBIDDEN_TEMPLATE_KEYS = ("images", "reference_images", "mask", "idempotency_key", "version")


SHARED_OWNER = ""
"""Owner of the shared presets: the admin's (and, without keys, everyone's)."""

_MAX_OWNER_CHARS = 128


def check_preset_owner(owner: object) -> str:
    """A preset owner: ``""`` (shared) or an ownership scope such as ``key:<id>``."""
    if not isinstance(owner, str) or len(owner) > _MAX_OWNER_CHARS or has_control_characters(owner):
        raise BridgeError.invalid_request("preset owner is invalid", field="owner")
    return owner


def preset_not_found() -> BridgeError:
    return BridgeError.invalid_request("preset was not found", resource="preset")


def preset_exists() -> BridgeError:
    return BridgeError(
        ErrorCode.IDEMPOTENCY_CONFLICT,
        "a preset with this name already exists",
        details={"field": "name", "resource": "preset"},
    )


def check_preset_name(name: object) -> str:
    if not isinstance(name, str) or _PRESET_NAME.fullmatch(name) is None:
        raise BridgeError.invalid_request(
            "preset names are 1-64 ASCII letters, digits, '.', '_' or '-' and start with "
            "a letter or digit",
            field="name",
        )
    return name


def check_description(description: object) -> str | None:
    if description is None:
        return None
    size = utf8_size(description) if isinstance(description, str) else None
    if (
        not isinstance(description, str)
        or size is None
        or size > MAX_DESCRIPTION_BYTES
        or has_control_characters(description)
    ):
        raise BridgeError.invalid_request(
            f"preset description must be at most {MAX_DESCRIPTION_BYTES} bytes without "
            "control characters",
            field="description",
        )
    return description


def check_preset_write(name: str, description: str | None, now: int) -> None:
    """The checks ``create`` and ``replace`` make before preparing the template."""
    check_preset_name(name)
    check_description(description)
    check_timestamp(now)


def prepare_template(template: JsonInput, max_bytes: int) -> str:
    """Checked template JSON: an object without inputs or keys, with a non-blank prompt."""
    text, size = dump_json_object(template, "template", code=ErrorCode.INVALID_REQUEST)
    if size > max_bytes:
        raise BridgeError.invalid_request(
            f"preset template must be at most {max_bytes} bytes of JSON",
            field="template",
            max_bytes=max_bytes,
        )
    parsed = json.loads(text)
    for key in _FORBIDDEN_TEMPLATE_KEYS:
        if key in parsed:
            raise BridgeError.invalid_request(
                f"preset templates cannot contain {key}", field=f"template.{key}"
            )
    prompt = parsed.get("prompt")
    if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
        raise BridgeError.invalid_request(
            "preset template prompt must not be blank", field="template.prompt"
        )
    return text


def replaced_preset(
    existing: PresetRecord, description: str | None, template_json: str, now: int
) -> PresetRecord:
    """What ``replace`` stores: ``created`` kept, ``updated`` never moving backwards."""
    stamp = max(now, existing.updated_at)
    return PresetRecord(existing.name, description, template_json, existing.created_at, stamp)
