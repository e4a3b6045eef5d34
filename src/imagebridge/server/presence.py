"""Whether a synchronous request's caller is still there, and what its leaving does.

The original cancelled the work whenever the client went away. Behind a proxy that cuts
slow requests (nginx's 60 s, Cloudflare's 100 s) that threw away images the provider had
already made and billed, and the client's SDK then paid again. Here the request's
``policies.on_disconnect`` decides once a provider call has begun (the engine says when:
:class:`~imagebridge.engine.keep.ProviderDispatch`): ``keep`` lets the work finish
detached, into the history (the HTTP drain still counts it, so a SIGTERM's grace covers
it); ``cancel`` stops it, as the original did. Before any provider call, leaving always
cancels: nothing was paid for.
"""

from __future__ import annotations

import logging

from starlette.types import Receive

from imagebridge.contract.enums import DisconnectPolicy
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.keep import ProviderDispatch

__all__ = ["DISCONNECT_REASON", "ClientPresence", "watch_disconnect"]

logger = logging.getLogger("imagebridge.server")

DISCONNECT_REASON = "client disconnected"


class ClientPresence:
    """One request's caller: its cancel token and what its departure does to the work.

    Until :meth:`arm` is called (the request is known, its policy read) a departure
    cancels; so does one before the provider call began, or under ``cancel``.
    """

    def __init__(self, token: CancelToken | None = None) -> None:
        self.token = token or CancelToken()
        """Cancelled when the work must stop because the caller left."""
        self.left = False
        """The caller went away before the answer was complete."""
        self.kept = False
        """It went away after a provider call began, and the work goes on (``keep``)."""
        self._policy = DisconnectPolicy.CANCEL
        self._dispatch: ProviderDispatch | None = None

    def arm(self, policy: DisconnectPolicy, dispatch: ProviderDispatch) -> None:
        """The request's ``on_disconnect`` policy, and the engine's word on its first call."""
        self._policy = policy
        self._dispatch = dispatch

    def departed(self) -> None:
        """The caller is gone: keep the work (once paid for, under ``keep``) or stop it."""
        if self.left:
            return
        self.left = True
        dispatch = self._dispatch
        if self._policy is DisconnectPolicy.KEEP and dispatch is not None and dispatch.begun:
            self.kept = True
            logger.info("client left after the provider call began; the generation is kept")
            return
        self.token.cancel(DISCONNECT_REASON)


async def watch_disconnect(receive: Receive, presence: ClientPresence) -> None:
    """Tell ``presence`` when the client disconnects (call after the body has been read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            presence.departed()
            return
