"""The Responses request: prompt wrapping, body and headers."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import CodexCredentials
from imagebridge.providers.codex.wire._constants import (
    _SIZE_PATTERN,
    DEFAULT_IMAGE_MODEL,
    DEFAULT_INSTRUCTIONS,
    DEFAULT_RESPONSES_MODEL,
    INPUT_MEDIA_TYPES,
    ORIGINATOR,
    SUPPORTED_IMAGE_MODELS,
    InputImage,
)


def wrap_prompt(prompt: str, operation: str, source_count: int, reference_count: int) -> str:
    """The prompt text sent upstream: references are explained in words."""
    if operation == "edit":
        if reference_count == 0:
            return prompt
        return (
            f"Edit the first {source_count} attached source image(s) according to the prompt. "
            f"The following {reference_count} attached image(s) are visual references only. "
            f"Prompt: {prompt}"
        )
    if reference_count == 0:
        return prompt
    return (
        f"Generate an image using the {reference_count} attached image(s) as visual "
        f"references. Prompt: {prompt}"
    )


def build_responses_body(
    prompt: str,
    *,
    operation: str = "generate",
    sources: Sequence[InputImage] = (),
    references: Sequence[InputImage] = (),
    image_model: str = DEFAULT_IMAGE_MODEL,
    responses_model: str = DEFAULT_RESPONSES_MODEL,
    size: str | None = None,
    quality: str | None = None,
    output_format: str = "png",
    background: str | None = None,
    moderation: str | None = None,
    output_compression: int | None = None,
    partial_images: int = 0,
    input_fidelity: str | None = None,
    action: str | None = None,
    instructions: str = DEFAULT_INSTRUCTIONS,
) -> dict[str, Any]:
    """One Responses request body for one output image.

    Optional tool keys are omitted at their defaults; ``input_fidelity`` is sent only for
    image models other than ``gpt-image-2``. Values may be plain strings or contract enums.
    """
    operation = _choice("operation", operation, ("generate", "edit"))
    if not isinstance(prompt, str) or not prompt.strip():
        raise BridgeError.invalid_request("The prompt must not be empty.", field="prompt")
    if operation == "generate" and sources:
        raise BridgeError.invalid_request(
            "A generate request takes no source images.", field="images"
        )
    check_image_model(image_model)
    tool: dict[str, Any] = {
        "type": "image_generation",
        "model": str(image_model),
        "size": _size(size),
    }
    if (value := _optional_choice("quality", quality, ("low", "medium", "high"))) is not None:
        tool["quality"] = value
    tool["output_format"] = _choice("output_format", output_format, ("png", "jpeg", "webp"))
    if (value := _optional_choice("background", background, ("opaque", "transparent"))) is not None:
        tool["background"] = value
    if (value := _optional_choice("moderation", moderation, ("low",))) is not None:
        tool["moderation"] = value
    if (value := _optional_choice("action", action, ("generate", "edit"))) is not None:
        tool["action"] = value
    if output_compression is not None:
        tool["output_compression"] = _bounded_int("output_compression", output_compression, 0, 100)
    if _bounded_int("partial_images", partial_images, 0, 3) > 0:
        tool["partial_images"] = int(partial_images)
    fidelity = _optional_choice("input_fidelity", input_fidelity, ("low", "high"), auto=False)
    if fidelity is not None and str(image_model) != "gpt-image-2":
        tool["input_fidelity"] = fidelity
    content: list[dict[str, Any]] = [
        {
            "type": "input_text",
            "text": wrap_prompt(prompt, operation, len(sources), len(references)),
        }
    ]
    for media_type, data in [*sources, *references]:
        content.append(
            {"type": "input_image", "image_url": _data_url(media_type, data), "detail": "auto"}
        )
    return {
        "model": str(responses_model),
        "instructions": instructions,
        "input": [{"type": "message", "role": "user", "content": content}],
        "tools": [tool],
        "tool_choice": {"type": "image_generation"},
        "stream": True,
        "store": False,
    }


def build_responses_headers(credentials: CodexCredentials) -> dict[str, str]:
    """Exactly the original's headers (the account id only when known)."""
    return _codex_headers(credentials, accept="text/event-stream")


def _codex_headers(credentials: CodexCredentials, *, accept: str) -> dict[str, str]:
    """The login, originator and content headers every Codex backend route takes, as codex
    sends them (the account id only when known)."""
    headers = {"Authorization": f"Bearer {credentials.access_token}"}
    if credentials.account_id:
        headers["ChatGPT-Account-Id"] = credentials.account_id
    headers["originator"] = ORIGINATOR
    headers["Accept"] = accept
    headers["Content-Type"] = "application/json"
    return headers


def encode_json_body(body: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON, the bytes sent upstream."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def check_image_model(image_model: str) -> str:
    """``unsupported_capability`` for image models the backend is not known to accept."""
    if str(image_model) not in SUPPORTED_IMAGE_MODELS:
        raise BridgeError.unsupported(
            "The requested image model is not supported by the Codex backend.",
            field="routing.model",
            requested_model=str(image_model)[:128],
            supported_models=list(SUPPORTED_IMAGE_MODELS),
        )
    return str(image_model)


def _data_url(media_type: str, data: bytes) -> str:
    media = str(media_type).lower()
    if media not in INPUT_MEDIA_TYPES:
        raise BridgeError(
            ErrorCode.INPUT,
            "Input images must be PNG, JPEG or WebP.",
            details={"media_type": media[:64], "supported": sorted(INPUT_MEDIA_TYPES)},
        )
    if not data:
        raise BridgeError(ErrorCode.INPUT, "An input image is empty.")
    return f"data:{media};base64,{base64.b64encode(data).decode('ascii')}"


def _choice(name: str, value: object, allowed: Sequence[str]) -> str:
    text = str(value)
    if text not in allowed:
        raise BridgeError.invalid_request(
            f"{name} must be one of {', '.join(allowed)}.", field=name, allowed=list(allowed)
        )
    return text


def _optional_choice(
    name: str, value: object, allowed: Sequence[str], *, auto: bool = True
) -> str | None:
    """``None`` (and ``auto`` when ``auto`` is the default) means: omit the key."""
    if value is None or (auto and str(value) == "auto"):
        return None
    return _choice(name, value, allowed)


def _bounded_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BridgeError.invalid_request(
            f"{name} must be an integer from {low} to {high}.", field=name
        )
    return value


def _size(size: str | None) -> str:
    text = "auto" if size is None else str(size)
    if _SIZE_PATTERN.fullmatch(text) is None:
        raise BridgeError.invalid_request("size must be `auto` or WIDTHxHEIGHT.", field="size")
    return text
