"""Constants of the Codex backend wire formats: defaults, limits and patterns."""

from __future__ import annotations

import re
from typing import Final

DEFAULT_RESPONSES_ENDPOINT: Final = "https://chatgpt.com/backend-api/codex/responses"
DEFAULT_CODEX_BASE_URL: Final = "https://chatgpt.com/backend-api/codex"
DEFAULT_RESPONSES_MODEL: Final = "gpt-5.5"
DEFAULT_RESPONSES_MODEL_FALLBACKS: Final = ("gpt-5.4-mini", "gpt-5.4")
"""Carrier models tried, in order, when a plan refuses the preferred one with a 400."""
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
