"""Kept OpenAI responses (``openai_responses``, beside the jobs in their database).

A kept response is a view of the history record that holds its work (issue 39): the record
has the owner, the status, the result (each image as its kept artifact) and the error; the
row here adds only what the record cannot say — the response's own ids, whether it runs in
the background, when it was deleted, and its shape (what the answer repeats of its request,
JSON). The SQL is written once, as conversations (:mod:`imagebridge.storage.webhook_outbox`'s
pattern), and each backend runs them in one transaction: a SQLite file, or a PostgreSQL
schema that any instance reads, so every instance answers for a response made on another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from imagebridge.storage.records import ResponseRecord
from imagebridge.storage.webhook_outbox import Conversation

__all__ = ["ResponseStoreBase"]

T = TypeVar("T")

_COLUMNS = (
    "id, auth_scope, job_id, call_id, message_id, background, created_at, deleted_at, shape_json"
)


def _record(row: Mapping[str, Any]) -> ResponseRecord:
    deleted = row["deleted_at"]
    return ResponseRecord(
        id=str(row["id"]),
        auth_scope=str(row["auth_scope"]),
        job_id=str(row["job_id"]),
        call_id=str(row["call_id"]),
        message_id=str(row["message_id"]),
        background=bool(row["background"]),
        created_at=int(row["created_at"]),
        shape_json=str(row["shape_json"]),
        deleted_at=int(deleted) if deleted is not None else None,
    )


class ResponseStoreBase:
    """:class:`~imagebridge.storage.interfaces.ResponseStore` over a backend's driver."""

    _table = "openai_responses"

    async def _converse(self, conversation: Conversation[T]) -> T:
        raise NotImplementedError

    async def _rows(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        def one() -> Conversation[list[dict[str, Any]]]:
            rows = yield (sql, params)
            return rows

        return await self._converse(one())

    async def save(self, record: ResponseRecord) -> ResponseRecord:
        """Keep ``record``; when its history record already has a response (a retry that
        joined it), that response instead, so a retried create answers the same ids."""
        table = self._table
        params = {
            "id": record.id,
            "scope": record.auth_scope,
            "job": record.job_id,
            "call": record.call_id,
            "message": record.message_id,
            "background": record.background,
            "created": record.created_at,
            "shape": record.shape_json,
        }

        def conversation() -> Conversation[ResponseRecord]:
            yield (
                f"INSERT INTO {table} (id, auth_scope, job_id, call_id, message_id, "  # noqa: S608
                "background, created_at, shape_json) VALUES (:id, :scope, :job, :call, "
                ":message, :background, :created, :shape) ON CONFLICT (job_id) DO NOTHING",
                params,
            )
            rows = yield (
                f"SELECT {_COLUMNS} FROM {table} WHERE job_id = :job",  # noqa: S608
                {"job": record.job_id},
            )
            return _record(rows[0])

        return await self._converse(conversation())

    async def get(self, scope: str, response_id: str) -> ResponseRecord | None:
        """The response ``response_id`` of ``scope`` (``None``: absent, another owner's or
        deleted)."""
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM {self._table} "  # noqa: S608
            "WHERE id = :id AND auth_scope = :scope AND deleted_at IS NULL",
            {"id": response_id, "scope": scope},
        )
        return _record(rows[0]) if rows else None

    async def by_call(self, scope: str, call_id: str) -> ResponseRecord | None:
        """The response of ``scope`` whose ``image_generation_call`` is ``call_id``."""
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM {self._table} "  # noqa: S608
            "WHERE auth_scope = :scope AND call_id = :call AND deleted_at IS NULL",
            {"call": call_id, "scope": scope},
        )
        return _record(rows[0]) if rows else None

    async def by_job(self, job_id: str) -> ResponseRecord | None:
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM {self._table} WHERE job_id = :job",  # noqa: S608
            {"job": job_id},
        )
        return _record(rows[0]) if rows else None

    async def delete(self, scope: str, response_id: str, *, now: int) -> bool:
        """Mark the response deleted (its history record stays); ``False``: not found."""

        def conversation() -> Conversation[bool]:
            rows = yield (
                f"UPDATE {self._table} SET deleted_at = :now "  # noqa: S608
                "WHERE id = :id AND auth_scope = :scope AND deleted_at IS NULL RETURNING id",
                {"id": response_id, "scope": scope, "now": now},
            )
            return bool(rows)

        return await self._converse(conversation())

    async def forget(self, response_id: str) -> None:
        """Remove a response whose work never started (its job was not created)."""
        await self._rows(
            f"DELETE FROM {self._table} WHERE id = :id",  # noqa: S608
            {"id": response_id},
        )
