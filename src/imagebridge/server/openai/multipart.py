"""``multipart/form-data`` for ``POST /v1/images/edits``, parsed as it streams.

The body is fed chunk by chunk to python-multipart's streaming parser, so the request body
limit (enforced by the middleware) and the per-part limits here bound memory: a text part
may hold 64 KiB, an image part at most the configured encoded-image limit. Parts are
identified by name; anything unexpected is refused with the contract's messages rather
than ignored, so a misspelt field never silently changes a request.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from imagebridge.contract._base import decode_model
from imagebridge.contract.enums import (
    Background,
    CompatibilityMode,
    InputFidelity,
    Moderation,
    Operation,
    RevisedPromptPolicy,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.openai.fields import (
    OPENAI_QUALITIES,
    REFUSED_FIELDS,
    Translation,
    refuse,
    translate,
)
from imagebridge.contract.request import ImageRequest, parse_size
from imagebridge.engine.validation import check_mask as engine_check_mask
from imagebridge.imaging.inspect import ainspect_image

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

__all__ = [
    "MAX_TEXT_PART_BYTES",
    "EditForm",
    "EditRequest",
    "build_edit_request",
    "check_mask",
    "parse_edit_form",
]

MAX_TEXT_PART_BYTES = 64 * 1024
_INLINE_ENCODE_BYTES = 1024 * 1024
IMAGE_FIELDS = frozenset({"image", "image[]", "reference_image", "mask", "markup"})
TEXT_FIELDS = frozenset(
    {
        "prompt",
        "model",
        "n",
        "size",
        "quality",
        "output_format",
        "output_compression",
        "background",
        "moderation",
        "input_fidelity",
        "response_format",
        "user",
        "safety_identifier",
        "style",
        "complexity",
        "partial_images",
        "stream",
        "frame_count",
        "frame_duration_ms",
        "provider",
        "negative_prompt",
        "compatibility",
        "revised_prompt",
        "session_key",
    }
)
_SVG_PREFIX = "svg["
"""How OpenAI's SDKs spell the ``svg`` object's keys in a form (``svg[model]``)."""
_CHOICES: dict[str, tuple[str, ...]] = {
    "quality": tuple(OPENAI_QUALITIES),
    "output_format": ("png", "jpeg", "webp", "gif", "svg"),
    "background": tuple(Background),
    "moderation": tuple(Moderation),
    "input_fidelity": tuple(InputFidelity),
    "style": ("vivid", "natural"),
    "complexity": ("low", "medium", "high"),
}
_INTEGERS = ("n", "output_compression", "partial_images", "frame_count", "frame_duration_ms")
_POLICY_ENUMS: dict[str, type[Any]] = {
    "compatibility": CompatibilityMode,
    "revised_prompt": RevisedPromptPolicy,
}


def _invalid(message: str, param: str | None = None) -> BridgeError:
    if param is None:
        return BridgeError.invalid_request(message)
    return BridgeError.invalid_request(message, field=param)


def _field_name(name: str) -> str | None:
    """A caller's part name fit to echo as ``param`` (bounded, printable)."""
    return name if len(name) <= 100 and name.isprintable() else None


@dataclass(slots=True)
class ImagePart:
    field: str
    data: bytes
    filename: str | None
    media_type: str | None


@dataclass(slots=True)
class EditForm:
    """The parsed form: text fields (each at most once) and image parts in order."""

    text: dict[str, str] = field(default_factory=dict)
    images: list[ImagePart] = field(default_factory=list)


@dataclass(slots=True)
class _PartState:
    headers: dict[str, str] = field(default_factory=dict)
    header_field: bytearray = field(default_factory=bytearray)
    header_value: bytearray = field(default_factory=bytearray)
    name: str | None = None
    filename: str | None = None
    media_type: str | None = None
    data: bytearray = field(default_factory=bytearray)


