"""Whose things a key's request touches: its ownership scope and its own session names.

A key owns what it creates under the scope ``key:<key id>`` (jobs, artifacts, presets), and
its persistent sessions live in its own namespace (``<key id>/<session key>``), so another
key using the same session name neither continues, reads nor deletes its thread.
"""

from __future__ import annotations

from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.storage.rules.keys import KEY_SCOPE_PREFIX, check_key_id, key_id_of_scope

__all__ = [
    "KEY_SCOPE_PREFIX",
    "key_id_of_scope",
    "key_scope",
    "named_key_scope",
    "scope_request_session",
    "scope_session_key",
    "unscope_response_session",
]


def key_scope(key_id: str) -> str:
    return KEY_SCOPE_PREFIX + key_id


def named_key_scope(key_id: object) -> str:
    """The scope of a key someone names (the admin's ``?key=``); a malformed id is the
    same "not found" as a key that does not exist."""
    return key_scope(check_key_id(key_id))


def scope_session_key(key_id: str, session_key: str) -> str:
    """The stored name of a key's session ``session_key``: ``<key id>/<session key>``."""
    return f"{key_id}/{session_key}"


def scope_request_session(request: ImageRequest, key_id: str) -> ImageRequest:
    """``request`` with its session key moved into the key's namespace."""
    session = request.session
    if session.key is None:
        return request
    scoped = session.model_copy(update={"key": scope_session_key(key_id, session.key)})
    return request.model_copy(update={"session": scoped})


def unscope_response_session(response: ImageResponse, key_id: str) -> ImageResponse:
    """The answer with the key's own session name back (as the caller sent it)."""
    session = response.session
    prefix = scope_session_key(key_id, "")
    if session is None or session.key is None or not session.key.startswith(prefix):
        return response
    plain = session.model_copy(update={"key": session.key[len(prefix) :]})
    return response.model_copy(update={"session": plain})
