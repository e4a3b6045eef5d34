"""The Codex backend's wire formats, as pure functions (no I/O, no clock unless passed).

What the ``codex-responses`` and ``codex-images`` providers need to speak to
``chatgpt.com/backend-api``: backend URLs, the Responses request body and headers
(providers.md A2/A3), folding of the Responses SSE events into one result (A5), error
classification for HTTP statuses and in-stream failures (A6, with usage-limit handling),
the dedicated images routes (codex-peer.md §3c) and the ``x-codex-*`` rate-limit headers.

Nothing here ever puts a token, an account id, a prompt or image bytes into an error
message or detail: upstream codes are sanitised and diagnostics are closed sets.
Building a body base64-encodes the input images and decoding a result's base64 is
CPU work proportional to its size: call those from a worker thread for large payloads.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import ipaddress
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_auth import CODEX_LOGIN_SUGGESTION, CodexCredentials
from imagebridge.providers.sse import SseEvent

__all__ = [
    "DEFAULT_CODEX_BASE_URL",
    "DEFAULT_IMAGE_MODEL",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_RESPONSES_ENDPOINT",
    "DEFAULT_RESPONSES_MODEL",
    "INPUT_MEDIA_TYPES",
    "MAX_BASE64_CHARS",
    "MAX_ERROR_BODY_BYTES",
    "MAX_IMAGES_API_INPUTS",
    "MAX_REVISED_PROMPT_BYTES",
    "OFFLOAD_EVENT_CHARS",
    "ORIGINATOR",
    "SUPPORTED_IMAGE_MODELS",
    "CodexBackendUrls",
    "ImageResult",
    "ImagesRequest",
    "ImagesResponse",
    "InputImage",
    "PartialImage",
    "QuotaSnapshot",
    "QuotaWindow",
    "ResponsesResult",
    "ResponsesStreamState",
    "TokenUsage",
    "backend_urls",
    "build_images_request",
    "build_responses_body",
    "build_responses_headers",
    "check_backend_url",
    "check_image_model",
    "classify_http_error",
    "classify_upstream_code",
    "decode_image_base64",
    "derive_usage_url",
    "encode_json_body",
    "parse_images_response",
    "parse_json_body",
    "parse_rate_limit_headers",
    "parse_responses_events",
    "parse_usage_payload",
    "sanitize_upstream_code",
    "stream_failure_error",
    "transport_error",
    "upstream_request_id",
    "wrap_prompt",
]

# -- constants ------------------------------------------------------------------------------

DEFAULT_RESPONSES_ENDPOINT: Final = "https://chatgpt.com/backend-api/codex/responses"
DEFAULT_CODEX_BASE_URL: Final = "https://chatgpt.com/backend-api/codex"
DEFAULT_RESPONSES_MODEL: Final = "gpt-5.5"
DEFAULT_IMAGE_MODEL: Final = "gpt-image-2"
DEFAULT_INSTRUCTIONS: Final = "You are an image generation assistant."
ORIGINATOR: Final = "imagegen-bridge"
SUPPORTED_IMAGE_MODELS: Final = ("gpt-image-2", "gpt-image-1.5", "gpt-image-1", "gpt-image-1-mini")
INPUT_MEDIA_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp"})
MAX_ERROR_BODY_BYTES: Final = 64 * 1024
MAX_BASE64_CHARS: Final = 128 * 1024 * 1024
MAX_REVISED_PROMPT_BYTES: Final = 128 * 1024
MAX_IMAGES_API_INPUTS: Final = 5
OFFLOAD_EVENT_CHARS: Final = 256 * 1024
_MAX_RETRY_AFTER_MS: Final = 31 * 24 * 3600 * 1000
_UPSTREAM_FAILURE: Final = "upstream_failure"
_USAGE_LIMIT_REACHED: Final = "usage_limit_reached"
_LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_SIZE_PATTERN: Final = re.compile(r"auto|[1-9][0-9]{0,4}x[1-9][0-9]{0,4}")
_CODE_DISALLOWED: Final = re.compile(r"[^A-Za-z0-9_-]")
_REQUEST_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_PLAN_TYPE_PATTERN: Final = re.compile(r"[a-z0-9_-]{1,32}")
_WINDOW_NAME_PATTERN: Final = re.compile(r"[a-z0-9_.-]{1,64}")
_REQUEST_ID_HEADERS: Final = ("x-oai-request-id", "x-request-id", "x-codex-imagegen-request-id")

InputImage = tuple[str, bytes]
"""An input image as ``(media_type, bytes)``; media type png, jpeg or webp."""


# -- URLs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CodexBackendUrls:
    """Every route the bridge uses on one Codex backend."""

    responses: str
    images_generations: str
    images_edits: str
    usage: str


def check_backend_url(url: str, *, field: str = "endpoint") -> str:
    """Return ``url`` if it may carry a bearer token: https, or http on a loopback host.

    User info and fragments are refused (a token must never go to a place the user did
    not mean); anything else is a ``configuration`` error naming ``field``.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise _url_error(field, "is not a valid URL") from None
    if parts.scheme not in {"https", "http"} or not host:
        raise _url_error(field, "must be an absolute https URL")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise _url_error(field, "must not contain credentials or a fragment")
    if parts.scheme == "http" and not _is_loopback(host):
        raise _url_error(field, "must use https unless the host is loopback")
    return url


