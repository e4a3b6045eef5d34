"""Objects in an S3-compatible store: the object layer of the S3 artifact backend.

What the S3 store writes through (its filesystem twin's ``objects.py`` is the directory-fd
primitives).

:class:`S3ObjectStore` does what the artifact store needs from a bucket, under one key
prefix, and nothing more: put an object (one PUT, or a multipart upload for an object
larger than one part, aborted when anything fails, cancellation included), get one as a
bounded stream, head, delete, list by prefix, presign a GET, check the bucket (readiness),
and find and abort the incomplete multipart uploads a killed process left behind. An
object is visible only once complete: a PUT is atomic and a multipart upload becomes an
object only when completed.

Every failure is a :class:`~imagebridge.contract.errors.BridgeError` with code ``artifact``
and a stable ``details.reason`` (:mod:`.errors`). It uses aiobotocore (the ``s3``
extra, imported when a store opens; bench/s3_clients.py says why this client); it never
reads configuration: the wiring passes :class:`S3Settings`, credentials included, or none
for the standard AWS chain (environment, shared files and profiles, SSO, web identity,
container and instance metadata).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from imagebridge.artifacts.s3.errors import NOT_FOUND, store_error
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.crash_points import crash_point

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

__all__ = [
    "MAX_PARTS",
    "MAX_PART_SIZE",
    "MIN_PART_SIZE",
    "AddressingStyle",
    "IncompleteUpload",
    "ObjectInfo",
    "ObjectStream",
    "S3Credentials",
    "S3ObjectStore",
    "S3Settings",
]

MIN_PART_SIZE = 5 * 1024 * 1024
"""S3's smallest part (every part but the last)."""
MAX_PART_SIZE = 5 * 1024 * 1024 * 1024
MAX_PARTS = 10_000
AddressingStyle = Literal["auto", "path", "virtual"]
_SUGGESTION = "Check [artifacts.s3] (endpoint, bucket, credentials) and the object store."


@dataclass(frozen=True, slots=True)
class S3Credentials:
    """Static keys (the wiring reads them from the environment variables the config names)."""

    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class S3Settings:
    """Where the objects live and the bounds of every call (plain values, no config)."""

    bucket: str
    endpoint: str | None = None
    """``None``: AWS itself, from ``region``."""
    region: str = "us-east-1"
    key_prefix: str = ""
    """Prepended to every key (``"bridge/"``); listing and the upload sweep see only it."""
    addressing_style: AddressingStyle = "auto"
    credentials: S3Credentials | None = None
    """``None``: the standard AWS credential chain."""
    part_size_bytes: int = 8 * 1024 * 1024
    """Objects larger than this go up as a multipart upload in parts of this size."""
    connect_timeout_secs: float = 5.0
    read_timeout_secs: float = 30.0
    max_attempts: int = 3
    """Attempts per call, first included (transient errors only; a PUT of a new key is
    idempotent, so a retried one cannot store twice)."""
    max_pool_connections: int = 16


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object; ``key`` is relative to the store's key prefix."""

    key: str
    size: int
    etag: str
    last_modified: float
    content_type: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IncompleteUpload:
    """A multipart upload that was started and neither completed nor aborted."""

    key: str
    upload_id: str
    initiated: float


class ObjectStream:
    """An open GET: :attr:`info`, then the body in chunks; close it (or use ``async with``)."""

    def __init__(self, info: ObjectInfo, body: Any) -> None:
        self.info = info
        self._body = body

    async def chunks(self, chunk_size: int = 1024 * 1024) -> AsyncIterator[bytes]:
        """The body, ``chunk_size`` bytes at a time (the last piece may be shorter)."""
        received = 0
        try:
            async for chunk in self._body.iter_chunks(chunk_size):
                received += len(chunk)
                yield bytes(chunk)
        except BridgeError:
            raise
        except Exception as exc:
            raise store_error(exc, "get").with_suggestion(_SUGGESTION) from exc
        if received != self.info.size:
            raise store_error(ConnectionError("short body"), "get")

    async def read(self, max_bytes: int) -> bytes:
        """The whole body, refused (``artifact``) when larger than ``max_bytes``."""
        if self.info.size > max_bytes:
            raise BridgeError(
                ErrorCode.ARTIFACT,
                "stored object is larger than the configured limit",
                details={"reason": "too_large", "operation": "get", "limit": max_bytes},
            )
        pieces = [chunk async for chunk in self.chunks()]
        return b"".join(pieces)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self._body.close()

    async def __aenter__(self) -> ObjectStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _epoch(value: Any) -> float:
    return float(value.timestamp()) if hasattr(value, "timestamp") else 0.0


