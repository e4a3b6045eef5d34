"""HTTP routes, one small module per area; :func:`protected_router` adds the access check."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from imagebridge.server.context import request_context
from imagebridge.server.state import bridge_state

__all__ = ["json_response", "protected_router", "public_router", "require_access"]

bridge_bearer = HTTPBearer(
    scheme_name="bridgeBearer",
    auto_error=False,
    description="Optional bridge token, separate from provider OAuth.",
)


async def require_access(
    request: Request,
    _documented: HTTPAuthorizationCredentials | None = Security(bridge_bearer),  # noqa: B008
) -> None:
    """Browser-origin guard, then the exact bearer check; records the caller's scope.

    ``_documented`` only declares the scheme in OpenAPI: the header is checked here,
    exactly (``Bearer`` with that case and one space), not by FastAPI's lenient parser.
    """
    state = bridge_state(request)
    request_context(request).owner = state.access.authorize(request.scope["headers"])


def protected_router(**kwargs: Any) -> APIRouter:
    return APIRouter(dependencies=[Security(require_access)], **kwargs)


def public_router(**kwargs: Any) -> APIRouter:
    return APIRouter(**kwargs)


def json_response(model: BaseModel, status_code: int = 200) -> Response:
    """Serialize a contract model with its omission rules (no re-validation)."""
    return Response(model.model_dump_json(), status_code=status_code, media_type="application/json")
