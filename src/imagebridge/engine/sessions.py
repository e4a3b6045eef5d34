"""The session-binding port: what a provider needs to keep persistent sessions.

A provider that runs conversations on upstream threads (the ``codex-app-server`` provider)
binds a caller's session key to a thread id and finds it again on the next request. That
provider is an adapter, and so are the stores that keep the bindings (:mod:`imagebridge.storage`);
adapters do not import each other, so the engine states here what the provider needs, the
storage session stores implement it, and :mod:`imagebridge.application` opens a store and hands
it to the provider.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["SessionBindings"]


class SessionBindings(Protocol):
    """Persistent session key → provider thread bindings of one provider."""

    async def get(self, key: str) -> str | None:
        """The thread bound to ``key``, or ``None``."""
        ...

    async def put(self, key: str, thread_id: str) -> None:
        """Bind ``key`` to ``thread_id``, replacing any earlier binding."""
        ...

    async def delete(self, key: str) -> bool:
        """Remove the binding; return whether one existed."""
        ...

    async def close(self) -> None:
        """Release the bindings' resources (whoever opened them closes them)."""
        ...