def derive_usage_url(responses_endpoint: str) -> str:
    """``…/backend-api/codex/responses`` → ``…/backend-api/wham/usage`` (same rule as config)."""
    parts = urlsplit(responses_endpoint)
    path = parts.path.rstrip("/")
    for suffix in ("/codex/responses", "/responses"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return urlunsplit((parts.scheme, parts.netloc, f"{path}/wham/usage", "", ""))


def backend_urls(
    responses_endpoint: str = DEFAULT_RESPONSES_ENDPOINT, *, usage_url: str | None = None
) -> CodexBackendUrls:
    """All routes next to a Responses endpoint; ``usage_url`` overrides the derived one."""
    check_backend_url(responses_endpoint, field="endpoint")
    parts = urlsplit(responses_endpoint)
    path = parts.path.rstrip("/")
    codex_root = path[: -len("/responses")] if path.endswith("/responses") else path
    images = urlunsplit((parts.scheme, parts.netloc, f"{codex_root}/images", "", ""))
    usage = usage_url if usage_url is not None else derive_usage_url(responses_endpoint)
    check_backend_url(usage, field="usage_endpoint")
    return CodexBackendUrls(
        responses=responses_endpoint,
        images_generations=f"{images}/generations",
        images_edits=f"{images}/edits",
        usage=usage,
    )


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_error(field: str, problem: str) -> BridgeError:
    return BridgeError(
        ErrorCode.CONFIGURATION, f"The Codex {field} URL {problem}.", details={"field": field}
    )


# -- Responses request ------------------------------------------------------------------------


def wrap_prompt(prompt: str, operation: str, source_count: int, reference_count: int) -> str:
    """The prompt text sent upstream (providers.md A3): references are explained in words."""
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
    """One Responses request body for one output image (providers.md A3).

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
    """Exactly the headers of providers.md A2 (the account id only when known)."""
    headers = {"Authorization": f"Bearer {credentials.access_token}"}
    if credentials.account_id:
        headers["ChatGPT-Account-Id"] = credentials.account_id
    headers["originator"] = ORIGINATOR
    headers["Accept"] = "text/event-stream"
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


# -- images routes ------------------------------------------------------------------------------


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
    """The request codex 0.169 sends to the images routes (codex-peer.md §3c).

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
    headers = {"Authorization": f"Bearer {credentials.access_token}"}
    if credentials.account_id:
        headers["ChatGPT-Account-Id"] = credentials.account_id
    headers["originator"] = ORIGINATOR
    headers["Accept"] = "application/json"
    headers["Content-Type"] = "application/json"
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


def parse_json_body(body: bytes, *, what: str = "response") -> Any:
    """Decode a JSON body or raise ``protocol`` (the body never reaches the message)."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise BridgeError(
            ErrorCode.PROTOCOL, f"The Codex backend sent a {what} that is not valid JSON."
        ) from None


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


# -- usage --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts one call reported; absent counts stay ``None``."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None

    @classmethod
    def parse(cls, raw: object) -> TokenUsage | None:
        if not isinstance(raw, Mapping):
            return None
        values = {
            name: value
            for name in ("input_tokens", "output_tokens", "total_tokens")
            if (value := _count(raw.get(name))) is not None
        }
        return cls(**values) if values else None

    def plus(self, other: TokenUsage | None) -> TokenUsage:
        """Sum with another call's usage (a count known on either side is kept)."""
        if other is None:
            return self

        def add(left: int | None, right: int | None) -> int | None:
            if left is None:
                return right
            return left if right is None else left + right

        return TokenUsage(
            add(self.input_tokens, other.input_tokens),
            add(self.output_tokens, other.output_tokens),
            add(self.total_tokens, other.total_tokens),
        )

    def to_dict(self) -> dict[str, int]:
        """Only the known counts (``{}`` when none, as the original reports it)."""
        return {
            name: value
            for name in ("input_tokens", "output_tokens", "total_tokens")
            if (value := getattr(self, name)) is not None
        }


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        return None
    return value


# -- Responses stream ---------------------------------------------------------------------------

_ITEM_TYPES: Final = frozenset(
    {
        "image_generation_call",
        "message",
        "reasoning",
        "function_call",
        "web_search_call",
        "computer_call",
    }
)
_CONTENT_TYPES: Final = frozenset({"refusal", "output_text"})
_CALL_STATUSES: Final = frozenset({"in_progress", "generating", "completed", "failed"})
_MODERATION_STAGES: Final = frozenset({"input", "output", "unknown"})
_MODERATION_CATEGORIES: Final = frozenset({"harassment", "self-harm", "sexual", "violence"})
_FAILURE_EVENTS: Final = frozenset({"response.failed", "response.incomplete", "error"})


@dataclass(frozen=True, slots=True)
class PartialImage:
    """A progress preview: output ``index``, its ``partial_index`` and the base64 data."""

    index: int
    partial_index: int
    b64: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ResponsesResult:
    """What one successful Responses stream produced."""

    image_b64: str = field(repr=False)
    revised_prompt: str | None = field(repr=False)
    usage: TokenUsage | None
    partial_images: tuple[PartialImage, ...] = field(repr=False)
    output_item_types: frozenset[str]
    image_call_statuses: frozenset[str]
    message_content_types: frozenset[str]


class ResponsesStreamState:
    """Folds Responses SSE events into one result (providers.md A5).

    Feed events with :meth:`handle` (it returns a :class:`PartialImage` to forward as
    progress, or ``None``); at the end of the stream :meth:`finish` returns the result
    or raises the classified :class:`BridgeError`. ``clock`` gives epoch seconds, used to
    turn ``resets_at`` into ``retry_after_ms``; ``secrets`` (the credentials' values) are
    kept out of upstream codes.
    """

    def __init__(
        self,
        *,
        output_index: int = 0,
        max_base64_chars: int = MAX_BASE64_CHARS,
        max_revised_prompt_bytes: int = MAX_REVISED_PROMPT_BYTES,
        clock: Callable[[], float] = time.time,
        secrets: Sequence[str] = (),
    ) -> None:
        self._output_index = output_index
        self._secrets = tuple(secrets)
        self._max_base64_chars = max_base64_chars
        self._max_revised_prompt_bytes = max_revised_prompt_bytes
        self._clock = clock
        self._partials: list[PartialImage] = []
        self._partial_counter = 0
        self._final_b64: str | None = None
        self._revised_prompt: str | None = None
        self._usage: TokenUsage | None = None
        self._completed = False
        self._failure: BridgeError | None = None
        self._item_types: set[str] = set()
        self._call_statuses: set[str] = set()
        self._content_types: set[str] = set()

    @property
    def completed(self) -> bool:
        return self._completed

    @property
    def failure(self) -> BridgeError | None:
        """The first in-stream failure, once one arrived (the stream can stop there)."""
        return self._failure

    @property
    def has_final_image(self) -> bool:
        return self._final_b64 is not None

    @property
    def partial_images(self) -> tuple[PartialImage, ...]:
        return tuple(self._partials)

    def handle(self, event: SseEvent) -> PartialImage | None:
        """Fold one SSE event; its JSON ``type`` decides (the ``event:`` name is ignored)."""
        try:
            payload = json.loads(event.data)
        except (ValueError, RecursionError):
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream sent an event that is not valid JSON.",
                details={"stage": "event"},
            ) from None
        if not isinstance(payload, Mapping):
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream sent an event that is not a JSON object.",
                details={"stage": "event"},
            )
        return self.handle_payload(payload)

    async def ahandle(
        self, event: SseEvent, *, offload_over: int = OFFLOAD_EVENT_CHARS
    ) -> PartialImage | None:
        """:meth:`handle`, parsing events larger than ``offload_over`` in a worker thread.

        Final and partial images arrive as multi-megabyte JSON events; parsing one on the
        event loop would stall every other request for tens of milliseconds.
        """
        if len(event.data) > offload_over:
            return await asyncio.to_thread(self.handle, event)
        return self.handle(event)

    def handle_payload(self, payload: Mapping[str, Any]) -> PartialImage | None:
        kind = payload.get("type")
        if kind == "response.image_generation_call.partial_image":
            return self._on_partial(payload)
        if kind == "response.output_item.done":
            self._scan_item(payload.get("item"))
        elif kind == "response.completed":
            self._on_completed(payload.get("response"))
        elif kind in _FAILURE_EVENTS and self._failure is None:
            self._failure = stream_failure_error(payload, now=self._clock(), secrets=self._secrets)
        return None

    def finish(self) -> ResponsesResult:
        """The result, or the error the finish rules of A5 give for this stream."""
        if self._failure is not None:
            raise self._failure.copy()
        if not self._completed:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream ended before response.completed.",
                details={"stage": "stream"},
            )
        if self._final_b64 is None:
            raise self._no_image_error()
        return ResponsesResult(
            image_b64=self._final_b64,
            revised_prompt=self._revised_prompt,
            usage=self._usage,
            partial_images=tuple(self._partials),
            output_item_types=frozenset(self._item_types),
            image_call_statuses=frozenset(self._call_statuses),
            message_content_types=frozenset(self._content_types),
        )

    # -- internals ---------------------------------------------------------------------

    def _on_partial(self, payload: Mapping[str, Any]) -> PartialImage | None:
        b64 = payload.get("partial_image_b64")
        if not isinstance(b64, str) or not b64:
            b64 = payload.get("partial_image")
        if not isinstance(b64, str) or not b64:
            return None
        if len(b64) > self._max_base64_chars:
            raise _too_large_image(self._max_base64_chars)
        raw_index = payload.get("partial_image_index", payload.get("partialImageIndex"))
        if raw_index is None:
            index = self._partial_counter
        elif isinstance(raw_index, int) and not isinstance(raw_index, bool):
            index = raw_index
        else:
            index = -1
        if not 0 <= index <= 255:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream sent a partial image index out of range.",
                details={"stage": "event"},
            )
        self._partial_counter = index + 1
        partial = PartialImage(index=self._output_index, partial_index=index, b64=b64)
        self._partials.append(partial)
        return partial

    def _on_completed(self, response: object) -> None:
        self._completed = True
        if not isinstance(response, Mapping):
            return
        output = response.get("output")
        if isinstance(output, list):
            for item in output:
                self._scan_item(item)
        usage = TokenUsage.parse(response.get("usage"))
        if usage is not None:
            self._usage = usage

    def _scan_item(self, item: object) -> None:
        if not isinstance(item, Mapping):
            self._item_types.add("missing")
            return
        kind = item.get("type")
        if not isinstance(kind, str):
            self._item_types.add("missing")
            return
        self._item_types.add(kind if kind in _ITEM_TYPES else "other")
        if kind == "message":
            self._scan_message(item.get("content"))
        elif kind == "image_generation_call":
            self._scan_image_call(item)

    def _scan_message(self, content: object) -> None:
        if not isinstance(content, list):
            return
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if not isinstance(kind, str):
                self._content_types.add("missing")
            else:
                self._content_types.add(kind if kind in _CONTENT_TYPES else "other")

    def _scan_image_call(self, item: Mapping[str, Any]) -> None:
        status = item.get("status")
        if not isinstance(status, str):
            self._call_statuses.add("missing")
        else:
            self._call_statuses.add(status if status in _CALL_STATUSES else "other")
        result = item.get("result")
        if not isinstance(result, str) or not result:
            return
        if len(result) > self._max_base64_chars:
            raise _too_large_image(self._max_base64_chars)
        if self._final_b64 is not None and self._final_b64 != result:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex stream sent multiple final images for one output.",
                details={"stage": "event"},
            )
        self._final_b64 = result
        revised = _revised_prompt(item, self._max_revised_prompt_bytes)
        if revised:
            self._revised_prompt = revised

    def _no_image_error(self) -> BridgeError:
        diagnostics = {
            "output_item_types": sorted(self._item_types),
            "message_content_types": sorted(self._content_types),
            "image_call_statuses": sorted(self._call_statuses),
        }
        if "refusal" in self._content_types:
            return BridgeError.safety_rejected(
                "The Codex model refused to generate the image.",
                upstream_code="completed_with_refusal",
                **diagnostics,
            )
        if "failed" in self._call_statuses:
            return BridgeError(
                ErrorCode.UPSTREAM,
                "The Codex image generation call failed.",
                retryable=True,
                details={"upstream_code": "image_call_failed", **diagnostics},
            )
        return BridgeError(
            ErrorCode.UPSTREAM,
            "The Codex response completed without an image.",
            retryable=True,
            details={"upstream_code": "completed_without_image", **diagnostics},
        )


