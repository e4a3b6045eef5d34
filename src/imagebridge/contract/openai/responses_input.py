"""The ``input`` of ``POST /v1/responses``, read for image work: a prompt and its images.

Clients send the input as OpenAI's SDKs build it: a string, or a list of items. This
module reads the items an image request can carry and refuses every other one by its
path (``input[2]``, ``input[0].content[1].file_id``), so a client learns which item the
bridge cannot serve:

- messages (``{"role": …, "content": …}``, with or without ``"type": "message"``):
  ``user`` messages give the prompt (the **last** user message's text) and the images to
  work on (its ``input_image`` parts: data URLs, or ``http(s)`` URLs fetched under the
  remote-input rules); ``system`` and ``developer`` messages add their text to the
  instructions; ``assistant`` messages (earlier turns, the SDKs' history) are read and
  left out of the prompt;
- ``image_generation_call`` items (an earlier answer's image, sent back as history by the
  Agents SDK's ``to_input_list()``): the newest one's ``result`` is the image a follow-up
  ("make it blue") edits when the last user message holds no image of its own.

An ``item_reference`` naming a kept response's ``image_generation_call`` stands for that
item (the server resolved it). ``input_file`` parts, ``file_id`` images, other
``item_reference`` items and every other tool's
items (function calls, reasoning, web search …) are refused by name: this is an image
bridge, not a model proxy. Nothing here does I/O; the engine loads and verifies the
images like any native request's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from imagebridge.contract._base import RequestModel, StrictStr
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.openai.fields import invalid, refuse, validation_refusal
from imagebridge.contract.request import ImageInput

__all__ = [
    "ImageSource",
    "ReadInput",
    "call_image",
    "image_input",
    "item_references",
    "read_input",
    "within",
]

_MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}

NOT_AN_IMAGE_ITEM = (
    "input items of type {kind} are not served: this bridge makes images from messages "
    "(input_text, input_image) and earlier image_generation_call results"
)
ITEM_REFERENCES = (
    "item_reference inputs may name the image_generation_call (ig_…) of a response this "
    "key kept (store: true, not deleted); send the item itself otherwise"
)
FILE_IDS = "file_id inputs need OpenAI's Files API, which the bridge has not; send image_url"
FILES = "input_file parts are not images; send input_image parts"


class _PromptCacheBreakpoint(RequestModel):
    mode: Literal["explicit"]
    ttl: Literal["30m", "12h"] | None = None


class _InputText(RequestModel):
    type: Literal["input_text"]
    text: StrictStr
    prompt_cache_breakpoint: _PromptCacheBreakpoint | None = None


class _InputImage(RequestModel):
    type: Literal["input_image"]
    detail: Literal["low", "high", "auto", "original"] | None = None
    image_url: StrictStr | None = None
    file_id: StrictStr | None = None
    prompt_cache_breakpoint: _PromptCacheBreakpoint | None = None


class _Message(RequestModel):
    """``EasyInputMessage``, ``Message`` and an earlier answer's assistant message."""

    role: Literal["user", "assistant", "system", "developer"]
    content: StrictStr | list[dict[str, Any]]
    type: Literal["message"] | None = None
    id: StrictStr | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    phase: Literal["commentary", "final_answer"] | None = None


class _ImageCall(RequestModel):
    """An earlier ``image_generation_call`` sent back as history (every key the SDK has)."""

    type: Literal["image_generation_call"]
    id: StrictStr
    result: StrictStr | None = None
    status: Literal["in_progress", "completed", "generating", "failed"]
    action: Literal["generate", "edit", "auto"] | None = None
    background: Literal["transparent", "opaque", "auto"] | None = None
    output_format: Literal["png", "webp", "jpeg", "gif", "svg"] | None = None
    quality: StrictStr | None = None
    revised_prompt: StrictStr | None = None
    size: StrictStr | None = None
    error: dict[str, Any] | None = None
    svg_usage: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ImageSource:
    """One image the input gives, with the request path that names it in errors."""

    param: str
    image: ImageInput


@dataclass(slots=True)
class ReadInput:
    """What the input says: the prompt, the instructions it adds and its images."""

    prompt: str = ""
    instructions: list[str] = field(default_factory=list)
    images: list[ImageSource] = field(default_factory=list)
    """The last user message's ``input_image`` parts, in order."""
    earlier: ImageSource | None = None
    """The newest earlier ``image_generation_call`` result."""


