"""A kept response's conversation on a provider that keeps threads.

The Codex backend stores nothing, so a follow-up (``previous_response_id``) always sends
the earlier image as its edit input. A provider whose capabilities say
``persistent_sessions`` (the ``codex-app-server`` provider keeps app-server threads) can do
more: a kept response (``store``, the default) runs as a persistent native session keyed by
its conversation, so a follow-up continues the same upstream thread. The earlier image is
still sent, so the answer is right even when the thread was lost.

A new response starts the conversation ``responses:<its response id>``; with an
``Idempotency-Key`` the key is derived from that key instead (``responses:idem-<sha-256
prefix>``), because the native request's session is part of its idempotency fingerprint
and a retry gets a new response id. The key has no ``/``, so ``GET`` and ``DELETE
/v1/sessions/{key}?provider=…`` can name it. A follow-up continues the conversation of the
response it names, which is kept in that response's shape
(:attr:`~imagebridge.contract.openai.responses_output.ResponseShape.conversation`).
``store: false``, a provider without persistent sessions, and a request with more than one
route (fallbacks, ``honour_size``) run isolated, as before.
"""

from __future__ import annotations

import hashlib

from imagebridge.contract.enums import BatchExecution, SessionMode
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest, SessionOptions
from imagebridge.engine.runtime import ImageRuntime

__all__ = ["CONVERSATION_PREFIX", "in_conversation", "keeps_threads", "new_conversation"]

CONVERSATION_PREFIX = "responses:"


def new_conversation(response_id: str, idempotency_key: str | None) -> str:
    """The session key a new response's conversation starts under."""
    if idempotency_key is not None:
        digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]
        return f"{CONVERSATION_PREFIX}idem-{digest}"
    return f"{CONVERSATION_PREFIX}{response_id}"


async def keeps_threads(runtime: ImageRuntime, request: ImageRequest) -> bool:
    """Whether ``request`` runs on exactly one provider, one whose capabilities say
    ``persistent_sessions``, and can take a persistent session (no fallbacks, no parallel
    batch, no session of its own)."""
    if request.session.mode is not SessionMode.ISOLATED:
        return False
    if request.policies.batch_execution is BatchExecution.PARALLEL:
        return False
    try:
        routes = runtime.routing.routes(request)
        if len(routes) != 1:
            return False
        provider, model = routes[0]
        caps = await runtime.registry.capabilities(provider, model)
    except BridgeError:
        return False  # the request's own run reports what is wrong with its route
    return caps.persistent_sessions


def in_conversation(request: ImageRequest, key: str) -> ImageRequest:
    """``request`` as a turn of the persistent session ``key``."""
    session = SessionOptions(mode=SessionMode.PERSISTENT, key=key)
    return request.model_copy(update={"session": session})