def parse_responses_events(
    events: Iterable[SseEvent],
    *,
    output_index: int = 0,
    max_base64_chars: int = MAX_BASE64_CHARS,
    clock: Callable[[], float] = time.time,
    secrets: Sequence[str] = (),
) -> ResponsesResult:
    """Fold a whole event sequence (partial images are in the result)."""
    state = ResponsesStreamState(
        output_index=output_index, max_base64_chars=max_base64_chars, clock=clock, secrets=secrets
    )
    for event in events:
        state.handle(event)
    return state.finish()


def _revised_prompt(item: Mapping[str, Any], max_bytes: int) -> str | None:
    value = item.get("revised_prompt", item.get("revisedPrompt"))
    if not isinstance(value, str) or not value:
        return None
    if len(value) > max_bytes or len(value.encode("utf-8", "replace")) > max_bytes:
        return None
    return value


def _too_large_image(limit: int) -> BridgeError:
    return BridgeError(
        ErrorCode.PROTOCOL,
        f"The Codex backend sent an image larger than {limit} base64 characters.",
        details={"limit": "max_base64_chars", "max_base64_chars": limit},
    )


def decode_image_base64(b64: str, *, max_chars: int = MAX_BASE64_CHARS) -> bytes:
    """Strict standard-alphabet base64 (surrounding whitespace trimmed) → bytes, or ``protocol``."""
    text = b64.strip()
    if len(text) > max_chars:
        raise _too_large_image(max_chars)
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BridgeError(
            ErrorCode.PROTOCOL, "The Codex backend sent an image that is not valid base64."
        ) from None
    if not data:
        raise BridgeError(ErrorCode.PROTOCOL, "The Codex backend sent an empty image.")
    return data