def within(param: str, exc: ValidationError) -> BridgeError:
    """A decoding failure inside ``param`` as a 422 naming the full path (``param.inner``)."""
    refusal = validation_refusal(exc, f"{param} is invalid")
    inner = refusal.field
    if inner is None:
        return invalid(param, f"{param} is invalid")
    full = f"{param}.{inner}" if not inner.startswith("[") else f"{param}{inner}"
    return invalid(full, refusal.message.replace(inner, full, 1))


def _decode(model: type[Any], raw: Any, param: str) -> Any:
    if not isinstance(raw, dict):
        raise invalid(param, f"{param} must be an object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise within(param, exc) from None


def image_input(param: str, url: str) -> ImageInput:
    """An ``image_url`` (data URL or ``http(s)`` URL) as the native input it names."""
    if url.startswith("data:"):
        return ImageInput(type="data_url", data_url=url)
    if url.startswith(("http://", "https://")):
        return ImageInput(type="url", url=url)
    raise invalid(param, f"{param} must be a data URL or an http(s) URL")


def _parts(message: _Message, param: str) -> tuple[list[str], list[ImageSource]]:
    """The texts and images of one message's content."""
    if isinstance(message.content, str):
        return [message.content], []
    texts: list[str] = []
    images: list[ImageSource] = []
    for index, raw in enumerate(message.content):
        where = f"{param}.content[{index}]"
        kind = raw.get("type") if isinstance(raw, dict) else None
        if message.role == "assistant":
            continue  # output_text / refusal parts of an earlier answer: history only
        if kind == "input_text":
            texts.append(_decode(_InputText, raw, where).text)
        elif kind == "input_image":
            if message.role != "user":
                raise refuse(where, "images are read from user messages only")
            part = _decode(_InputImage, raw, where)
            if part.file_id is not None:
                raise refuse(f"{where}.file_id", FILE_IDS)
            if part.image_url is None:
                raise invalid(f"{where}.image_url", f"{where}.image_url is required")
            url_param = f"{where}.image_url"
            images.append(ImageSource(url_param, image_input(url_param, part.image_url)))
        elif kind == "input_file":
            raise refuse(where, FILES)
        else:
            raise invalid(f"{where}.type", f"{where}.type is not a content part the bridge reads")
    return texts, images


def call_image(result: str, output_format: str | None) -> ImageInput:
    """An ``image_generation_call``'s ``result`` (base64) as the native input it is."""
    media_type = _MEDIA_TYPES.get(output_format or "")
    return ImageInput(type="base64", data=result, media_type=media_type)


def _earlier(item: _ImageCall, param: str) -> ImageSource | None:
    if item.result is None:
        return None
    return ImageSource(f"{param}.result", call_image(item.result, item.output_format))


def item_references(raw: str | list[Any] | None) -> list[str]:
    """The ids the input's ``item_reference`` items name, in order, without repeats (the
    server reads the ``image_generation_call`` ids among them from the kept responses)."""
    if not isinstance(raw, list):
        return []
    found: dict[str, None] = {}
    for item in raw:
        if isinstance(item, dict) and item.get("type") == "item_reference":
            ident = item.get("id")
            if isinstance(ident, str):
                found[ident] = None
    return list(found)


def read_input(
    raw: str | list[Any], references: Mapping[str, ImageSource] | None = None
) -> ReadInput:
    """Read ``input`` (a string, or the SDKs' item list) as described above; an
    ``item_reference`` is served when ``references`` holds the image it names."""
    read = ReadInput()
    if isinstance(raw, str):
        read.prompt = raw
        return read
    for index, item in enumerate(raw):
        param = f"input[{index}]"
        if not isinstance(item, dict):
            raise invalid(param, f"{param} must be an object")
        kind = item.get("type")
        if "role" in item and kind in (None, "message"):
            message = _decode(_Message, item, param)
            texts, images = _parts(message, param)
            if message.role == "user":
                read.prompt = "\n".join(texts)
                read.images = images
            elif message.role in ("system", "developer"):
                read.instructions.extend(text for text in texts if text)
        elif kind == "image_generation_call":
            call = _decode(_ImageCall, item, param)
            read.earlier = _earlier(call, param) or read.earlier
        elif kind == "item_reference":
            ident = item.get("id")
            source = (references or {}).get(ident) if isinstance(ident, str) else None
            if source is None:
                raise refuse(param, ITEM_REFERENCES)
            read.earlier = ImageSource(param, source.image)
        elif isinstance(kind, str):
            raise refuse(param, NOT_AN_IMAGE_ITEM.format(kind=kind))
        else:
            raise invalid(param, f"{param} is not an input item")
    return read
