"""``GET``/``DELETE /v1/sessions/{key}``: persistent-session bindings of a provider."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.response import SessionMetadata
from imagebridge.engine.provider import Provider
from imagebridge.engine.registry import is_provider_name
from imagebridge.engine.validation import has_control_characters
from imagebridge.keys import scope_session_key
from imagebridge.server.context import request_context
from imagebridge.server.errors import provider_not_found
from imagebridge.server.openapi import ERROR_RESPONSES, query_parameter
from imagebridge.server.query import strict_query
from imagebridge.server.routes import json_response, protected_router
from imagebridge.server.state import bridge_state

router = protected_router(tags=["sessions"])

_QUERY = [query_parameter("provider", {"type": "string"})]


def _stored_key(request: Request, key: str) -> str:
    """A key's sessions are in its own namespace (docs/keys.md, scope)."""
    principal = request_context(request).principal
    if principal is not None and principal.key is not None:
        return scope_session_key(principal.key.id, key)
    return key


def _session_target(request: Request, key: str) -> Provider:
    query = strict_query(request, ("provider",), "session query parameters are invalid")
    limit = bridge_state(request).runtime.settings.request_limits.max_identifier_bytes
    if not key.strip() or len(key.encode()) > limit or has_control_characters(key):
        raise BridgeError.invalid_request("session key is invalid", field="key")
    registry = bridge_state(request).runtime.registry
    name = query.get("provider", registry.default)
    if name not in registry.names:
        raise provider_not_found(name if is_provider_name(name) else None, field="provider")
    return registry.resolve(name)


@router.get(
    "/v1/sessions/{key}",
    operation_id="getSession",
    responses={
        200: {"model": SessionMetadata, "description": "Session binding"},
        **ERROR_RESPONSES,
    },
    openapi_extra={"parameters": _QUERY},
)
async def get_session(key: str, request: Request) -> Response:
    provider = _session_target(request, key)
    try:
        metadata = await provider.get_session(_stored_key(request, key))
    except BridgeError as error:
        raise error.with_provider(provider.name) from None
    if metadata.key is not None and metadata.key != key:
        metadata = metadata.model_copy(update={"key": key})
    return json_response(metadata)


@router.delete(
    "/v1/sessions/{key}",
    operation_id="deleteSession",
    status_code=204,
    responses={204: {"description": "Binding deleted"}, **ERROR_RESPONSES},
    openapi_extra={"parameters": _QUERY},
)
async def delete_session(key: str, request: Request) -> Response:
    provider = _session_target(request, key)
    try:
        await provider.delete_session(_stored_key(request, key))
    except BridgeError as error:
        raise error.with_provider(provider.name) from None
    return Response(status_code=204)