class _FormCollector:
    """python-multipart callbacks that build an :class:`EditForm` under limits."""

    def __init__(self, max_image_bytes: int) -> None:
        self.form = EditForm()
        self.max_image_bytes = max_image_bytes
        self.part = _PartState()
        self.finished = False
        self._mask_seen = False

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }

    def _part_begin(self) -> None:
        self.part = _PartState()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self.part.header_field += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self.part.header_value += data[start:end]

    def _header_end(self) -> None:
        part = self.part
        name = bytes(part.header_field).decode("latin-1").strip().lower()
        part.headers[name] = bytes(part.header_value).decode("latin-1").strip()
        part.header_field.clear()
        part.header_value.clear()

    def _headers_finished(self) -> None:
        part = self.part
        disposition, options = parse_options_header(part.headers.get("content-disposition"))
        raw_name = options.get(b"name")
        if disposition != b"form-data" or raw_name is None:
            raise _invalid("multipart body is malformed")
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid("multipart field is unsupported") from None
        if name.startswith(_SVG_PREFIX):
            raise refuse("svg", REFUSED_FIELDS["svg"])
        if name in TEXT_FIELDS:
            if name in self.form.text:
                raise _invalid("multipart text field must not be repeated", name)
        elif name in IMAGE_FIELDS:
            if name == "markup":
                raise refuse("markup", REFUSED_FIELDS["markup"])
            if name == "mask":
                if self._mask_seen:
                    raise _invalid("multipart mask field must not be repeated", "mask")
                self._mask_seen = True
            raw_filename = options.get(b"filename")
            if raw_filename:
                part.filename = raw_filename.decode("utf-8", "replace")
            content_type = part.headers.get("content-type")
            if content_type:
                media, _ = parse_options_header(content_type)
                part.media_type = media.decode("latin-1").lower() or None
        else:
            raise _invalid("multipart field is unsupported", _field_name(name))
        part.name = name

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        part = self.part
        part.data += data[start:end]
        if part.name in TEXT_FIELDS:
            if len(part.data) > MAX_TEXT_PART_BYTES:
                raise _invalid("multipart text field exceeds the byte limit", part.name)
        elif len(part.data) > self.max_image_bytes:
            raise BridgeError(
                ErrorCode.INPUT,
                "encoded image exceeds the configured size limit",
                details={"field": part.name, "maximum_bytes": self.max_image_bytes},
            )

    def _part_end(self) -> None:
        part = self.part
        if part.name is None:
            raise _invalid("multipart body is malformed")
        if part.name in TEXT_FIELDS:
            try:
                self.form.text[part.name] = bytes(part.data).decode("utf-8")
            except UnicodeDecodeError:
                raise _invalid(f"multipart {part.name} is invalid", part.name) from None
        else:
            self.form.images.append(
                ImagePart(part.name, bytes(part.data), part.filename, part.media_type)
            )
        self.part = _PartState()

    def _end(self) -> None:
        self.finished = True


def _boundary(request: Request) -> bytes:
    content_type, options = parse_options_header(request.headers.get("content-type"))
    boundary = options.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise _invalid("request must be valid multipart/form-data")
    return boundary


async def parse_edit_form(request: Request, *, max_image_bytes: int) -> EditForm:
    """Stream the body through the parser; raise the contract's 422s on any problem."""
    boundary = _boundary(request)
    collector = _FormCollector(max_image_bytes)
    try:
        parser = MultipartParser(boundary, collector.callbacks())
        async for chunk in request.stream():
            if chunk:
                parser.write(chunk)
        parser.finalize()
    except FormParserError:
        raise _invalid("multipart body is malformed") from None
    if not collector.finished:
        raise _invalid("multipart body is malformed")
    return collector.form


def _choice(name: str, raw: str, choices: tuple[str, ...]) -> str:
    if raw not in choices:
        raise _invalid(f"multipart {name} is invalid", name)
    return raw


def _enum_value(name: str, raw: str, enum: type[Any]) -> str:
    try:
        return str(enum(raw).value)
    except ValueError:
        raise _invalid(f"multipart {name} is invalid", name) from None


def _integer(name: str, raw: str) -> int:
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise _invalid(f"multipart {name} is invalid", name)
    value = int(raw)
    if name in ("n", "output_compression", "partial_images") and value > 255:
        raise _invalid(f"multipart {name} is invalid", name)
    return value


