"""The Codex backend's wire formats, as pure functions (no I/O, no clock unless passed).

What the ``codex-responses`` and ``codex-images`` providers need to speak to
``chatgpt.com/backend-api``: backend URLs, the Responses request body and headers,
folding of the Responses SSE events into one result, error
classification for HTTP statuses and in-stream failures (with usage-limit handling),
the dedicated images routes and the ``x-codex-*`` rate-limit headers.

Nothing here ever puts a token, an account id, a prompt or image bytes into an error
message or detail: upstream codes are sanitised and diagnostics are closed sets.
Building a body base64-encodes the input images and decoding a result's base64 is
CPU work proportional to its size: call those from a worker thread for large payloads.

Layout (private modules, re-exported here): ``_constants`` defaults and limits, ``_urls``
where a token may go, ``_request`` the Responses body and headers, ``_images`` the images
routes, ``_stream`` the SSE fold, ``_errors`` classification, ``_payload`` checked reads of
answers, ``_usage`` token counts, ``_quota`` plan windows.
"""

from __future__ import annotations

from imagebridge.providers.codex.wire._constants import (
    DEFAULT_CODEX_BASE_URL,
    DEFAULT_IMAGE_MODEL,
    DEFAULT_INSTRUCTIONS,
    DEFAULT_RESPONSES_ENDPOINT,
    DEFAULT_RESPONSES_MODEL,
    DEFAULT_RESPONSES_MODEL_FALLBACKS,
    INPUT_MEDIA_TYPES,
    MAX_BASE64_CHARS,
    MAX_ERROR_BODY_BYTES,
    MAX_IMAGES_API_INPUTS,
    MAX_REVISED_PROMPT_BYTES,
    OFFLOAD_EVENT_CHARS,
    ORIGINATOR,
    SUPPORTED_IMAGE_MODELS,
    InputImage,
)
from imagebridge.providers.codex.wire._errors import (
    classify_http_error,
    classify_upstream_code,
    is_plan_model_refusal,
    sanitize_upstream_code,
    stream_failure_error,
    transport_error,
    upstream_request_id,
)
from imagebridge.providers.codex.wire._images import (
    ImageResult,
    ImagesRequest,
    ImagesResponse,
    build_images_request,
    parse_images_response,
)
from imagebridge.providers.codex.wire._payload import (
    decode_image_base64,
    parse_json_body,
)
from imagebridge.providers.codex.wire._quota import (
    IMAGE_LIMIT,
    QuotaSnapshot,
    QuotaWindow,
    parse_rate_limit_headers,
    parse_usage_payload,
)
from imagebridge.providers.codex.wire._request import (
    build_responses_body,
    build_responses_headers,
    check_image_model,
    encode_json_body,
    wrap_prompt,
)
from imagebridge.providers.codex.wire._stream import (
    CodexPartialImage,
    ResponsesResult,
    ResponsesStreamState,
    parse_responses_events,
)
from imagebridge.providers.codex.wire._urls import (
    CodexBackendUrls,
    backend_urls,
    check_backend_url,
    derive_usage_url,
)
from imagebridge.providers.codex.wire._usage import TokenUsage

__all__ = [
    "DEFAULT_CODEX_BASE_URL",
    "DEFAULT_IMAGE_MODEL",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_RESPONSES_ENDPOINT",
    "DEFAULT_RESPONSES_MODEL",
    "DEFAULT_RESPONSES_MODEL_FALLBACKS",
    "IMAGE_LIMIT",
    "INPUT_MEDIA_TYPES",
    "MAX_BASE64_CHARS",
    "MAX_ERROR_BODY_BYTES",
    "MAX_IMAGES_API_INPUTS",
    "MAX_REVISED_PROMPT_BYTES",
    "OFFLOAD_EVENT_CHARS",
    "ORIGINATOR",
    "SUPPORTED_IMAGE_MODELS",
    "CodexBackendUrls",
    "CodexPartialImage",
    "ImageResult",
    "ImagesRequest",
    "ImagesResponse",
    "InputImage",
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
    "is_plan_model_refusal",
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
