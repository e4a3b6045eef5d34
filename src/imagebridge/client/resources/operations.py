"""``client.health``, ``client.artifacts`` and ``client.diagnostics()``.

``client.artifacts.delete(id)`` calls ``DELETE /v1/artifacts/{id}``, an imagebridge
addition (docs/api-decisions.md): a bridge without it (the original) answers 405.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from imagebridge.client._exceptions import error_from_response, protocol_error
from imagebridge.client._models import ArtifactFile
from imagebridge.client._params import query
from imagebridge.client._request import RawResponse, RequestSpec, no_content, path_segment
from imagebridge.client._resource import AsyncAPIResource, SyncAPIResource

__all__ = [
    "Artifacts",
    "AsyncArtifacts",
    "AsyncHealth",
    "Health",
    "diagnostics_spec",
]

_IMAGE_MEDIA = frozenset({"image/png", "image/jpeg", "image/webp"})
_HASH_IN_THREAD_BYTES = 1024 * 1024


def _status(expected: str) -> Any:
    def parse(raw: RawResponse) -> bool:
        try:
            body = json.loads(raw.content)
        except (ValueError, RecursionError):
            body = None
        status = body.get("status") if isinstance(body, dict) else None
        if status == expected:
            return True
        if raw.status_code == 503 and status == "not_ready":
            return False
        if raw.status_code >= 400:
            raise error_from_response(raw.status_code, raw.headers, raw.content, safe=True)
        raise protocol_error(
            "the bridge sent a malformed health answer",
            status_code=raw.status_code,
            headers=raw.headers,
        )

    return parse


def live_spec() -> RequestSpec[bool]:
    return RequestSpec("GET", "/health/live", _status("live"))


def ready_spec() -> RequestSpec[bool]:
    return RequestSpec("GET", "/health/ready", _status("ready"), expected=frozenset({200, 503}))


def _json_object(raw: RawResponse) -> dict[str, Any]:
    try:
        body = json.loads(raw.content)
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict):
        raise protocol_error(
            "the bridge sent malformed diagnostics",
            status_code=raw.status_code,
            headers=raw.headers,
        )
    return body


def diagnostics_spec(
    request_id: str | None, *, extended: bool = False
) -> RequestSpec[dict[str, Any]]:
    path = "/v1/diagnostics/extended" if extended else "/v1/diagnostics"
    return RequestSpec("GET", path, _json_object, request_id=request_id)


def _artifact_parser(artifact_id: str) -> Any:
    def parse(raw: RawResponse) -> ArtifactFile:
        media = raw.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media not in _IMAGE_MEDIA:
            raise protocol_error(
                "the bridge sent an artifact that is not an image",
                status_code=raw.status_code,
                headers=raw.headers,
            )
        etag = raw.headers.get("etag", "").strip().strip('"').lower()
        return ArtifactFile(
            id=artifact_id,
            data=raw.content,
            media_type=media,
            filename=_disposition_filename(raw.headers.get("content-disposition")),
            sha256=etag if len(etag) == 64 else None,
        )

    return parse


def _disposition_filename(value: str | None) -> str | None:
    if not value:
        return None
    marker = 'filename="'
    start = value.find(marker)
    if start == -1:
        return None
    end = value.find('"', start + len(marker))
    name = value[start + len(marker) : end] if end != -1 else None
    return name or None


def verify(artifact: ArtifactFile) -> ArtifactFile:
    """The bytes must hash to the bridge's ``ETag`` (blocking: hashing)."""
    if artifact.sha256 is not None and hashlib.sha256(artifact.data).hexdigest() != artifact.sha256:
        raise protocol_error("artifact bytes do not match the bridge's checksum")
    return artifact


def artifact_spec(artifact_id: str, request_id: str | None) -> RequestSpec[ArtifactFile]:
    return RequestSpec(
        "GET",
        f"/v1/artifacts/{path_segment(artifact_id, 'artifact_id')}",
        _artifact_parser(artifact_id),
        request_id=request_id,
    )


def thumbnail_spec(
    artifact_id: str, edge: int | None, request_id: str | None
) -> RequestSpec[ArtifactFile]:
    return RequestSpec(
        "GET",
        f"/v1/artifacts/{path_segment(artifact_id, 'artifact_id')}/thumbnail",
        _artifact_parser(artifact_id),
        params=query(edge=edge),
        request_id=request_id,
    )


def delete_artifact_spec(artifact_id: str, request_id: str | None) -> RequestSpec[None]:
    return RequestSpec(
        "DELETE",
        f"/v1/artifacts/{path_segment(artifact_id, 'artifact_id')}",
        no_content,
        expected=frozenset({204}),
        request_id=request_id,
    )


class Health(SyncAPIResource):
    def live(self) -> bool:
        """``GET /health/live``: the bridge process is serving."""
        return self._transport.execute(live_spec())

    def ready(self) -> bool:
        """``GET /health/ready``: every provider was ready at the bridge's last probe."""
        return self._transport.execute(ready_spec())


class AsyncHealth(AsyncAPIResource):
    async def live(self) -> bool:
        return await self._transport.execute(live_spec())

    async def ready(self) -> bool:
        return await self._transport.execute(ready_spec())


class Artifacts(SyncAPIResource):
    def get(self, artifact_id: str, *, request_id: str | None = None) -> ArtifactFile:
        """Verified image bytes of an artifact (checked against the ``ETag`` digest)."""
        return verify(self._transport.execute(artifact_spec(artifact_id, request_id)))

    def thumbnail(
        self, artifact_id: str, *, edge: int | None = None, request_id: str | None = None
    ) -> ArtifactFile:
        """A PNG thumbnail fitting ``edge``×``edge`` pixels (32–2048, bridge default 384)."""
        return verify(self._transport.execute(thumbnail_spec(artifact_id, edge, request_id)))

    def delete(self, artifact_id: str, *, request_id: str | None = None) -> None:
        """Delete one's own artifact (its image, sidecar and record) from the bridge."""
        self._transport.execute(delete_artifact_spec(artifact_id, request_id))


class AsyncArtifacts(AsyncAPIResource):
    async def get(self, artifact_id: str, *, request_id: str | None = None) -> ArtifactFile:
        artifact = await self._transport.execute(artifact_spec(artifact_id, request_id))
        return await _verify_async(artifact)

    async def thumbnail(
        self, artifact_id: str, *, edge: int | None = None, request_id: str | None = None
    ) -> ArtifactFile:
        artifact = await self._transport.execute(thumbnail_spec(artifact_id, edge, request_id))
        return await _verify_async(artifact)

    async def delete(self, artifact_id: str, *, request_id: str | None = None) -> None:
        await self._transport.execute(delete_artifact_spec(artifact_id, request_id))


async def _verify_async(artifact: ArtifactFile) -> ArtifactFile:
    if len(artifact.data) < _HASH_IN_THREAD_BYTES:
        return verify(artifact)
    return await asyncio.to_thread(verify, artifact)