def _boolean(name: str, raw: str) -> bool:
    if raw not in ("true", "false"):
        raise _invalid(f"multipart {name} must be true or false", name)
    return raw == "true"


async def _encode(data: bytes) -> str:
    if len(data) > _INLINE_ENCODE_BYTES:
        encoded = await asyncio.to_thread(base64.b64encode, data)
    else:
        encoded = base64.b64encode(data)
    return encoded.decode("ascii")


async def _image_input(part: ImagePart) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "base64", "data": await _encode(part.data)}
    if part.media_type is not None and part.media_type.startswith("image/"):
        # A declared image type is checked against the bytes; application/octet-stream
        # (what OpenAI's SDKs send for bytes or BytesIO) or no type: the bytes decide.
        item["media_type"] = part.media_type
    if part.filename is not None:
        item["filename"] = part.filename
    return item


async def check_mask(image: bytes, mask: bytes) -> None:
    """Refuse, before any provider runs, a mask that cannot mark an edit of ``image``.

    The engine's one mask rule (:func:`imagebridge.engine.validation.check_mask`: the first
    image's size, an alpha channel), applied as the form arrives. Bytes that do not inspect
    as an image are left to the engine's input checks, which name them.
    """
    try:
        image_info, mask_info = await asyncio.gather(ainspect_image(image), ainspect_image(mask))
    except BridgeError:
        return
    engine_check_mask(mask_info, image_info)


@dataclass(frozen=True, slots=True)
class EditRequest:
    """The native edit request, the OpenAI fields' decisions, and whether a stream was asked."""

    request: ImageRequest
    translation: Translation
    stream: bool


def _openai_values(text: dict[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in _INTEGERS:
        if name in text:
            values[name] = _integer(name, text[name])
    if "size" in text:
        try:
            parse_size(text["size"])
        except ValueError:
            raise _invalid("multipart size is invalid", "size") from None
        values["size"] = text["size"]
    for name, choices in _CHOICES.items():
        if name in text:
            values[name] = _choice(name, text[name], choices)
    for name in ("user", "safety_identifier"):
        if name in text:
            values[name] = text[name]
    return values


async def build_edit_request(form: EditForm) -> EditRequest:
    """Map the form onto a native ``edit`` request."""
    sources = [part for part in form.images if part.field in ("image", "image[]")]
    if not sources:
        raise _invalid("multipart edit requires at least one image", "image")
    text = form.text
    if "prompt" not in text:
        raise _invalid("multipart edit requires a prompt", "prompt")
    translation = translate(_openai_values(text))
    stream = _boolean("stream", text["stream"]) if "stream" in text else False
    policies = {
        name: _enum_value(name, text[name], enum)
        for name, enum in _POLICY_ENUMS.items()
        if name in text
    }
    response_format = text.get("response_format", "b64_json")
    if response_format not in ("b64_json", "url"):
        raise _invalid("multipart response_format is invalid", "response_format")
    routing: dict[str, Any] = {}
    if "provider" in text:
        routing["provider"] = text["provider"]
    if "model" in text:
        routing["model"] = text["model"]
    body: dict[str, Any] = {
        "prompt": text["prompt"],
        "operation": Operation.EDIT.value,
        "images": [await _image_input(part) for part in sources],
        "parameters": translation.parameters,
        "routing": routing,
        "output": {"response_format": response_format},
        "policies": policies,
    }
    references = [part for part in form.images if part.field == "reference_image"]
    if references:
        body["reference_images"] = [await _image_input(part) for part in references]
    masks = [part for part in form.images if part.field == "mask"]
    if masks:
        await check_mask(sources[0].data, masks[0].data)
        body["mask"] = await _image_input(masks[0])
    if "negative_prompt" in text:
        body["negative_prompt"] = text["negative_prompt"]
    if translation.user is not None:
        body["user"] = translation.user
    if "session_key" in text:
        body["session"] = {"mode": "persistent", "key": text["session_key"]}
    request = decode_model(ImageRequest, body, "multipart body is malformed")
    return EditRequest(request, translation, stream)
