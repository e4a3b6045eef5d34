"""One API call described as data, shared by the sync and async clients.

Resources build a :class:`RequestSpec` (method, path, body, how to read the answer) with
the helpers below; the two transports in :mod:`._base_client` send it, bound the answer,
retry when the rules allow, and hand the raw answer to ``spec.parse``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from imagebridge.client._constants import IDEMPOTENCY_HEADER, REQUEST_ID_HEADER
from imagebridge.client._exceptions import BridgeAPIError, protocol_error
from imagebridge.contract.errors import ErrorCode

__all__ = [
    "FileField",
    "RawResponse",
    "RequestSpec",
    "auto_idempotency_key",
    "check_idempotency_key",
    "model_parser",
    "no_content",
    "path_segment",
]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

FileField = tuple[str, tuple[str, bytes, str]]
"""A multipart file part: ``(field name, (filename, bytes, content type))``."""

_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9\-_.:]{1,128}$")
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "PATCH"})
MAX_SEGMENT_BYTES = 1024


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A complete, size-bounded answer."""

    status_code: int
    headers: httpx.Headers
    content: bytes


@dataclass(slots=True)
class RequestSpec(Generic[T]):
    method: str
    path: str
    parse: Callable[[RawResponse], T]
    params: Mapping[str, str] | None = None
    json_body: bytes | None = None
    form: Mapping[str, str] | None = None
    files: Sequence[FileField] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    expected: frozenset[int] = frozenset({200})
    auto_idempotency: bool = False
    """Add a generated ``Idempotency-Key`` when retries are on and the caller gave none."""
    body_has_idempotency_key: bool = False
    request_id: str | None = None
    timeout: httpx.Timeout | None = None
    min_read_timeout: float | None = None
    """The read timeout is raised to this (a request's own deadline plus a margin)."""

    @property
    def safe(self) -> bool:
        """No side effects: sending it twice is the same as sending it once."""
        return self.method in _SAFE_METHODS

    @property
    def repeatable(self) -> bool:
        """Safe to send again after a failure the bridge calls retryable."""
        return (
            self.method in _IDEMPOTENT_METHODS
            or any(name.lower() == IDEMPOTENCY_HEADER.lower() for name in self.headers)
            or self.body_has_idempotency_key
        )

    def prepare_headers(self, retries_enabled: bool) -> None:
        """Request id and idempotency headers, checked before anything is sent."""
        if self.request_id is not None:
            if not _REQUEST_ID_RE.fullmatch(self.request_id):
                raise BridgeAPIError(
                    ErrorCode.INVALID_REQUEST,
                    "request_id must be 1 to 128 characters of A-Z a-z 0-9 - _ . :",
                    details={"field": "request_id"},
                )
            self.headers[REQUEST_ID_HEADER] = self.request_id
        has_key = any(name.lower() == IDEMPOTENCY_HEADER.lower() for name in self.headers)
        if (
            self.auto_idempotency
            and retries_enabled
            and not has_key
            and not self.body_has_idempotency_key
        ):
            self.headers[IDEMPOTENCY_HEADER] = auto_idempotency_key()


def auto_idempotency_key() -> str:
    """A fresh key for one logical call, reused by all of its retries."""
    return f"imagebridge-sdk-{uuid.uuid4()}"


def check_idempotency_key(value: str) -> str:
    """The bridge's header rule (1–512 visible ASCII characters), checked locally."""
    if not 1 <= len(value) <= 512 or any(not "!" <= char <= "~" for char in value):
        raise BridgeAPIError(
            ErrorCode.INVALID_REQUEST,
            "idempotency_key must be 1 to 512 visible ASCII characters",
            details={"field": "idempotency_key"},
        )
    return value


def path_segment(value: str, field_name: str) -> str:
    """One URL path segment, percent-encoded; empty or oversized values fail locally."""
    if not isinstance(value, str) or not value or len(value.encode()) > MAX_SEGMENT_BYTES:
        raise BridgeAPIError(
            ErrorCode.INVALID_REQUEST,
            f"{field_name} must be a non-empty string of at most {MAX_SEGMENT_BYTES} bytes",
            details={"field": field_name},
        )
    return quote(value, safe="")


def model_parser(model: type[M], what: str) -> Callable[[RawResponse], M]:
    """Validate a JSON answer with a contract model; a mismatch is a ``protocol`` error."""

    def parse(raw: RawResponse) -> M:
        try:
            return model.model_validate_json(raw.content)
        except (ValidationError, ValueError):
            raise protocol_error(
                f"the bridge sent a malformed {what}",
                status_code=raw.status_code,
                headers=raw.headers,
            ) from None

    return parse


def no_content(raw: RawResponse) -> None:
    del raw
