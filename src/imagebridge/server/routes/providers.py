"""``/v1/providers`` (cursor pages) and ``/v1/providers/{provider}/capabilities``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.contract.capabilities import ProviderCapabilities, ProviderPage
from imagebridge.engine.registry import is_provider_name
from imagebridge.server.errors import provider_not_found
from imagebridge.server.openapi import ERROR_RESPONSES, query_parameter
from imagebridge.server.query import (
    MAX_CURSOR_CHARS,
    MAX_PAGE_LIMIT,
    decode_provider_cursor,
    encode_provider_cursor,
    page_limit,
    strict_query,
)
from imagebridge.server.routes import json_response, protected_router
from imagebridge.server.state import bridge_state

router = protected_router(tags=["providers"])

_QUERY_INVALID = "provider query parameters are invalid"
_CAPABILITY_QUERY_INVALID = "capability query parameters are invalid"


@router.get(
    "/v1/providers",
    operation_id="listProviders",
    responses={200: {"model": ProviderPage, "description": "Provider page"}, **ERROR_RESPONSES},
    openapi_extra={
        "parameters": [
            query_parameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_LIMIT, "default": 20},
            ),
            query_parameter("cursor", {"type": "string", "maxLength": MAX_CURSOR_CHARS}),
        ]
    },
)
async def list_providers(request: Request) -> Response:
    query = strict_query(request, ("limit", "cursor"), _QUERY_INVALID)
    limit = page_limit(
        query.get("limit"),
        invalid=_QUERY_INVALID,
        out_of_range="provider page limit must be between 1 and 100",
    )
    after = decode_provider_cursor(query.get("cursor"))
    descriptors = sorted(bridge_state(request).runtime.registry.descriptors(), key=lambda d: d.name)
    remaining = [item for item in descriptors if after is None or item.name > after]
    page = remaining[:limit]
    next_cursor = encode_provider_cursor(page[-1].name) if len(remaining) > limit else None
    return json_response(ProviderPage(items=page, next_cursor=next_cursor))


@router.get(
    "/v1/providers/{provider}/capabilities",
    operation_id="getProviderCapabilities",
    responses={
        200: {"model": ProviderCapabilities, "description": "Capability document"},
        **ERROR_RESPONSES,
    },
    openapi_extra={"parameters": [query_parameter("model", {"type": "string"})]},
)
async def provider_capabilities(provider: str, request: Request) -> Response:
    query = strict_query(request, ("model",), _CAPABILITY_QUERY_INVALID)
    registry = bridge_state(request).runtime.registry
    if provider not in registry.names:
        raise provider_not_found(provider if is_provider_name(provider) else None)
    capabilities = await registry.capabilities(provider, query.get("model"))
    return json_response(capabilities)