# -- error classification -----------------------------------------------------------------------


def sanitize_upstream_code(raw: object) -> str:
    """First 64 characters, then only ``[A-Za-z0-9_-]`` kept (ERRATA §16); empty → default."""
    if not isinstance(raw, str):
        return _UPSTREAM_FAILURE
    return _CODE_DISALLOWED.sub("", raw[:64]) or _UPSTREAM_FAILURE


def classify_upstream_code(code: str) -> tuple[ErrorCode, bool]:
    """An upstream failure code → (native code, retryable), first matching rule wins (A6).

    Matching is case-insensitive on substrings, except that ``rate`` and ``token`` must be
    whole words (``failed_to_generate`` is no rate limit, ``max_output_tokens`` no auth
    failure); ``usage_limit`` means an exhausted plan quota, ``not_included`` a plan
    without the feature, and ``content_filter`` a safety stop.
    """
    lowered = code.lower()
    words = set(re.split(r"[_\-\s.]+", lowered))
    if "usage_limit" in lowered or "usage-limit" in lowered:
        return ErrorCode.RATE_LIMITED, True
    if "auth" in lowered or "token" in words:
        return ErrorCode.AUTHENTICATION, False
    if any(word in lowered for word in ("permission", "entitlement", "forbidden", "not_included")):
        return ErrorCode.PERMISSION_DENIED, False
    if any(
        word in lowered for word in ("safety", "content_policy", "moderation", "content_filter")
    ):
        return ErrorCode.SAFETY_REJECTED, False
    if "rate" in words or "ratelimit" in lowered or "quota" in lowered or "too_many" in lowered:
        return ErrorCode.RATE_LIMITED, True
    if any(word in lowered for word in ("unsupported", "capability", "invalid_model")):
        return ErrorCode.UNSUPPORTED_CAPABILITY, False
    if "schema" in lowered or "protocol" in lowered:
        return ErrorCode.PROTOCOL, False
    if any(word in lowered for word in ("unavailable", "overloaded", "server_error")):
        return ErrorCode.UPSTREAM, True
    return ErrorCode.UPSTREAM, False


