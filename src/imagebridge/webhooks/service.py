"""The webhook service: endpoints, the emit port, deliveries, and the delivery loop.

Routes and the wiring go through this service, never the store. It owns the rules a store
cannot check: a target's address (:mod:`.targets`, with DNS), secrets (made here, shown
once), which endpoints the configuration declares. :meth:`WebhookService.emit` is the one
port other surfaces call for events they cause outside a job store's transaction (the
Responses surface: :meth:`WebhookService.emit_response`); ``job.*`` events need no call —
the job store writes them in the transaction of the job's final status.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from secrets import token_hex
from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.interfaces import WebhookStore
from imagebridge.storage.records import (
    OutboxEvent,
    WebhookDeliveryPage,
    WebhookDeliveryRecord,
    WebhookEndpointRecord,
)
from imagebridge.storage.rules.webhooks import (
    ALL_EVENT_TYPES,
    DELIVERY_STATES,
    RESPONSE_EVENT_TYPES,
    OutboxLimits,
    check_endpoint_name,
    check_event_types,
    event_payload,
)
from imagebridge.storage.webhook_store import EndpointWrite
from imagebridge.webhooks.dispatcher import DeliveryObserver, WebhookDispatcher, signing_secrets
from imagebridge.webhooks.sender import WebhookSender
from imagebridge.webhooks.settings import ConfiguredEndpoint, WebhookSettings
from imagebridge.webhooks.signing import check_secret, new_secret, secret_hint, signed_headers
from imagebridge.webhooks.targets import (
    UNRESOLVABLE,
    Resolver,
    parse_target,
    resolve_target,
    system_resolver,
)

__all__ = ["CreatedEndpoint", "TestResult", "WebhookService"]

logger = logging.getLogger("imagebridge.webhooks")

ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000
"""How long a rotated-away secret still signs when it is kept (OpenAI's 24 hours)."""
_UPDATABLE = frozenset({"name", "url", "event_types"})


@dataclass(frozen=True, slots=True)
class CreatedEndpoint:
    """An endpoint and its secret: the one answer that shows it."""

    endpoint: WebhookEndpointRecord
    secret: str


@dataclass(frozen=True, slots=True)
class TestResult:
    event_type: str
    endpoint_id: str
    status_code: int


def _configured_only(endpoint_id: str) -> BridgeError:
    return BridgeError.invalid_request(
        "this endpoint is declared in the configuration ([server.webhooks.endpoints]); "
        "change it there",
        field="id",
        reason="configured_endpoint",
        id=endpoint_id,
    )


class WebhookService:
    """Endpoints, events and deliveries over a :class:`WebhookStore` (the jobs database)."""

    def __init__(
        self,
        store: WebhookStore,
        settings: WebhookSettings,
        *,
        owner: str,
        env: Mapping[str, str],
        resolver: Resolver | None = None,
        observer: DeliveryObserver | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self._env = env
        self._resolver = resolver or system_resolver
        self._sender = WebhookSender(
            settings.targets,
            timeout_s=settings.timeout_ms / 1000,
            max_response_bytes=settings.max_response_bytes,
            resolver=resolver,
        )
        self.dispatcher = WebhookDispatcher(
            store, self._sender, settings, owner=owner, env=env, observer=observer
        )

    @property
    def limits(self) -> OutboxLimits:
        """What writing to the outbox needs (the job stores' outbox hook takes it too)."""
        return OutboxLimits(
            retry_period_ms=self.settings.retry_period_ms, max_pending=self.settings.max_pending
        )

    @staticmethod
    def event_types() -> tuple[str, ...]:
        return ALL_EVENT_TYPES

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start delivering (a background task; the server starts it with its lifespan)."""
        self.dispatcher.start()

    async def aclose(self, grace_s: float = 0.0) -> None:
        """Stop delivering (attempts in flight get ``grace_s``), then close the store."""
        try:
            await self.dispatcher.stop(grace_s)
        finally:
            await self.store.close()

    # -- events ----------------------------------------------------------------------------

    async def emit(
        self,
        event_type: str,
        data: Mapping[str, Any],
        *,
        key_id: str | None = None,
        source: str | None = None,
        created_at: int | None = None,
    ) -> builtins.list[str]:
        """Write one event (``data.id`` required) for every endpoint that takes it; the
        new event ids (none when no endpoint takes it, or ``source`` was emitted before).

        Call it after the state change that causes the event has committed, with a
        ``source`` naming that change, so a retried call never invents a second event.
        """
        event = OutboxEvent(
            type=event_type,
            data=dict(data),
            key_id=key_id,
            source=source,
            created_at=int(time.time()) if created_at is None else created_at,
        )
        written = await self.store.emit(
            [event],
            limits=self.limits,
            now_ms=time.time_ns() // 1_000_000,
            max_payload_bytes=self.settings.max_payload_bytes,
        )
        if written:
            self.dispatcher.wake()
        return written

    async def emit_response(
        self,
        event_type: str,
        response_id: str,
        *,
        key_id: str | None = None,
        created_at: int | None = None,
    ) -> builtins.list[str]:
        """OpenAI's ``response.completed|failed|cancelled|incomplete`` for a background
        response: ``data`` is ``{"id": response_id}``, once per response."""
        if event_type not in RESPONSE_EVENT_TYPES:
            raise BridgeError.invalid_request("not a response event type", field="type")
        return await self.emit(
            event_type,
            {"id": response_id},
            key_id=key_id,
            source=f"response:{response_id}",
            created_at=created_at,
        )

    # -- endpoints ---------------------------------------------------------------------------

    async def _checked_url(self, url: object, field: str = "url") -> str:
        """``url`` if it passes the address rules now (resolved: a name is checked too)."""
        policy = self.settings.targets
        await resolve_target(parse_target(url, policy, field), policy, self._resolver, field)
        assert isinstance(url, str)  # parse_target refused anything else
        return url

    async def create_endpoint(
        self, name: object, url: object, event_types: object, *, key_id: str | None = None
    ) -> CreatedEndpoint:
        """A new endpoint and its secret (shown once). ``key_id``: it receives only that
        key's events (the caller checked the key exists)."""
        checked_name = check_endpoint_name(name)
        types = check_event_types(event_types)
        checked_url = await self._checked_url(url)
        secret = new_secret()
        record = await self.store.create_endpoint(
            EndpointWrite(
                name=checked_name,
                url=checked_url,
                event_types=types,
                key_id=key_id,
                secret=secret,
                secret_env=None,
                secret_hint=secret_hint(secret),
            ),
            now=int(time.time()),
            max_endpoints=self.settings.max_endpoints,
        )
        if record is None:
            raise BridgeError.invalid_request(
                "the bridge holds server.webhooks.max_endpoints endpoints already",
                reason="limit_reached",
                max_endpoints=self.settings.max_endpoints,
            )
        return CreatedEndpoint(record, secret)

    async def get_endpoint(self, endpoint_id: str) -> WebhookEndpointRecord:
        return await self.store.get_endpoint(endpoint_id)

    async def list_endpoints(
        self, *, after: str | None = None, limit: int = 20
    ) -> tuple[builtins.list[WebhookEndpointRecord], bool]:
        return await self.store.list_endpoints(after=after, limit=limit)

    async def update_endpoint(
        self, endpoint_id: str, values: Mapping[str, Any]
    ) -> WebhookEndpointRecord:
        """Change ``name``, ``url`` and/or ``event_types`` of an API endpoint."""
        await self.store.get_endpoint(endpoint_id)
        checked: dict[str, Any] = {}
        for name, value in values.items():
            if name not in _UPDATABLE:  # pragma: no cover - the wire shape allows no other
                raise BridgeError.invalid_request("unknown field", field=name)
            if name == "name":
                checked[name] = check_endpoint_name(value)
            elif name == "event_types":
                checked[name] = check_event_types(value)
            else:
                checked[name] = await self._checked_url(value)
        if not checked:
            return await self.store.get_endpoint(endpoint_id)
        record = await self.store.update_endpoint(endpoint_id, checked, now=int(time.time()))
        if record is None:
            raise _configured_only(endpoint_id)
        return record

    async def delete_endpoint(self, endpoint_id: str) -> None:
        if not await self.store.delete_endpoint(endpoint_id, now_ms=time.time_ns() // 1_000_000):
            raise _configured_only(endpoint_id)

    async def rotate_secret(self, endpoint_id: str, *, keep_old: bool = False) -> CreatedEndpoint:
        """A new secret; with ``keep_old`` the old one still signs for 24 hours (each
        delivery then carries both signatures)."""
        secret = new_secret()
        now_ms = time.time_ns() // 1_000_000
        record = await self.store.rotate_secret(
            endpoint_id,
            secret=secret,
            hint=secret_hint(secret),
            keep_previous_until=now_ms + ROTATION_OVERLAP_MS if keep_old else None,
            now=now_ms // 1000,
        )
        if record is None:
            raise _configured_only(endpoint_id)
        return CreatedEndpoint(record, secret)

    async def test_endpoint(self, endpoint_id: str, event_type: object) -> TestResult:
        """Send one sample event now (not through the outbox: nothing is retried) and say
        what the receiver answered. A refused target is the same error as at creation;
        no answer at all is ``upstream`` (502) with the attempt's code."""
        record = await self.store.get_endpoint(endpoint_id)
        if not isinstance(event_type, str) or event_type not in ALL_EVENT_TYPES:
            raise BridgeError.invalid_request(
                f"event_type must be one of: {', '.join(ALL_EVENT_TYPES)}", field="event_type"
            )
        now_ms = time.time_ns() // 1_000_000
        secrets = signing_secrets(await self.store.endpoint_secrets(endpoint_id), self._env, now_ms)
        if secrets is None:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "the endpoint's secret variable is not set on this instance",
                details={"reason": "webhook_secret_missing"},
            )
        await self._checked_url(record.url)
        sample = OutboxEvent(event_type, {"id": "test"}, None, None, now_ms // 1000)
        body = event_payload("evt_test_" + token_hex(12), sample).encode()
        message_id = "wh_test_" + token_hex(12)
        outcome = await self._sender.send(
            record.url, signed_headers(message_id, now_ms // 1000, body, secrets), body
        )
        if outcome.status is None:
            raise BridgeError(
                ErrorCode.UPSTREAM,
                outcome.error or "the receiver did not answer",
                details={"reason": outcome.error_code},
            )
        return TestResult(event_type, endpoint_id, outcome.status)

    async def sync_configured(self, endpoints: Sequence[ConfiguredEndpoint]) -> None:
        """Make the database's configured endpoints the configuration's: check each one's
        target (``configuration`` errors naming its field; a name that does not resolve now
        is only warned about) and secret variable, then write them. Several instances
        sharing the database should declare the same ones."""
        writes: dict[str, EndpointWrite] = {}
        for endpoint in endpoints:
            base = f"server.webhooks.endpoints.{endpoint.name}"
            try:
                await self._checked_url(endpoint.url, f"{base}.url")
            except BridgeError as refused:
                if refused.details.get("reason") != UNRESOLVABLE:
                    raise BridgeError(
                        ErrorCode.CONFIGURATION, refused.message, details=refused.details
                    ) from None
                # DNS may be away at start: every attempt checks the address again.
                logger.warning(
                    "a configured webhook endpoint does not resolve now",
                    extra={"endpoint": endpoint.id},
                )
            secret = self._env.get(endpoint.secret_env)
            if not secret:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    f"{base}.secret_env names a variable that is not set",
                    details={"field": f"{base}.secret_env"},
                )
            check_secret(secret, f"{base}.secret_env")
            writes[endpoint.id] = EndpointWrite(
                name=endpoint.name,
                url=endpoint.url,
                event_types=endpoint.event_types,
                key_id=endpoint.key_id,
                secret=None,
                secret_env=endpoint.secret_env,
                secret_hint=None,
            )
        await self.store.sync_configured(
            writes, now=int(time.time()), now_ms=time.time_ns() // 1_000_000
        )

    # -- deliveries --------------------------------------------------------------------------

    async def list_deliveries(
        self,
        *,
        endpoint_id: str | None = None,
        status: str | None = None,
        event_type: str | None = None,
        event_id: str | None = None,
        after: str | None = None,
        limit: int = 20,
    ) -> WebhookDeliveryPage:
        if status is not None and status not in DELIVERY_STATES:
            raise BridgeError.invalid_request(
                f"status must be one of: {', '.join(DELIVERY_STATES)}", field="status"
            )
        if event_type is not None and event_type not in ALL_EVENT_TYPES:
            raise BridgeError.invalid_request("unknown event type", field="event_type")
        return await self.store.list_deliveries(
            endpoint_id=endpoint_id,
            status=status,
            event_type=event_type,
            event_id=event_id,
            after=after,
            limit=limit,
        )

    async def get_delivery(self, delivery_id: str) -> WebhookDeliveryRecord:
        return await self.store.get_delivery(delivery_id)

    async def redeliver(self, delivery_id: str) -> WebhookDeliveryRecord:
        """Try a failed delivery again (same ``webhook-id``), for a new retry period."""
        record = await self.store.redeliver(
            delivery_id,
            now_ms=time.time_ns() // 1_000_000,
            retry_period_ms=self.settings.retry_period_ms,
        )
        self.dispatcher.wake()
        return record
