"""The dedicated images routes, as codex 0.169 calls them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import CodexCredentials
from imagebridge.providers.codex.wire._constants import (
    _REQUEST_ID_PATTERN,
    DEFAULT_CODEX_BASE_URL,
    DEFAULT_IMAGE_MODEL,
    MAX_BASE64_CHARS,
    MAX_IMAGES_API_INPUTS,
    MAX_REVISED_PROMPT_BYTES,
    InputImage,
)
from imagebridge.providers.codex.wire._payload import (
    _revised_prompt,
    _too_large_image,
)
from imagebridge.providers.codex.wire._request import (
    _choice,
    _codex_headers,
    _data_url,
    _size,
    encode_json_body,
)
from imagebridge.providers.codex.wire._urls import check_backend_url
from imagebridge.providers.codex.wire._usage import TokenUsage


@dataclass(frozen=True, slots=True)
class ImagesRequest:
    """One call to ``/codex/images/generations`` or ``/codex/images/edits``."""

    url: str
    headers: dict[str, str] = field(repr=False)
    body: dict[str, Any] = field(repr=False)

    @property
    def route(self) -> Literal["generations", "edits"]:
        return "edits" if "images" in self.body else "generations"

    def content(self) -> bytes:
        return encode_json_body(self.body)


def build_images_request(
    credentials: CodexCredentials,
    prompt: str,
    *,
    images: Sequence[InputImage] = (),
    background: str = "auto",
    model: str = DEFAULT_IMAGE_MODEL,
    quality: str = "auto",
    size: str = "auto",
    base_url: str = DEFAULT_CODEX_BASE_URL,
    turn_id: str | None = None,
    max_images: int = MAX_IMAGES_API_INPUTS,
) -> ImagesRequest:
    """The request codex 0.169 sends to the images routes.

    Body keys ``prompt, background, model, quality, size`` (+ ``images`` as data URLs for
    an edit, which goes to ``/edits``); headers bearer, account id, ``originator``, JSON
    content type and, when given, ``x-codex-image-turn-id``.
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise BridgeError.invalid_request("The prompt must not be empty.", field="prompt")
    if len(images) > max_images:
        raise BridgeError(
            ErrorCode.INPUT,
            f"The Codex images route accepts at most {max_images} input images.",
            details={"field": "images", "max_images": max_images, "received": len(images)},
        )
    root = check_backend_url(base_url.rstrip("/"), field="base_url")
    body: dict[str, Any] = {
        "prompt": prompt,
        "background": _choice("background", background, ("auto", "opaque", "transparent")),
        "model": str(model),
        "quality": _choice("quality", quality, ("auto", "low", "medium", "high")),
        "size": _size(size),
    }
    if images:
        body["images"] = [{"image_url": _data_url(media, data)} for media, data in images]
    headers = _codex_headers(credentials, accept="application/json")
    if turn_id is not None:
        if _REQUEST_ID_PATTERN.fullmatch(turn_id) is None:
            raise BridgeError(ErrorCode.INTERNAL, "The image turn id is malformed.")
        headers["x-codex-image-turn-id"] = turn_id
    route = "edits" if images else "generations"
    return ImagesRequest(url=f"{root}/images/{route}", headers=headers, body=body)


@dataclass(frozen=True, slots=True)
class ImageResult:
    """One image from the images route: base64 and the revised prompt if any."""

    b64: str = field(repr=False)
    revised_prompt: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ImagesResponse:
    images: tuple[ImageResult, ...]
    usage: TokenUsage | None


def parse_images_response(
    payload: object,
    *,
    max_base64_chars: int = MAX_BASE64_CHARS,
    max_revised_prompt_bytes: int = MAX_REVISED_PROMPT_BYTES,
) -> ImagesResponse:
    """``{"data": [{"b64_json", "revised_prompt"?}], "usage"?}`` → images and usage.

    No image at all is the images-route twin of ``completed_without_image``: ``upstream``,
    retryable. A malformed shape is ``protocol``.
    """
    if not isinstance(payload, Mapping):
        raise BridgeError(ErrorCode.PROTOCOL, "The Codex images response is not a JSON object.")
    data = payload.get("data")
    if not isinstance(data, list):
        raise BridgeError(ErrorCode.PROTOCOL, "The Codex images response has no data list.")
    images: list[ImageResult] = []
    for entry in data:
        if not isinstance(entry, Mapping):
            raise BridgeError(ErrorCode.PROTOCOL, "A Codex images entry is not an object.")
        b64 = entry.get("b64_json")
        if not isinstance(b64, str) or not b64:
            continue
        if len(b64) > max_base64_chars:
            raise _too_large_image(max_base64_chars)
        revised = _revised_prompt(entry, max_revised_prompt_bytes)
        images.append(ImageResult(b64=b64, revised_prompt=revised))
    if not images:
        raise BridgeError(
            ErrorCode.UPSTREAM,
            "The Codex images route answered without an image.",
            retryable=True,
            details={"upstream_code": "completed_without_image", "entries": len(data)},
        )
    return ImagesResponse(images=tuple(images), usage=TokenUsage.parse(payload.get("usage")))
