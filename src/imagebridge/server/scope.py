"""Whose resources a read acts on: the caller's own, or — for the admin, with named API keys
— one key's, chosen with the ``key`` query parameter (``?key=<key id>``).

The admin's view of a key's jobs and artifacts is read-only: listing, reading a job, its
partial preview, an artifact and its thumbnail. Anyone else sending ``key`` is refused
(403), so a key can never widen its own scope.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.keys import named_key_scope
from imagebridge.server.context import request_context
from imagebridge.server.state import bridge_state

__all__ = ["KEY_FILTER", "reading_owner"]

KEY_FILTER = "key"
"""The query parameter with which the admin reads one key's resources."""


def reading_owner(request: Request, query: Mapping[str, str]) -> str:
    """The ownership scope a read acts on (the caller's, or the key the admin names)."""
    context = request_context(request)
    wanted = query.get(KEY_FILTER)
    if wanted is None:
        return context.owner
    principal = context.principal
    if bridge_state(request).access.keys is None or principal is None or not principal.admin:
        raise BridgeError(
            ErrorCode.PERMISSION_DENIED,
            "only the admin key may read another key's resources",
            details={"field": KEY_FILTER},
        )
    return named_key_scope(wanted)