@functools.cache
def _data_loader() -> Any:
    """botocore's loader of service models, one per process (it caches what it parses)."""
    from botocore.loaders import create_loader

    return create_loader()


def _session() -> Any:
    """A fresh aiobotocore session (its own credentials and configuration) on the process's one
    loader: a session of its own parses the S3 service model again, about a second of CPU on
    the event loop for every store opened (a migration opens two; the tests open hundreds)."""
    from aiobotocore.session import get_session

    session = get_session()
    session.register_component("data_loader", _data_loader())
    return session


class S3ObjectStore:
    """Objects under ``settings.key_prefix`` in ``settings.bucket``; open before use.

    ``async with S3ObjectStore(settings) as store: ...`` (or :meth:`open` / :meth:`close`).
    One store holds one HTTP connection pool; it is safe to share between tasks.
    """

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self._prefix = settings.key_prefix
        self._client: S3Client | None = None
        self._exit: contextlib.AsyncExitStack | None = None
        self._opening = asyncio.Lock()

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        async with self._opening:
            if self._client is None:
                await self._open()

    async def _open(self) -> None:
        try:
            from aiobotocore.config import AioConfig
        except ImportError as exc:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "the S3 artifact backend needs the s3 extra: pip install 'imagebridge[s3]'",
                details={"field": "artifacts.backend"},
            ) from exc
        settings = self.settings
        config = AioConfig(
            signature_version="s3v4",
            s3={"addressing_style": settings.addressing_style},
            connect_timeout=settings.connect_timeout_secs,
            read_timeout=settings.read_timeout_secs,
            retries={"max_attempts": settings.max_attempts, "mode": "standard"},
            max_pool_connections=settings.max_pool_connections,
            # CRC32 trailers are not understood by every S3-compatible store; SigV4 and
            # the ETag already protect the bytes.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        creds = settings.credentials
        stack = contextlib.AsyncExitStack()
        try:
            client = await stack.enter_async_context(
                _session().create_client(
                    "s3",
                    endpoint_url=settings.endpoint,
                    region_name=settings.region,
                    config=config,
                    aws_access_key_id=creds.access_key_id if creds else None,
                    aws_secret_access_key=creds.secret_access_key if creds else None,
                    aws_session_token=creds.session_token if creds else None,
                )
            )
        except BaseException as exc:
            await stack.aclose()
            raise store_error(exc, "open").with_suggestion(_SUGGESTION) from exc
        self._client, self._exit = client, stack

    async def close(self) -> None:
        stack, self._client, self._exit = self._exit, None, None
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> S3ObjectStore:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def _s3(self) -> S3Client:
        if self._client is None:
            raise BridgeError(ErrorCode.INTERNAL, "the S3 object store is not open")
        return self._client

    def _key(self, key: str) -> str:
        if not key or key.startswith("/") or "\x00" in key or len(key.encode()) > 900:
            raise BridgeError(
                ErrorCode.ARTIFACT, "object key is invalid", details={"reason": "invalid_key"}
            )
        return self._prefix + key

    @contextlib.asynccontextmanager
    async def _call(self, operation: str) -> AsyncIterator[None]:
        if self._client is None:
            await self.open()  # opened on first use (the wired store is built synchronously)
        try:
            yield
        except BridgeError:
            raise
        except Exception as exc:
            raise store_error(exc, operation).with_suggestion(_SUGGESTION) from exc

    # -- objects -----------------------------------------------------------------------

    async def check(self) -> None:
        """Raise unless the bucket answers to these credentials (readiness)."""
        async with self._call("check"):
            await self._s3.head_bucket(Bucket=self.settings.bucket)

    async def put(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Store ``data`` at ``key`` (replacing any object there); one PUT up to a part."""
        if len(data) > self.settings.part_size_bytes:
            view = memoryview(data)
            size = self.settings.part_size_bytes
            return await self.put_stream(
                key,
                _slices(view, size),
                content_type=content_type,
                metadata=metadata,
            )
        full = self._key(key)
        async with self._call("put"):
            answer = await self._s3.put_object(
                Bucket=self.settings.bucket,
                Key=full,
                Body=data,
                ContentType=content_type,
                Metadata=dict(metadata or {}),
            )
        return ObjectInfo(
            key=key,
            size=len(data),
            etag=str(answer.get("ETag", "")),
            last_modified=time.time(),
            content_type=content_type,
            metadata=dict(metadata or {}),
        )

    async def put_stream(
        self,
        key: str,
        chunks: AsyncIterable[bytes | memoryview],
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Store the concatenated ``chunks`` as one multipart upload of part-size parts.

        Holds at most one part in memory. Any failure (the source's included, and
        cancellation) aborts the upload, so no part stays stored; the object exists only
        once the upload completed. Zero bytes are refused (use :meth:`put`).
        """
        full = self._key(key)
        bucket = self.settings.bucket
        part_size = self.settings.part_size_bytes
        upload_id = await self._start_upload(key, content_type, metadata)
        parts: list[dict[str, Any]] = []
        total = 0
        try:
            buffer = bytearray()
            async for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    if not buffer and len(view) >= part_size:  # a whole part: one copy
                        total += await self._upload_part(
                            full, upload_id, parts, bytes(view[:part_size])
                        )
                        view = view[part_size:]
                        continue
                    take = min(part_size - len(buffer), len(view))
                    buffer += view[:take]
                    view = view[take:]
                    if len(buffer) == part_size:
                        total += await self._upload_part(full, upload_id, parts, bytes(buffer))
                        buffer.clear()
            if buffer or not parts:
                if not buffer:
                    raise BridgeError(
                        ErrorCode.ARTIFACT,
                        "an empty object cannot be a multipart upload",
                        details={"reason": "invalid_object"},
                    )
                total += await self._upload_part(full, upload_id, parts, bytes(buffer))
            del buffer
            async with self._call("put"):
                answer = await self._s3.complete_multipart_upload(
                    Bucket=bucket,
                    Key=full,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": parts},  # type: ignore[typeddict-item]
                )
        except BaseException:
            await asyncio.shield(self._abort_quietly(key, upload_id))
            raise
        etag = str(answer.get("ETag") or "")
        if not etag:  # some stores (Ceph RGW 16) leave it out of the completion answer
            stored = await self.head(key)
            etag = stored.etag if stored is not None else ""
        return ObjectInfo(
            key=key,
            size=total,
            etag=etag,
            last_modified=time.time(),
            content_type=content_type,
            metadata=dict(metadata or {}),
        )

    async def _start_upload(
        self, key: str, content_type: str, metadata: Mapping[str, str] | None
    ) -> str:
        """A new multipart upload's id.

        Cancelled while the store is creating it, the upload may exist already with no one
        knowing its id: wait for the store's answer (bounded by the client's timeouts) and
        abort what it made, so a cancellation leaves no upload behind at any moment.
        """

        async def create() -> str:
            async with self._call("put"):
                started = await self._s3.create_multipart_upload(
                    Bucket=self.settings.bucket,
                    Key=self._key(key),
                    ContentType=content_type,
                    Metadata=dict(metadata or {}),
                )
            return str(started["UploadId"])

        creating = asyncio.ensure_future(create())
        try:
            return await asyncio.shield(creating)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await self._abort_quietly(key, await creating)
            raise

    async def _upload_part(
        self, full: str, upload_id: str, parts: list[dict[str, Any]], body: bytes
    ) -> int:
        number = len(parts) + 1
        if number > MAX_PARTS:
            raise BridgeError(
                ErrorCode.ARTIFACT,
                "object is larger than the multipart upload limit of this part size",
                details={"reason": "too_large", "operation": "put"},
            )
        async with self._call("put"):
            answer = await self._s3.upload_part(
                Bucket=self.settings.bucket,
                Key=full,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
            )
        parts.append({"PartNumber": number, "ETag": answer["ETag"]})
        crash_point("s3.part_uploaded")
        return len(body)

    async def _abort_quietly(self, key: str, upload_id: str) -> None:
        """Best effort: a failed abort is left to the stale-upload sweep (:mod:`.leftovers`)."""
        with contextlib.suppress(Exception):
            await self.abort_upload(key, upload_id)

    async def get(self, key: str) -> ObjectStream:
        """Open ``key`` for reading; ``artifact`` with reason ``not_found`` when absent."""
        full = self._key(key)
        async with self._call("get"):
            answer = await self._s3.get_object(Bucket=self.settings.bucket, Key=full)
        info = ObjectInfo(
            key=key,
            size=int(answer.get("ContentLength", 0)),
            etag=str(answer.get("ETag", "")),
            last_modified=_epoch(answer.get("LastModified")),
            content_type=answer.get("ContentType"),
            metadata=dict(answer.get("Metadata", {})),
        )
        return ObjectStream(info, answer["Body"])

    async def get_bytes(self, key: str, max_bytes: int) -> bytes | None:
        """The whole object at ``key``; ``None`` when there is none or it is larger than
        ``max_bytes`` (a bounded read of a small object: a marker, a sidecar, an image)."""
        try:
            stream = await self.get(key)
        except BridgeError as error:
            if error.details.get("reason") == NOT_FOUND:
                return None
            raise
        async with stream:
            if stream.info.size > max_bytes:
                return None
            return await stream.read(max_bytes)

    async def head(self, key: str) -> ObjectInfo | None:
        """The object's description, or ``None`` when there is none at ``key``."""
        full = self._key(key)
        try:
            async with self._call("head"):
                answer = await self._s3.head_object(Bucket=self.settings.bucket, Key=full)
        except BridgeError as error:
            if error.details.get("reason") == NOT_FOUND:
                return None
            raise
        return ObjectInfo(
            key=key,
            size=int(answer.get("ContentLength", 0)),
            etag=str(answer.get("ETag", "")),
            last_modified=_epoch(answer.get("LastModified")),
            content_type=answer.get("ContentType"),
            metadata=dict(answer.get("Metadata", {})),
        )

    async def delete(self, key: str) -> None:
        """Remove ``key``; removing an absent object is not an error."""
        full = self._key(key)
        async with self._call("delete"):
            await self._s3.delete_object(Bucket=self.settings.bucket, Key=full)

    async def list_objects(self, prefix: str = "", *, limit: int) -> list[ObjectInfo]:
        """Up to ``limit`` objects whose key starts with ``prefix``, in key order."""
        found: list[ObjectInfo] = []
        token: str | None = None
        full_prefix = self._prefix + prefix
        while len(found) < limit:
            page_size = min(1000, limit - len(found))
            args: dict[str, Any] = {
                "Bucket": self.settings.bucket,
                "Prefix": full_prefix,
                "MaxKeys": page_size,
            }
            if token:
                args["ContinuationToken"] = token
            async with self._call("list"):
                page = await self._s3.list_objects_v2(**args)
            for item in page.get("Contents", []):
                found.append(
                    ObjectInfo(
                        key=item["Key"][len(self._prefix) :],
                        size=int(item.get("Size", 0)),
                        etag=str(item.get("ETag", "")),
                        last_modified=_epoch(item.get("LastModified")),
                    )
                )
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                break
        return found[:limit]

    async def presign_get(self, key: str, expires_secs: int) -> str:
        """A URL that GETs ``key`` without credentials until ``expires_secs`` from now."""
        if not 1 <= expires_secs <= 7 * 24 * 3600:
            raise BridgeError(
                ErrorCode.ARTIFACT,
                "presigned URL lifetime must be between 1 second and 7 days",
                details={"reason": "invalid_expiry"},
            )
        full = self._key(key)
        async with self._call("presign"):
            return await self._s3.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.settings.bucket, "Key": full},
                ExpiresIn=expires_secs,
            )

    # -- crash leftovers ---------------------------------------------------------------

    async def incomplete_uploads(self, *, limit: int) -> list[IncompleteUpload]:
        """Up to ``limit`` multipart uploads under the key prefix not completed or aborted."""
        found: list[IncompleteUpload] = []
        markers: dict[str, str] = {}
        while len(found) < limit:
            args: dict[str, Any] = {
                "Bucket": self.settings.bucket,
                "Prefix": self._prefix,
                "MaxUploads": min(1000, limit - len(found)),
                **markers,
            }
            async with self._call("list"):
                page = await self._s3.list_multipart_uploads(**args)
            for upload in page.get("Uploads", []):
                found.append(
                    IncompleteUpload(
                        key=upload["Key"][len(self._prefix) :],
                        upload_id=upload["UploadId"],
                        initiated=_epoch(upload.get("Initiated")),
                    )
                )
            if not page.get("IsTruncated"):
                break
            markers = {
                "KeyMarker": page.get("NextKeyMarker", ""),
                "UploadIdMarker": page.get("NextUploadIdMarker", ""),
            }
        return found[:limit]

    async def abort_upload(self, key: str, upload_id: str) -> bool:
        """Abort one incomplete upload of ``key``; False when it is gone already (completed,
        or aborted meanwhile by another instance's sweep)."""
        try:
            async with self._call("abort"):
                await self._s3.abort_multipart_upload(
                    Bucket=self.settings.bucket, Key=self._key(key), UploadId=upload_id
                )
        except BridgeError as error:
            if error.details.get("s3_code") == "NoSuchUpload":
                return False
            raise
        return True


async def _slices(view: memoryview, size: int) -> AsyncIterator[memoryview]:
    for start in range(0, len(view), size):
        yield view[start : start + size]