def stream_failure_error(
    payload: Mapping[str, Any], *, now: float | None = None, secrets: Sequence[str] = ()
) -> BridgeError:
    """A ``response.failed`` / ``response.incomplete`` / ``error`` event → :class:`BridgeError`.

    The code is ``error.code``, ``response.error.code`` or the top-level ``code`` (A5);
    when none is given, the error object's ``type`` (where the backend puts
    ``usage_limit_reached``) or an incomplete response's reason; else ``upstream_failure``.
    """
    kind = str(payload.get("type", "error"))[:64]
    response = payload.get("response")
    response_map: Mapping[str, Any] = response if isinstance(response, Mapping) else {}
    error_obj = _first_mapping(payload.get("error"), response_map.get("error"))
    error_type = error_obj.get("type")
    raw_code = _first_text(
        error_obj.get("code"),
        payload.get("code"),
        error_type if error_type != "error" else None,
        _incomplete_reason(response_map) if kind == "response.incomplete" else None,
    )
    upstream_code = _safe_code(raw_code, secrets) or _UPSTREAM_FAILURE
    return _coded_error(
        upstream_code,
        error_obj,
        {},
        now=time.time() if now is None else now,
        where="in-stream",
        details={"upstream_code": upstream_code, "event_type": kind},
    )


def classify_http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes = b"",
    now: float | None = None,
    *,
    secrets: Sequence[str] = (),
    max_body_bytes: int = MAX_ERROR_BODY_BYTES,
) -> BridgeError:
    """A non-2xx answer → :class:`BridgeError` (A6, plus usage-limit handling).

    401 ``authentication`` · 403 ``permission_denied`` · 408 ``timeout`` · 413 ``input`` ·
    429 ``rate_limited`` (retryable) · 5xx ``upstream`` (retryable) · other statuses by the
    body's error code, else ``upstream``. A usage-limit answer (``usage_limit_reached``) is
    ``rate_limited`` with ``details.quota_exhausted = true``. ``retry_after_ms`` comes from
    the body's ``resets_at`` (epoch seconds), ``resets_in_seconds``, or ``Retry-After``.
    Only the first ``max_body_bytes`` (64 KiB) of ``body`` are looked at, and nothing
    from it but a sanitised code reaches the error; a code that echoes one of ``secrets``
    (pass :meth:`CodexCredentials.secret_values`) becomes ``redacted``.
    """
    clock = time.time() if now is None else now
    lowered = {str(key).lower(): str(value) for key, value in headers.items()}
    error_obj, raw_code = _error_body(body[:max_body_bytes])
    upstream_code = _safe_code(raw_code, secrets)
    details: dict[str, Any] = {"http_status": status}
    if upstream_code is not None:
        details["upstream_code"] = upstream_code
    request_id = _request_id(lowered)
    usage_limit = upstream_code is not None and _USAGE_LIMIT_REACHED in upstream_code.lower()
    if status == 401:
        error = BridgeError(
            ErrorCode.AUTHENTICATION,
            "The Codex backend rejected the ChatGPT login (HTTP 401).",
            details=details,
            suggestions=(CODEX_LOGIN_SUGGESTION,),
        )
    elif status == 403 and not usage_limit:
        error = BridgeError(
            ErrorCode.PERMISSION_DENIED,
            "The Codex backend refused this account (HTTP 403).",
            details=details,
        )
    elif status == 408:
        error = BridgeError(
            ErrorCode.TIMEOUT, "The Codex backend timed out (HTTP 408).", details=details
        )
    elif status == 413:
        error = BridgeError(
            ErrorCode.INPUT,
            "The request is too large for the Codex backend (HTTP 413).",
            details=details,
        )
    elif status == 429 or usage_limit:
        error = _rate_limited(
            f"HTTP {status}", usage_limit, error_obj, lowered, now=clock, details=details
        )
    elif 500 <= status <= 599:
        error = BridgeError(
            ErrorCode.UPSTREAM,
            f"The Codex backend failed (HTTP {status}).",
            retryable=True,
            details=details,
        )
    elif upstream_code is not None:
        error = _coded_error(
            upstream_code, error_obj, lowered, now=clock, where=f"HTTP {status}", details=details
        )
    else:
        error = BridgeError(
            ErrorCode.UPSTREAM,
            f"The Codex backend rejected the request (HTTP {status}).",
            details=details,
        )
    error.upstream_request_id = request_id
    return error


