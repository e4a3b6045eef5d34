"""Turn caller arguments into validated contract models and query strings, locally.

A malformed argument fails before anything is sent, with an ``invalid_request``
:class:`BridgeAPIError` naming the offending fields (never their values).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from imagebridge.client._config import TimeoutTypes, to_timeout
from imagebridge.client._constants import DEADLINE_MARGIN
from imagebridge.client._exceptions import BridgeAPIError
from imagebridge.contract.enums import Operation
from imagebridge.contract.errors import ErrorCode
from imagebridge.contract.request import ImageRequest

__all__ = [
    "RequestLike",
    "call_timeout",
    "deadline_read_timeout",
    "image_request",
    "json_bytes",
    "query",
    "validated",
]

M = TypeVar("M", bound=BaseModel)
RequestLike = ImageRequest | Mapping[str, Any] | str
"""A full request, its JSON-shaped mapping, or just a prompt."""
_MAX_FIELDS_LISTED = 20


def _field_path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path or "$"


def validated(model: type[M], value: M | Mapping[str, Any], what: str) -> M:
    """``value`` as ``model``; a mismatch lists the failing field paths, not values."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        fields = sorted({_field_path(tuple(error["loc"])) for error in exc.errors()})
        raise BridgeAPIError(
            ErrorCode.INVALID_REQUEST,
            f"{what} is not valid",
            details={"fields": fields[:_MAX_FIELDS_LISTED]},
            suggestions=[
                "Compare the listed fields with the v1 contract "
                "(`imagegen-bridge schema` prints its JSON Schema)."
            ],
        ) from None
    except (TypeError, ValueError, RecursionError):
        raise BridgeAPIError(ErrorCode.INVALID_REQUEST, f"{what} is not valid") from None


def image_request(request: RequestLike, operation: Operation, method: str) -> ImageRequest:
    """Build the request a method sends; the operation must match the method."""
    if isinstance(request, str):
        data: ImageRequest | dict[str, Any] = {"operation": operation.value, "prompt": request}
    elif isinstance(request, ImageRequest):
        data = request
    elif isinstance(request, Mapping):
        data = dict(request)
        data.setdefault("operation", operation.value)
    else:
        raise BridgeAPIError(
            ErrorCode.INVALID_REQUEST,
            "request must be an ImageRequest, a mapping or a prompt string",
        )
    model = validated(ImageRequest, data, "request")
    if model.operation is not operation:
        raise BridgeAPIError(
            ErrorCode.INVALID_REQUEST,
            f"{method} sends {operation.value} requests",
            details={"field": "operation"},
        )
    return model


def json_bytes(model: BaseModel) -> bytes:
    """The model in contract form (absent optionals omitted)."""
    return model.model_dump_json().encode()


def deadline_read_timeout(request: ImageRequest) -> float | None:
    """A read timeout that outlasts the request's own deadline, so the bridge answers."""
    if request.timeout_ms is None:
        return None
    return request.timeout_ms / 1000 + DEADLINE_MARGIN


def call_timeout(timeout: TimeoutTypes | None) -> httpx.Timeout | None:
    return None if timeout is None else to_timeout(timeout)


def query(**values: str | int | bool | None) -> dict[str, str]:
    """Query parameters without the ``None`` ones; booleans as ``true``/``false``."""
    params: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            params[key] = "true" if value else "false"
        else:
            params[key] = str(value)
    return params
