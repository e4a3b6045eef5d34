"""The webhook outbox's store logic, shared by both backends: its SQL and its conversations.

Each operation is a *conversation*: a generator that yields statements (``:name``
placeholders) and is sent each one's rows back, so logic that reads, decides and writes —
which endpoints receive an event, whether the outbox is full — is written once and runs
inside ONE transaction on either backend. A backend supplies the driver
(:meth:`WebhookStoreBase._converse`: SQLite on its worker thread in ``BEGIN IMMEDIATE``,
PostgreSQL on a pooled connection). Writing events and their deliveries — what :meth:`emit`
does here and what the job stores do inside their own transaction when a job reaches its final
status — is :mod:`imagebridge.storage.webhook_outbox`'s.

Delivery is claimed like the shared job queue: a claim moves due deliveries to
``delivering`` under a lease (owner, expiry) and counts the attempt, in one statement
(PostgreSQL skips rows another instance is claiming: ``FOR UPDATE SKIP LOCKED``; SQLite has
one writer). Finishing an attempt is fenced by the lease: an instance whose lease ran out
and was re-claimed cannot overwrite the newer attempt's state. A killed instance's
deliveries come back when their lease expires, with the same ``webhook-id``.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from imagebridge.contract.errors import BridgeError
from imagebridge.storage.records import (
    OutboxEvent,
    OutboxStatistics,
    WebhookDeliveryPage,
    WebhookDeliveryRecord,
    WebhookEndpointRecord,
    WebhookSecrets,
    WebhookTarget,
)
from imagebridge.storage.rules.values import check_timestamp
from imagebridge.storage.rules.webhooks import (
    DELIVERED,
    DELIVERING,
    DELIVERY_STATES,
    ENDPOINT_DELETED,
    FAILED,
    FINISHED_SQL,
    PENDING,
    UNFINISHED_SQL,
    OutboxLimits,
    Statement,
    check_endpoint_id,
    delivery_not_found,
    delivery_record,
    dump_event_types,
    endpoint_not_found,
    endpoint_record,
    mint_endpoint_id,
)
from imagebridge.storage.webhook_outbox import Conversation, WebhookTables, write_outbox

__all__ = ["EndpointWrite", "WebhookStoreBase"]

T = TypeVar("T")

MAX_CLAIM = 100
"""Most deliveries one claim takes."""
MAX_PAGE = 100
_PRUNE_BATCH = 5_000

_ENDPOINT_COLUMNS = (
    "id, name, url, event_types, key_id, source, secret_env, secret_hint, created_at, updated_at"
)
_DELIVERY_COLUMNS = (
    "id, event_id, event_type, endpoint_id, key_id, status, attempts, created_at, "
    "next_attempt_at, deadline_at, last_attempt_at, completed_at, last_status, "
    "last_error_code, last_error"
)


@dataclass(frozen=True, slots=True)
class EndpointWrite:
    """An endpoint's stored fields (``secret`` for API endpoints, ``secret_env`` for
    configured ones)."""

    name: str
    url: str
    event_types: tuple[str, ...]
    key_id: str | None
    secret: str | None
    secret_env: str | None
    secret_hint: str | None


class WebhookStoreBase:
    """:class:`~imagebridge.storage.interfaces.WebhookStore` over a backend's driver."""

    _tables = WebhookTables()
    _skip_locked = ""
    """PostgreSQL: ``FOR UPDATE SKIP LOCKED`` (concurrent claimers never wait or collide)."""

    async def _converse(self, conversation: Conversation[T]) -> T:
        raise NotImplementedError

    async def _run(self, statement: Statement) -> builtins.list[dict[str, Any]]:
        def one() -> Conversation[builtins.list[dict[str, Any]]]:
            rows = yield statement
            return rows

        return await self._converse(one())

    # -- events --------------------------------------------------------------------------

    async def emit(
        self,
        events: Sequence[OutboxEvent],
        *,
        limits: OutboxLimits,
        now_ms: int,
        max_payload_bytes: int | None = None,
    ) -> builtins.list[str]:
        """Write ``events`` in one transaction of their own (see :func:`write_outbox`)."""
        check_timestamp(now_ms, "now_ms")
        return await self._converse(
            write_outbox(
                self._tables,
                events,
                limits=limits,
                now_ms=now_ms,
                max_payload_bytes=max_payload_bytes,
            )
        )

    # -- endpoints -----------------------------------------------------------------------

    async def create_endpoint(
        self, endpoint: EndpointWrite, *, now: int, max_endpoints: int
    ) -> WebhookEndpointRecord | None:
        """Add an API endpoint; ``None`` when the store already holds ``max_endpoints``."""
        rows = await self._run(
            (
                f"INSERT INTO {self._tables.endpoints} (id, name, url, event_types, key_id, "  # noqa: S608
                "source, secret, secret_env, secret_hint, created_at, updated_at) "
                "SELECT :id, :name, :url, :event_types, :key_id, 'api', :secret, NULL, :hint, "
                f":now, :now WHERE (SELECT COUNT(*) FROM {self._tables.endpoints}) < :max "
                f"RETURNING {_ENDPOINT_COLUMNS}",
                {
                    **self._endpoint_params(endpoint),
                    "id": mint_endpoint_id(),
                    "now": now,
                    "max": max_endpoints,
                },
            )
        )
        return endpoint_record(rows[0]) if rows else None

    @staticmethod
    def _endpoint_params(endpoint: EndpointWrite) -> dict[str, Any]:
        return {
            "name": endpoint.name,
            "url": endpoint.url,
            "event_types": dump_event_types(endpoint.event_types),
            "key_id": endpoint.key_id,
            "secret": endpoint.secret,
            "hint": endpoint.secret_hint,
        }

    async def get_endpoint(self, endpoint_id: str) -> WebhookEndpointRecord:
        check_endpoint_id(endpoint_id)
        rows = await self._run(
            (
                f"SELECT {_ENDPOINT_COLUMNS} FROM {self._tables.endpoints} WHERE id = :id",  # noqa: S608
                {"id": endpoint_id},
            )
        )
        if not rows:
            raise endpoint_not_found()
        return endpoint_record(rows[0])

    async def list_endpoints(
        self, *, after: str | None = None, limit: int = MAX_PAGE
    ) -> tuple[builtins.list[WebhookEndpointRecord], bool]:
        """Newest first; ``after`` is the last id of the previous page. (rows, has_more)."""
        limit = min(max(limit, 1), MAX_PAGE)
        t = self._tables.endpoints
        where = ""
        if after is not None:
            where = f"WHERE (created_at, id) < (SELECT created_at, id FROM {t} WHERE id = :after) "  # noqa: S608
        rows = await self._run(
            (
                f"SELECT {_ENDPOINT_COLUMNS} FROM {t} {where}"  # noqa: S608
                "ORDER BY created_at DESC, id DESC LIMIT :limit",
                {"after": after, "limit": limit + 1},
            )
        )
        return [endpoint_record(row) for row in rows[:limit]], len(rows) > limit

    async def update_endpoint(
        self, endpoint_id: str, values: Mapping[str, Any], *, now: int
    ) -> WebhookEndpointRecord | None:
        """Change an API endpoint's ``name``, ``url`` or ``event_types`` (already checked);
        ``None`` when it is a configured endpoint (the file owns it)."""
        await self.get_endpoint(endpoint_id)
        columns = {"name": "name", "url": "url", "event_types": "event_types"}
        assignments = [f"{columns[name]} = :{name}" for name in sorted(values)]
        params: dict[str, Any] = {"id": endpoint_id, "now": now}
        for name, value in values.items():
            params[name] = dump_event_types(value) if name == "event_types" else value
        rows = await self._run(
            (
                f"UPDATE {self._tables.endpoints} SET "  # noqa: S608
                f"{', '.join([*assignments, 'updated_at = :now'])} "
                f"WHERE id = :id AND source = 'api' RETURNING {_ENDPOINT_COLUMNS}",
                params,
            )
        )
        return endpoint_record(rows[0]) if rows else None

    async def rotate_secret(
        self,
        endpoint_id: str,
        *,
        secret: str,
        hint: str,
        keep_previous_until: int | None,
        now: int,
    ) -> WebhookEndpointRecord | None:
        """New secret for an API endpoint; the old one still signs (as a second signature)
        until ``keep_previous_until`` (ms) when given. ``None`` for a configured endpoint."""
        await self.get_endpoint(endpoint_id)
        previous = "NULL" if keep_previous_until is None else "secret"
        rows = await self._run(
            (
                f"UPDATE {self._tables.endpoints} SET previous_secret = {previous}, "  # noqa: S608
                "previous_expires_at = :keep, secret = :secret, secret_hint = :hint, "
                "updated_at = :now "
                f"WHERE id = :id AND source = 'api' RETURNING {_ENDPOINT_COLUMNS}",
                {
                    "id": endpoint_id,
                    "secret": secret,
                    "hint": hint,
                    "keep": keep_previous_until,
                    "now": now,
                },
            )
        )
        return endpoint_record(rows[0]) if rows else None

    async def delete_endpoint(self, endpoint_id: str, *, now_ms: int) -> bool:
        """Delete an API endpoint; its undelivered deliveries end ``failed``
        (``webhook_endpoint_deleted``). ``False`` for a configured endpoint."""
        await self.get_endpoint(endpoint_id)

        def conversation() -> Conversation[bool]:
            deleted = yield (
                f"DELETE FROM {self._tables.endpoints} WHERE id = :id AND source = 'api' "  # noqa: S608
                "RETURNING id",
                {"id": endpoint_id},
            )
            if not deleted:
                return False
            yield self._abandon(endpoint_id, now_ms)
            return True

        return await self._converse(conversation())

    def _abandon(self, endpoint_id: str, now_ms: int) -> Statement:
        return (
            f"UPDATE {self._tables.deliveries} SET status = 'failed', completed_at = :now, "  # noqa: S608
            "lease_owner = NULL, lease_expires_at = NULL, last_error_code = :code, "
            "last_error = 'the endpoint was deleted' "
            f"WHERE endpoint_id = :id AND status IN {UNFINISHED_SQL}",
            {"id": endpoint_id, "now": now_ms, "code": ENDPOINT_DELETED},
        )

    async def endpoint_secrets(self, endpoint_id: str) -> WebhookSecrets:
        check_endpoint_id(endpoint_id)
        rows = await self._run(
            (
                "SELECT secret, secret_env, previous_secret, previous_expires_at "  # noqa: S608
                f"FROM {self._tables.endpoints} WHERE id = :id",
                {"id": endpoint_id},
            )
        )
        if not rows:
            raise endpoint_not_found()
        return _secrets(rows[0])

    async def sync_configured(
        self,
        endpoints: Mapping[str, EndpointWrite],
        *,
        now: int,
        now_ms: int,
    ) -> None:
        """Make the configured endpoints (``id → fields``) exactly ``endpoints``: insert or
        update each, delete the configured ones no longer there (their undelivered
        deliveries end ``failed``). API endpoints are untouched."""
        t = self._tables.endpoints

        def conversation() -> Conversation[None]:
            for endpoint_id, endpoint in sorted(endpoints.items()):
                yield (
                    f"INSERT INTO {t} (id, name, url, event_types, key_id, source, secret, "  # noqa: S608
                    "secret_env, secret_hint, created_at, updated_at) VALUES (:id, :name, :url, "
                    ":event_types, :key_id, 'config', NULL, :secret_env, NULL, :now, :now) "
                    "ON CONFLICT (id) DO UPDATE SET name = excluded.name, url = excluded.url, "
                    "event_types = excluded.event_types, key_id = excluded.key_id, "
                    "secret_env = excluded.secret_env, updated_at = CASE WHEN "
                    f"{t}.url = excluded.url AND {t}.event_types = excluded.event_types "
                    f"AND {t}.name = excluded.name "
                    f"AND COALESCE({t}.key_id, '') = COALESCE(excluded.key_id, '') "
                    f"AND COALESCE({t}.secret_env, '') = COALESCE(excluded.secret_env, '') "
                    f"THEN {t}.updated_at ELSE excluded.updated_at END",
                    {
                        **self._endpoint_params(endpoint),
                        "id": endpoint_id,
                        "secret_env": endpoint.secret_env,
                        "now": now,
                    },
                )
            configured = yield (f"SELECT id FROM {t} WHERE source = 'config'", {})  # noqa: S608
            for row in configured:
                gone = str(row["id"])
                if gone not in endpoints:
                    yield (f"DELETE FROM {t} WHERE id = :id", {"id": gone})  # noqa: S608
                    yield self._abandon(gone, now_ms)

        await self._converse(conversation())

    # -- delivery --------------------------------------------------------------------------

    async def claim(
        self, owner: str, *, limit: int, now_ms: int, lease_ms: int
    ) -> builtins.list[WebhookTarget]:
        """Take up to ``limit`` due deliveries (waiting ones whose time came, and claimed
        ones whose lease ran out) for one attempt each, under ``owner``'s lease."""
        if limit <= 0:
            return []
        d, e, p = self._tables.deliveries, self._tables.events, self._tables.endpoints
        due = (
            "((status = 'pending' AND next_attempt_at <= :now) "
            "OR (status = 'delivering' AND lease_expires_at <= :now))"
        )
        params = {
            "owner": owner,
            "now": now_ms,
            "expires": now_ms + lease_ms,
            "limit": min(limit, MAX_CLAIM),
        }

        def conversation() -> Conversation[builtins.list[WebhookTarget]]:
            # The due rows are picked once, in a CTE (an ``IN (SELECT … LIMIT … SKIP LOCKED)``
            # may be re-run by PostgreSQL's planner and claim more than ``limit`` rows).
            claimed = yield (
                f"WITH next AS (SELECT id FROM {d} WHERE {due} "  # noqa: S608
                f"ORDER BY next_attempt_at, id LIMIT :limit{self._skip_locked}) "
                f"UPDATE {d} SET status = 'delivering', lease_owner = :owner, "
                "lease_expires_at = :expires, attempts = attempts + 1, last_attempt_at = :now "
                f"FROM next WHERE {d}.id = next.id RETURNING {d}.id",
                params,
            )
            if not claimed:
                return []
            names = {f"c{i}": str(row["id"]) for i, row in enumerate(claimed)}
            rows = yield (
                "SELECT d.id, d.event_id, d.endpoint_id, d.attempts, d.created_at, "  # noqa: S608
                "d.deadline_at, e.payload, p.url, p.secret, p.secret_env, p.previous_secret, "
                f"p.previous_expires_at FROM {d} AS d JOIN {e} AS e ON e.id = d.event_id "
                f"LEFT JOIN {p} AS p ON p.id = d.endpoint_id "
                f"WHERE d.id IN ({', '.join(f':{name}' for name in names)}) ORDER BY d.id",
                names,
            )
            return [_target(row) for row in rows]

        return await self._converse(conversation())

    async def finish(
        self,
        delivery_id: str,
        owner: str,
        *,
        status: str,
        now_ms: int,
        next_attempt_at: int | None = None,
        http_status: int | None = None,
        error_code: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Record one attempt's outcome: ``delivered``, ``failed`` (given up) or ``pending``
        again at ``next_attempt_at``. Fenced by the lease: ``False`` when ``owner`` no
        longer holds it (another instance took the delivery over)."""
        if status not in (DELIVERED, FAILED, PENDING):  # pragma: no cover - internal misuse
            raise ValueError("an attempt ends delivered, failed or pending")
        rows = await self._run(
            (
                f"UPDATE {self._tables.deliveries} SET status = :status, "  # noqa: S608
                "next_attempt_at = COALESCE(:next, next_attempt_at), completed_at = :completed, "
                "last_status = :http_status, last_error_code = :code, last_error = :error, "
                "lease_owner = NULL, lease_expires_at = NULL "
                "WHERE id = :id AND lease_owner = :owner AND status = 'delivering' RETURNING id",
                {
                    "id": delivery_id,
                    "owner": owner,
                    "status": status,
                    "next": next_attempt_at,
                    "completed": None if status == PENDING else now_ms,
                    "http_status": http_status,
                    "code": error_code,
                    "error": error,
                },
            )
        )
        return bool(rows)

    async def release(self, delivery_ids: Sequence[str], owner: str, *, now_ms: int) -> int:
        """Give claimed deliveries back at once (a stopping instance): due again now."""
        released = 0
        for delivery_id in delivery_ids:
            rows = await self._run(
                (
                    f"UPDATE {self._tables.deliveries} SET status = 'pending', "  # noqa: S608
                    "next_attempt_at = :now, lease_owner = NULL, lease_expires_at = NULL "
                    "WHERE id = :id AND lease_owner = :owner AND status = 'delivering' "
                    "RETURNING id",
                    {"id": delivery_id, "owner": owner, "now": now_ms},
                )
            )
            released += len(rows)
        return released

    async def redeliver(
        self, delivery_id: str, *, now_ms: int, retry_period_ms: int
    ) -> WebhookDeliveryRecord:
        """A failed delivery due again now, with a new retry period (same ``webhook-id``).
        A delivery not failed, or whose endpoint is gone, is refused."""
        record = await self.get_delivery(delivery_id)
        rows = await self._run(
            (
                f"UPDATE {self._tables.deliveries} SET status = 'pending', "  # noqa: S608
                "next_attempt_at = :now, deadline_at = :deadline, completed_at = NULL "
                "WHERE id = :id AND status = 'failed' AND EXISTS (SELECT 1 FROM "
                f"{self._tables.endpoints} WHERE id = endpoint_id) RETURNING {_DELIVERY_COLUMNS}",
                {"id": delivery_id, "now": now_ms, "deadline": now_ms + retry_period_ms},
            )
        )
        if not rows:
            reason = "endpoint_deleted" if record.status == FAILED else "not_failed"
            raise BridgeError.invalid_request(
                "only a failed delivery whose endpoint still exists can be redelivered",
                field="id",
                reason=reason,
            )
        return delivery_record(rows[0])

    # -- listings ----------------------------------------------------------------------------

    async def get_delivery(self, delivery_id: str) -> WebhookDeliveryRecord:
        if not isinstance(delivery_id, str) or not delivery_id.startswith("wh_"):
            raise delivery_not_found()
        rows = await self._run(
            (
                f"SELECT {_DELIVERY_COLUMNS} FROM {self._tables.deliveries} WHERE id = :id",  # noqa: S608
                {"id": delivery_id},
            )
        )
        if not rows:
            raise delivery_not_found()
        return delivery_record(rows[0])

    async def list_deliveries(
        self,
        *,
        endpoint_id: str | None = None,
        status: str | None = None,
        event_type: str | None = None,
        event_id: str | None = None,
        after: str | None = None,
        limit: int = MAX_PAGE,
    ) -> WebhookDeliveryPage:
        """Newest first (ids are time-ordered); ``after`` is the last id of the previous
        page."""
        if status is not None and status not in DELIVERY_STATES:  # pragma: no cover
            raise ValueError("unknown delivery status")
        limit = min(max(limit, 1), MAX_PAGE)
        conditions: list[str] = []
        params: dict[str, Any] = {"limit": limit + 1}
        for column, value in (
            ("endpoint_id", endpoint_id),
            ("status", status),
            ("event_type", event_type),
            ("event_id", event_id),
        ):
            if value is not None:
                conditions.append(f"{column} = :{column}")
                params[column] = value
        if after is not None:
            conditions.append("id < :after")
            params["after"] = after
        where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
        rows = await self._run(
            (
                f"SELECT {_DELIVERY_COLUMNS} FROM {self._tables.deliveries} {where}"  # noqa: S608
                "ORDER BY id DESC LIMIT :limit",
                params,
            )
        )
        return WebhookDeliveryPage(
            data=[delivery_record(row) for row in rows[:limit]], has_more=len(rows) > limit
        )

    async def statistics(self) -> OutboxStatistics:
        rows = await self._run(
            (
                "SELECT COUNT(*) AS n, MIN(created_at) AS oldest "  # noqa: S608
                f"FROM {self._tables.deliveries} WHERE status IN {UNFINISHED_SQL}",
                {},
            )
        )
        oldest = rows[0]["oldest"]
        return OutboxStatistics(
            pending=int(rows[0]["n"]), oldest_created_at=None if oldest is None else int(oldest)
        )

    async def prune(self, *, before_ms: int, max_retained: int) -> int:
        """Delete finished deliveries completed before ``before_ms`` and those past the
        newest ``max_retained`` (a bounded batch per call), then events no delivery needs."""
        d, e = self._tables.deliveries, self._tables.events

        def conversation() -> Conversation[int]:
            old = yield (
                f"DELETE FROM {d} WHERE id IN (SELECT id FROM {d} WHERE status IN "  # noqa: S608
                f"{FINISHED_SQL} AND completed_at < :before LIMIT :batch) RETURNING id",
                {"before": before_ms, "batch": _PRUNE_BATCH},
            )
            excess = yield (
                f"DELETE FROM {d} WHERE id IN (SELECT id FROM {d} WHERE status IN "  # noqa: S608
                f"{FINISHED_SQL} ORDER BY completed_at DESC, id DESC LIMIT :batch "
                "OFFSET :keep) RETURNING id",
                {"keep": max_retained, "batch": _PRUNE_BATCH},
            )
            if old or excess:
                yield (
                    f"DELETE FROM {e} WHERE NOT EXISTS (SELECT 1 FROM {d} "  # noqa: S608
                    f"WHERE {d}.event_id = {e}.id)",
                    {},
                )
            return len(old) + len(excess)

        return await self._converse(conversation())

    async def delivering(self, owner: str) -> builtins.list[str]:
        """The deliveries ``owner`` holds a lease on (tests, shutdown)."""
        rows = await self._run(
            (
                f"SELECT id FROM {self._tables.deliveries} WHERE lease_owner = :owner "  # noqa: S608
                f"AND status = '{DELIVERING}' ORDER BY id",
                {"owner": owner},
            )
        )
        return [str(row["id"]) for row in rows]


def _secrets(row: Mapping[str, Any]) -> WebhookSecrets:
    return WebhookSecrets(
        secret=row["secret"],
        secret_env=row["secret_env"],
        previous=row["previous_secret"],
        previous_expires_at=row["previous_expires_at"],
    )


def _target(row: Mapping[str, Any]) -> WebhookTarget:
    return WebhookTarget(
        id=str(row["id"]),
        event_id=str(row["event_id"]),
        endpoint_id=str(row["endpoint_id"]),
        attempts=int(row["attempts"]),
        created_at=int(row["created_at"]),
        deadline_at=int(row["deadline_at"]),
        payload=str(row["payload"]),
        url=row["url"],
        secrets=_secrets(row),
    )