def transport_error(exc: BaseException, *, timed_out: bool | None = None) -> BridgeError:
    """A transport failure → :class:`BridgeError`; after dispatch the outcome is unknown.

    Connection failures (nothing was sent) stay retryable ``upstream``. Anything later —
    a read failure, a stall, a broken stream — may have generated and billed an image, so
    it is never retried (``outcome=unknown``). ``timeout`` if it timed out, else
    ``upstream``. The exception text is not kept (it may echo a URL or header).
    """
    if isinstance(exc, BridgeError):
        return exc
    if timed_out is None:
        is_timeout = isinstance(exc, httpx.TimeoutException | TimeoutError)
    else:
        is_timeout = timed_out
    kind = type(exc).__name__[:64]
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        code = ErrorCode.TIMEOUT if is_timeout else ErrorCode.UPSTREAM
        return BridgeError(
            code,
            "Could not connect to the Codex backend.",
            retryable=not is_timeout,
            details={"transport_error": kind, "stage": "connect"},
        )
    error = BridgeError(
        ErrorCode.TIMEOUT if is_timeout else ErrorCode.UPSTREAM,
        "The Codex backend timed out mid-request; the image may have been generated."
        if is_timeout
        else "The connection to the Codex backend failed mid-request; "
        "the image may have been generated.",
        details={"transport_error": kind, "stage": "stream"},
    )
    return error.mark_unknown_outcome()


def _coded_error(
    upstream_code: str,
    error_obj: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    now: float,
    where: str,
    details: dict[str, Any],
) -> BridgeError:
    code, retryable = classify_upstream_code(upstream_code)
    if code is ErrorCode.RATE_LIMITED:
        quota = "usage_limit" in upstream_code.lower()
        return _rate_limited(where, quota, error_obj, headers, now=now, details=details)
    if code is ErrorCode.SAFETY_REJECTED:
        return BridgeError.safety_rejected(
            f"The Codex backend rejected the request under its content policy ({where}).",
            **details,
            **_moderation_details(error_obj),
        )
    suggestions = (CODEX_LOGIN_SUGGESTION,) if code is ErrorCode.AUTHENTICATION else None
    return BridgeError(
        code,
        f"The Codex backend reported a failure ({where}): {upstream_code}.",
        retryable=retryable,
        details=details,
        suggestions=suggestions,
    )


def _rate_limited(
    where: str,
    quota_exhausted: bool,
    error_obj: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    now: float,
    details: dict[str, Any],
) -> BridgeError:
    resets_at = _epoch_seconds(error_obj.get("resets_at"))
    retry_after_ms: int | None = None
    if resets_at is not None:
        retry_after_ms = _clamp_ms((resets_at - now) * 1000)
    else:
        seconds = _number(error_obj.get("resets_in_seconds"))
        if seconds is not None:
            retry_after_ms = _clamp_ms(seconds * 1000)
            resets_at = int(now + seconds)
        else:
            retry_after_ms = _retry_after_header(headers, now)
    merged = dict(details)
    if quota_exhausted:
        merged["quota_exhausted"] = True
    if retry_after_ms is not None:
        merged["retry_after_ms"] = retry_after_ms
    if resets_at is not None:
        merged["resets_at"] = int(resets_at)
    message = (
        f"The ChatGPT plan's Codex usage limit is reached ({where})."
        if quota_exhausted
        else f"The Codex backend is rate limiting requests ({where})."
    )
    return BridgeError(ErrorCode.RATE_LIMITED, message, retryable=True, details=merged)


