"""The S3 artifact store against a real S3 server: what only an object store has.

The behaviour both backends share (publication, owner scoping, sidecars, thumbnails,
retention, repair, leftovers) is tests/artifacts/test_backends.py, run on both. Here: the
object layout, names that never collide, tampered markers, a changed sidecar object, a
presigned URL of an owned artifact, delete, a marker that cannot be stored, an unreachable
store that is never mistaken for a missing artifact, and a process killed between the
image and its ownership record, whose object the sweep removes once the grace has passed
(not before).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import time
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from imagebridge.artifacts.publication import Publication
from imagebridge.artifacts.records import StoredArtifact
from imagebridge.artifacts.s3 import markers as s3_markers
from imagebridge.artifacts.s3.objects import S3ObjectStore, S3Settings
from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.ids import uuid7
from tests.artifacts.images import png
from tests.support.s3 import S3Server

pytestmark = pytest.mark.s3

OWNER = "anonymous-local"
OTHER = "bearer:" + "ab" * 32
NOT_FOUND = "artifact was not found or is invalid"
GRACE = 3600
DEADLINE_S = 60.0


def settings_for(server: S3Server, prefix: str, **changes: Any) -> S3Settings:
    return server.settings(prefix, **{"connect_timeout_secs": 2.0, "max_attempts": 2, **changes})


@pytest.fixture
async def objects(s3_server: S3Server, s3_prefix: str) -> AsyncIterator[S3ObjectStore]:
    async with S3ObjectStore(settings_for(s3_server, s3_prefix)) as opened:
        yield opened


@pytest.fixture
def store(objects: S3ObjectStore) -> S3ArtifactStore:
    return S3ArtifactStore(objects)


async def publish(
    store: S3ArtifactStore, data: bytes | None = None, **options: Any
) -> StoredArtifact:
    options.setdefault("expected_format", OutputFormat.PNG)
    options.setdefault("owner", OWNER)
    return await store.publish(Publication(png(2, 2) if data is None else data, **options))


async def keys(objects: S3ObjectStore) -> list[str]:
    return [item.key for item in await objects.list_objects(limit=1000)]


async def artifact_error(call: Any) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        await call
    assert caught.value.code is ErrorCode.ARTIFACT
    return caught.value


async def test_a_published_artifact_reads_back_only_for_its_owner(
    store: S3ArtifactStore, objects: S3ObjectStore
) -> None:
    image = png(2, 3)
    published = await publish(store, image, filename_prefix="owned")
    assert published.name == f"owned-{published.id}.png"
    assert await keys(objects) == [
        f"images/{published.id}/{published.name}",
        f"ownership/{published.id}.json",
    ]
    head = await objects.head(f"images/{published.id}/{published.name}")
    assert head is not None and head.content_type == "image/png"

    content = await store.read(published.id, OWNER)
    assert (content.id, content.name, content.data) == (published.id, published.name, image)
    assert (content.info.width, content.info.height) == (2, 3)
    assert (await store.read(published.id.upper(), OWNER)).id == published.id
    assert (await store.read(published.id, None)).id == published.id
    for bad_id in ("019f0000-0000-7000-8000-000000000000", "not-a-uuid", "../../x"):
        assert (await artifact_error(store.read(bad_id, OWNER))).message == NOT_FOUND
    foreign = await artifact_error(store.read(published.id, OTHER))
    unknown = await artifact_error(store.read("019f0000-0000-7000-8000-000000000000", OTHER))
    assert foreign.to_dict() == unknown.to_dict()


async def test_names_never_collide_and_nested_names_are_kept(store: S3ArtifactStore) -> None:
    first = await publish(store, directory="batch/one", filename="fox")
    second = await publish(store, directory="batch/one", filename="fox.png")
    assert first.name == second.name == "batch/one/fox.png" and first.id != second.id
    assert (await store.read(first.id, OWNER)).name == "batch/one/fox.png"
    assert (await store.read(second.id, OWNER)).id == second.id


@pytest.mark.parametrize(
    "change",
    [
        lambda m: {**m, "extra": 1},
        lambda m: {**m, "sha256": "0" * 64},
        lambda m: {**m, "name": "../escape.png"},
        lambda m: {**m, "sidecar_name": "x.json"},
    ],
)
async def test_a_tampered_marker_is_not_found(
    store: S3ArtifactStore, objects: S3ObjectStore, change: Any
) -> None:
    published = await publish(store)
    key = f"ownership/{published.id}.json"
    async with await objects.get(key) as stream:
        marker = json.loads(await stream.read(4096))
    await objects.put(key, json.dumps(change(marker)).encode())
    assert (await artifact_error(store.read(published.id, None))).message == NOT_FOUND


async def test_a_replaced_image_is_not_found(
    store: S3ArtifactStore, objects: S3ObjectStore
) -> None:
    published = await publish(store)
    await objects.put(f"images/{published.id}/{published.name}", png(3, 3))
    assert (await artifact_error(store.read(published.id, OWNER))).message == NOT_FOUND


async def test_a_changed_sidecar_object_makes_the_artifact_invalid(
    store: S3ArtifactStore, objects: S3ObjectStore
) -> None:
    published = await publish(store, directory="d")
    await store.attach_metadata(published.id, published.name, {"prompt": "fox"})
    assert await keys(objects) == [
        f"images/{published.id}/d/{published.name.rpartition('/')[2]}",
        f"metadata/{published.id}.json",
        f"ownership/{published.id}.json",
    ]
    await objects.put(f"metadata/{published.id}.json", b'{"prompt": "changed"}')
    assert (await artifact_error(store.read(published.id, OWNER))).message == NOT_FOUND


async def test_a_presigned_url_serves_an_owned_artifact_without_credentials(
    store: S3ArtifactStore,
) -> None:
    image = png(5, 5)
    published = await publish(store, image)
    url = await store.presigned_url(published.id, OWNER, 60)

    def fetch() -> bytes:
        with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310 - a test URL
            return bytes(answer.read())

    assert await asyncio.to_thread(fetch) == image
    await artifact_error(store.presigned_url(published.id, OTHER, 60))


async def test_delete_removes_every_object_of_the_artifact(
    store: S3ArtifactStore, objects: S3ObjectStore
) -> None:
    published = await publish(store)
    await store.attach_metadata(published.id, published.name, {"a": 1})
    kept = await publish(store)
    await artifact_error(store.delete(published.id, OTHER))
    await store.delete(published.id, OWNER)
    assert await keys(objects) == [
        f"images/{kept.id}/{kept.name}",
        f"ownership/{kept.id}.json",
    ]
    await artifact_error(store.read(published.id, OWNER))


async def test_an_object_no_marker_names_is_swept_only_after_the_grace(
    store: S3ArtifactStore, objects: S3ObjectStore
) -> None:
    owned = await publish(store)
    stray_id = str(uuid7())
    await objects.put(f"images/{stray_id}/image-{stray_id}.png", png(2, 2))
    await objects.put(f"metadata/{owned.id}.json", b"{}")  # a sidecar the marker never named
    young = await store.cleanup(max_age_secs=10**9, stale_temp_secs=GRACE)
    assert (young.stale_temp_files, young.stale_temp_files_removed) == (0, 0)
    audit = await store.repair_orphans(
        100, apply=False, now=time.time() + GRACE + 60, stale_temp_secs=GRACE
    )
    assert (audit.stale_temp_files, audit.stale_temp_files_removed) == (2, 0)
    swept = await store.cleanup(
        now=time.time() + GRACE + 60, max_age_secs=10**9, stale_temp_secs=GRACE
    )
    assert (swept.stale_temp_files, swept.stale_temp_files_removed) == (2, 2)
    assert await keys(objects) == [
        f"images/{owned.id}/{owned.name}",
        f"ownership/{owned.id}.json",
    ]


_KILLED_PUBLISHER = textwrap.dedent(
    """
    import asyncio, json, sys
    from imagebridge.artifacts.s3.objects import S3Credentials, S3ObjectStore, S3Settings
    from imagebridge.artifacts.publication import Publication
    from imagebridge.artifacts.s3 import markers
    from imagebridge.artifacts.s3.store import S3ArtifactStore
    from tests.artifacts.images import png

    async def main():
        s = json.loads(sys.argv[1])
        settings = S3Settings(
            bucket=s["bucket"], endpoint=s["endpoint"], region=s["region"],
            key_prefix=s["prefix"], addressing_style="path",
            credentials=S3Credentials(s["key"], s["secret"]),
        )

        async def stop_before_the_marker(objects, marker):
            print("image stored", flush=True)
            await asyncio.Event().wait()

        markers.put_marker = stop_before_the_marker

        async with S3ObjectStore(settings) as objects:
            store = S3ArtifactStore(objects)
            await store.publish(
                Publication(png(2, 2), expected_format="png", owner="anonymous-local")
            )

    asyncio.run(main())
    """
)


async def test_a_process_killed_between_the_image_and_its_marker_leaves_nothing_served(
    s3_server: S3Server, s3_prefix: str, store: S3ArtifactStore, objects: S3ObjectStore
) -> None:
    spec = {
        "bucket": s3_server.bucket,
        "endpoint": s3_server.endpoint,
        "region": s3_server.region,
        "prefix": s3_prefix,
        "key": s3_server.access_key_id,
        "secret": s3_server.secret_access_key,
    }
    publisher = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _KILLED_PUBLISHER,
        json.dumps(spec),
        stdout=asyncio.subprocess.PIPE,
        cwd=os.getcwd(),
    )
    try:
        assert publisher.stdout is not None
        line = await asyncio.wait_for(publisher.stdout.readline(), DEADLINE_S)
        assert line.strip() == b"image stored"
    finally:
        publisher.send_signal(signal.SIGKILL)
        await asyncio.wait_for(publisher.wait(), DEADLINE_S)

    [left] = await keys(objects)
    assert left.startswith("images/")
    stray_id = left.split("/")[1]
    assert (await artifact_error(store.read(stray_id, None))).message == NOT_FOUND
    report = await store.repair_orphans(100, apply=False)
    assert (report.scanned, report.stale_temp_files) == (0, 0)  # young: may be a live writer
    await store.cleanup(now=time.time() + GRACE + 60, stale_temp_secs=GRACE)
    assert await keys(objects) == []


async def test_an_unreachable_store_is_never_mistaken_for_a_missing_artifact(
    s3_server: S3Server, store: S3ArtifactStore, objects: S3ObjectStore
) -> None:
    published = await publish(store)
    s3_server.halt_gateway()
    try:
        for call in (
            store.read(published.id, OWNER),
            publish(store),
            store.cleanup(),
        ):
            error = await artifact_error(call)
            assert error.details["reason"] == "store_unavailable" and error.retryable
    finally:
        s3_server.resume_gateway()
    assert (await store.read(published.id, OWNER)).id == published.id
    assert len(await keys(objects)) == 2  # the failed publication left nothing behind


async def test_a_marker_that_cannot_be_stored_takes_its_image_or_sidecar_back(
    store: S3ArtifactStore, objects: S3ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = await publish(store)

    async def refused(objects: object, marker: object) -> None:
        raise BridgeError(ErrorCode.ARTIFACT, "object store is unavailable")

    monkeypatch.setattr(s3_markers, "put_marker", refused)
    await artifact_error(publish(store))
    await artifact_error(store.attach_metadata(published.id, published.name, {"a": 1}))
    assert await keys(objects) == [
        f"images/{published.id}/{published.name}",
        f"ownership/{published.id}.json",
    ]
    monkeypatch.undo()
    assert (await store.read(published.id, OWNER)).sidecar_name is None
