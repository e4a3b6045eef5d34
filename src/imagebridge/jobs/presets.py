"""Named request templates: create, read, replace, delete, list.

The store checks names, descriptions and the stored shape; this service adds what needs the
contract: a template must be a valid request once a prompt (and, where the template needs
one, an input image) is supplied. Validation uses the runtime's *configured* limits, so a
preset accepted here is never refused later for ``n`` above a hard-coded default (as the
original did). Each preset has an owner: ``""`` for the shared ones, an API key's scope for
a key's own (docs/keys.md); the caller (the HTTP route) says whose presets it acts on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from imagebridge.contract.enums import ImageAction, Operation
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.presets import (
    ImagePreset,
    ImagePresetCreate,
    ImagePresetPage,
    ImagePresetTemplate,
    ImagePresetWrite,
)
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.validation import RequestLimits, validate_request
from imagebridge.storage.interfaces import PresetStore
from imagebridge.storage.records import PresetRecord
from imagebridge.storage.rules.pages import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT
from imagebridge.storage.rules.presets import SHARED_OWNER, check_description, check_preset_name

__all__ = ["PLACEHOLDER_PROMPT", "PresetService", "template_request", "validate_template"]

PLACEHOLDER_PROMPT = "preset template placeholder prompt"
"""Stands in for the caller's prompt when a template has none of its own."""

# A real 1×1 PNG: validation never decodes inputs, but a placeholder should still be honest.
_PLACEHOLDER_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4//8/AAX+Av4N70a4AAAAAElFTkSuQmCC"
)
_PLACEHOLDER_IMAGE = {"type": "base64", "data": _PLACEHOLDER_PNG, "media_type": "image/png"}


def template_request(template: ImagePresetTemplate) -> ImageRequest:
    """The request a template stands for, with placeholders where the caller fills in.

    The template's own prompt is used when it has one, so its size limits apply; an edit
    template gets a placeholder source image, and a generate template whose parameters
    need a reference (``input_fidelity``, ``action: edit``) gets a placeholder reference.
    """
    data: dict[str, Any] = template.model_dump(mode="json", exclude={"prompt"})
    data["prompt"] = template.prompt if template.prompt is not None else PLACEHOLDER_PROMPT
    parameters = template.parameters
    if template.operation is Operation.EDIT:
        data["images"] = [dict(_PLACEHOLDER_IMAGE)]
    elif parameters.input_fidelity is not None or parameters.action is ImageAction.EDIT:
        data["reference_images"] = [dict(_PLACEHOLDER_IMAGE)]
    return ImageRequest.model_validate(data)


def _template_issue(issue: dict[str, Any]) -> dict[str, Any]:
    field = issue.get("field")
    if isinstance(field, str) and field != "$":
        return {**issue, "field": f"template.{field}"}
    return issue


def validate_template(template: ImagePresetTemplate, limits: RequestLimits) -> None:
    """Raise ``invalid_request`` when the template cannot become a valid request.

    Issues are those of request validation with fields prefixed by ``template.``.
    """
    if template.prompt is not None and not template.prompt.strip():
        raise BridgeError.invalid_request(
            "preset template prompt must not be blank", field="template.prompt"
        )
    try:
        validate_request(template_request(template), limits)
    except BridgeError as error:
        issues = error.details.get("issues")
        if not isinstance(issues, list):
            raise
        raise BridgeError.invalid_request(
            "preset template validation failed",
            issues=[_template_issue(issue) for issue in issues],
        ) from None


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_LIMIT:
        raise BridgeError.invalid_request(
            f"preset page limit must be between 1 and {MAX_PAGE_LIMIT}", field="limit"
        )
    return limit


def _preset_view(record: PresetRecord) -> ImagePreset:
    try:
        template = ImagePresetTemplate.model_validate_json(record.template_json)
    except ValidationError as exc:
        raise BridgeError(
            ErrorCode.INTERNAL,
            "preset record could not be read",
            details={"resource": "preset_record", "name": record.name},
        ) from exc
    return ImagePreset(
        name=record.name,
        description=record.description,
        template=template,
        created=record.created_at,
        updated=record.updated_at,
    )


class PresetService:
    """Preset CRUD with contract-level template validation."""

    def __init__(
        self,
        store: PresetStore,
        limits: RequestLimits,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._limits = limits
        self._clock = clock

    def _now(self) -> int:
        return max(0, int(self._clock()))

    def _checked(self, description: str | None, template: ImagePresetTemplate) -> dict[str, Any]:
        check_description(description)
        validate_template(template, self._limits)
        # Stored with every default spelled out, as the original serializes templates.
        return template.model_dump(mode="json")

    async def create(self, body: ImagePresetCreate, *, owner: str = SHARED_OWNER) -> ImagePreset:
        """A new preset of ``owner`` (``created == updated``); a name the owner already has
        is a 409 conflict."""
        check_preset_name(body.name)
        template = self._checked(body.description, body.template)
        record = await self._store.create(
            body.name,
            description=body.description,
            template_json=template,
            now=self._now(),
            owner=owner,
        )
        return _preset_view(record)

    async def get(
        self, name: str, *, owner: str = SHARED_OWNER, shared: bool = False
    ) -> ImagePreset:
        """``owner``'s preset (``shared``: else the shared one of that name)."""
        check_preset_name(name)
        return _preset_view(await self._store.get(name, owner=owner, shared=shared))

    async def replace(
        self, name: str, body: ImagePresetWrite, *, owner: str = SHARED_OWNER
    ) -> ImagePreset:
        """Full replace of ``owner``'s preset: keeps ``created``; an omitted description
        clears the old one."""
        check_preset_name(name)
        template = self._checked(body.description, body.template)
        record = await self._store.replace(
            name,
            description=body.description,
            template_json=template,
            now=self._now(),
            owner=owner,
        )
        return _preset_view(record)

    async def delete(self, name: str, *, owner: str = SHARED_OWNER) -> None:
        check_preset_name(name)
        await self._store.delete(name, owner=owner)

    async def list(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        owner: str = SHARED_OWNER,
        shared: bool = False,
    ) -> ImagePresetPage:
        """``owner``'s presets (``shared``: with the shared ones), by name, ascending, after
        the exclusive ``cursor``."""
        checked = _check_limit(DEFAULT_PAGE_LIMIT if limit is None else limit)
        page = await self._store.list(cursor=cursor, limit=checked, owner=owner, shared=shared)
        return ImagePresetPage(
            items=[_preset_view(record) for record in page.items], next_cursor=page.next_cursor
        )