def _moderation_details(error_obj: Mapping[str, Any]) -> dict[str, Any]:
    raw = error_obj.get("moderation_details", error_obj.get("moderationDetails"))
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, Any] = {}
    stage = raw.get("stage", raw.get("moderation_stage"))
    if isinstance(stage, str) and stage.lower() in _MODERATION_STAGES:
        out["moderation_stage"] = stage.lower()
    categories = raw.get("categories", raw.get("moderation_categories"))
    names: list[str] = []
    if isinstance(categories, Mapping):
        categories = [key for key, flagged in categories.items() if flagged is True]
    if isinstance(categories, list):
        for entry in categories:
            name = entry.get("category") if isinstance(entry, Mapping) else entry
            if not isinstance(name, str):
                continue
            normalised = name.lower().replace("_", "-")
            if normalised in _MODERATION_CATEGORIES and normalised not in names:
                names.append(normalised)
    if names:
        out["moderation_categories"] = sorted(names)[:8]
    return out


def _error_body(body: bytes) -> tuple[Mapping[str, Any], str | None]:
    """The error object of a JSON error body and its code (``code``, else ``type``)."""
    try:
        payload = json.loads(body) if body else None
    except (ValueError, RecursionError):
        payload = None
    if not isinstance(payload, Mapping):
        return {}, None
    inner = payload.get("error")
    if isinstance(inner, Mapping):
        return inner, _first_text(inner.get("code"), inner.get("type"), payload.get("code"))
    return payload, _first_text(payload.get("code"), payload.get("type"))


def _safe_code(raw: str | None, secrets: Sequence[str]) -> str | None:
    """The sanitised code, or ``redacted`` when it carries (part of) a credential."""
    if not raw:
        return None
    code = sanitize_upstream_code(raw)
    for secret in secrets:
        if not secret:
            continue
        if secret in raw or (len(code) >= 8 and code in _CODE_DISALLOWED.sub("", secret)):
            return "redacted"
    return code


def _first_mapping(*candidates: object) -> Mapping[str, Any]:
    for candidate in candidates:
        if isinstance(candidate, Mapping):
            return candidate
    return {}


def _first_text(*candidates: object) -> str | None:
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate
    return None


def _incomplete_reason(response: Mapping[str, Any]) -> str | None:
    details = response.get("incomplete_details")
    if isinstance(details, Mapping) and isinstance(details.get("reason"), str):
        return str(details["reason"])
    return None


def upstream_request_id(headers: Mapping[str, str]) -> str | None:
    """The backend's request id from an answer's headers, if it has a safe shape."""
    lowered = {str(key).lower(): str(value) for key, value in headers.items()}
    return _request_id(lowered)


def _request_id(headers: Mapping[str, str]) -> str | None:
    for name in _REQUEST_ID_HEADERS:
        value = headers.get(name, "").strip()
        if value and _REQUEST_ID_PATTERN.fullmatch(value):
            return value
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _epoch_seconds(value: object) -> float | None:
    """Epoch seconds from a number or an ISO-8601 string; ``None`` if unusable."""
    number = _number(value)
    if number is not None:
        return number
    if isinstance(value, str) and 0 < len(value) <= 64:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            return None
        return moment.timestamp()
    return None


def _retry_after_header(headers: Mapping[str, str], now: float) -> int | None:
    raw = headers.get("retry-after-ms", "").strip()
    if raw.isdigit() and len(raw) <= 12:
        return _clamp_ms(int(raw))
    raw = headers.get("retry-after", "").strip()
    if not raw or len(raw) > 64:
        return None
    if raw.isdigit():
        return _clamp_ms(int(raw) * 1000)
    try:
        moment = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return _clamp_ms((moment.timestamp() - now) * 1000)


def _clamp_ms(value: float) -> int:
    return int(min(max(math.ceil(value), 0), _MAX_RETRY_AFTER_MS))


# -- rate-limit snapshots -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """One usage window: how full it is, how long it is, when it resets (epoch seconds)."""

    name: str
    used_percent: float
    window_minutes: int | None = None
    resets_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "used_percent": self.used_percent,
            "window_minutes": self.window_minutes,
            "resets_at": self.resets_at,
        }


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    """The plan's usage windows at one moment. Never holds account ids or emails."""

    windows: tuple[QuotaWindow, ...]
    plan_type: str | None = None
    limit_reached: bool | None = None
    source: Literal["usage_endpoint", "headers"] = "usage_endpoint"
    observed_at: float = 0.0

    def window(self, name: str) -> QuotaWindow | None:
        return next((window for window in self.windows if window.name == name), None)

    @property
    def exhausted(self) -> bool:
        """The backend says the limit is reached, or a window is full."""
        return self.limit_reached is True or any(w.used_percent >= 100 for w in self.windows)

    def merged_with(self, newer: QuotaSnapshot) -> QuotaSnapshot:
        """``newer``'s windows and fields over this snapshot's (by window name)."""
        names = {window.name for window in newer.windows}
        kept = tuple(window for window in self.windows if window.name not in names)
        return QuotaSnapshot(
            windows=tuple(sorted((*kept, *newer.windows), key=_window_order)),
            plan_type=newer.plan_type if newer.plan_type is not None else self.plan_type,
            limit_reached=(
                newer.limit_reached if newer.limit_reached is not None else self.limit_reached
            ),
            source=newer.source,
            observed_at=max(self.observed_at, newer.observed_at),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_type": self.plan_type,
            "limit_reached": self.limit_reached,
            "exhausted": self.exhausted,
            "source": self.source,
            "observed_at": self.observed_at,
            "windows": [window.to_dict() for window in self.windows],
        }


def _window_order(window: QuotaWindow) -> tuple[int, str]:
    rank = {"primary": 0, "secondary": 1}.get(window.name, 2)
    return rank, window.name


_HEADER_LIMITS: Final = (("x-codex-", ""), ("x-image-gen-", "image_gen."))
_MAX_WINDOWS: Final = 16


def parse_rate_limit_headers(
    headers: Mapping[str, str], *, now: float | None = None
) -> QuotaSnapshot | None:
    """``x-codex-{primary,secondary}-*`` (and ``x-image-gen-*``) headers → snapshot, if any."""
    clock = time.time() if now is None else now
    lowered = {str(key).lower(): str(value) for key, value in headers.items()}
    windows: list[QuotaWindow] = []
    for prefix, name_prefix in _HEADER_LIMITS:
        for which in ("primary", "secondary"):
            base = f"{prefix}{which}-"
            used = _header_number(lowered.get(f"{base}used-percent"))
            if used is None:
                continue
            minutes = _header_number(lowered.get(f"{base}window-minutes"))
            resets_at = _header_number(lowered.get(f"{base}reset-at"))
            if resets_at is None:
                after = _header_number(lowered.get(f"{base}reset-after-seconds"))
                resets_at = None if after is None else clock + after
            windows.append(
                QuotaWindow(
                    name=f"{name_prefix}{which}",
                    used_percent=_percent(used),
                    window_minutes=None if minutes is None else int(minutes),
                    resets_at=None if resets_at is None else int(resets_at),
                )
            )
    if not windows:
        return None
    return QuotaSnapshot(
        windows=tuple(windows),
        plan_type=_plan_type(lowered.get("x-codex-plan-type")),
        source="headers",
        observed_at=clock,
    )


def parse_usage_payload(payload: object, *, now: float | None = None) -> QuotaSnapshot:
    """A ``GET wham/usage`` body → snapshot; only whitelisted, non-identifying fields are read."""
    clock = time.time() if now is None else now
    if not isinstance(payload, Mapping):
        raise BridgeError(ErrorCode.PROTOCOL, "The Codex usage response is not a JSON object.")
    windows: list[QuotaWindow] = []
    rate_limit = payload.get("rate_limit")
    limit_reached: bool | None = None
    if isinstance(rate_limit, Mapping):
        windows.extend(_usage_windows(rate_limit, "", clock))
        if isinstance(rate_limit.get("limit_reached"), bool):
            limit_reached = bool(rate_limit["limit_reached"])
    extra = payload.get("additional_rate_limits")
    if isinstance(extra, list):
        for entry in extra[:_MAX_WINDOWS]:
            if not isinstance(entry, Mapping):
                continue
            name = entry.get("limit_name", entry.get("metered_feature"))
            inner = entry.get("rate_limit")
            if (
                isinstance(name, str)
                and isinstance(inner, Mapping)
                and _WINDOW_NAME_PATTERN.fullmatch(name.lower())
            ):
                windows.extend(_usage_windows(inner, f"{name.lower()}.", clock))
    return QuotaSnapshot(
        windows=tuple(windows[:_MAX_WINDOWS]),
        plan_type=_plan_type(payload.get("plan_type")),
        limit_reached=limit_reached,
        source="usage_endpoint",
        observed_at=clock,
    )


def _usage_windows(rate_limit: Mapping[str, Any], prefix: str, now: float) -> list[QuotaWindow]:
    windows: list[QuotaWindow] = []
    for which in ("primary", "secondary"):
        raw = rate_limit.get(f"{which}_window")
        if not isinstance(raw, Mapping):
            continue
        used = _number(raw.get("used_percent"))
        if used is None:
            continue
        seconds = _number(raw.get("limit_window_seconds"))
        resets_at = _number(raw.get("reset_at"))
        if resets_at is None:
            after = _number(raw.get("reset_after_seconds"))
            resets_at = None if after is None else now + after
        windows.append(
            QuotaWindow(
                name=f"{prefix}{which}",
                used_percent=_percent(used),
                window_minutes=None if seconds is None else int(seconds // 60),
                resets_at=None if resets_at is None else int(resets_at),
            )
        )
    return windows


def _header_number(raw: str | None) -> float | None:
    if raw is None or len(raw) > 32:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _percent(value: float) -> float:
    return round(min(max(value, 0.0), 100.0), 3)


def _plan_type(raw: object) -> str | None:
    """A plan name like ``plus`` — only a short lowercase token, so nothing identifying."""
    if not isinstance(raw, str):
        return None
    value = raw.strip().lower()
    return value if _PLAN_TYPE_PATTERN.fullmatch(value) else None
