"""One suite of artifact-store behaviour, run on every backend (``ArtifactBackend``).

The filesystem store (``AsyncArtifactStore``) and the S3 store (``S3ArtifactStore`` on the
real Ceph RADOS Gateway of ``scripts/s3-server``) must answer alike: publication and owner
scoping, options that store nothing, altered bytes that are never served nor touched,
sidecars attached once and verified, thumbnails, retention by age and count, repair of
lost images and lost sidecars, and crash leftovers removed only after the grace. Each
backend supplies how to alter its bytes behind the store's back (``Harness``); what only
one backend has lives in test_store.py and test_s3_store.py.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imagebridge.artifacts.async_store import AsyncArtifactStore
from imagebridge.artifacts.backend import ArtifactBackend, Published
from imagebridge.artifacts.s3 import S3Credentials, S3ObjectStore, S3Settings
from imagebridge.artifacts.s3_store import S3ArtifactStore
from imagebridge.artifacts.store import ArtifactStore
from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.ids import uuid7
from imagebridge.imaging.inspect import inspect_image
from tests.artifacts.images import jpeg, png
from tests.support.s3 import S3Server

OWNER = "anonymous-local"
OTHER = "bearer:" + "ab" * 32
NOT_FOUND = "artifact was not found or is invalid"
GRACE = 3600

Alter = Callable[[Published], Awaitable[None]]
Clock = Callable[[], float] | None


@dataclass
class Harness:
    """A backend's store and the ways to change its bytes behind the store's back."""

    make: Callable[[Clock], ArtifactBackend]
    replace_image: Alter
    lose_image: Alter
    lose_sidecar: Alter
    leave_leftover: Callable[[], Awaitable[None]]

    @property
    def store(self) -> ArtifactBackend:
        return self.make(None)


def filesystem_harness(root: Path) -> Harness:
    def make(clock: Clock) -> ArtifactBackend:
        return AsyncArtifactStore(ArtifactStore(root, clock=clock or time.time))

    async def replace_image(published: Published) -> None:
        (root / published.name).write_bytes(png(3, 3))

    async def lose_image(published: Published) -> None:
        (root / published.name).unlink()

    async def lose_sidecar(published: Published) -> None:
        parent = published.name.rpartition("/")[0]
        sidecar = f"metadata-{published.id}.json"
        (root / parent / sidecar if parent else root / sidecar).unlink()

    async def leave_leftover() -> None:
        (root / f".imagegen-bridge-tmp-{'0' * 24}").write_bytes(b"half")

    return Harness(make, replace_image, lose_image, lose_sidecar, leave_leftover)


def s3_harness(objects: S3ObjectStore) -> Harness:
    def make(clock: Clock) -> ArtifactBackend:
        return S3ArtifactStore(objects, clock=clock or time.time)

    async def replace_image(published: Published) -> None:
        await objects.put(f"images/{published.id}/{published.name}", png(3, 3))

    async def lose_image(published: Published) -> None:
        await objects.delete(f"images/{published.id}/{published.name}")

    async def lose_sidecar(published: Published) -> None:
        await objects.delete(f"metadata/{published.id}.json")

    async def leave_leftover() -> None:
        stray = str(uuid7())
        await objects.put(f"images/{stray}/image-{stray}.png", png(2, 2))

    return Harness(make, replace_image, lose_image, lose_sidecar, leave_leftover)


@pytest.fixture(params=["filesystem", pytest.param("s3", marks=pytest.mark.s3)])
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    if request.param == "filesystem":
        yield filesystem_harness(tmp_path / "artifacts")
        return
    server: S3Server = request.getfixturevalue("s3_server")
    prefix: str = request.getfixturevalue("s3_prefix")
    settings = S3Settings(
        bucket=server.bucket,
        endpoint=server.endpoint,
        region=server.region,
        key_prefix=prefix,
        addressing_style="path",
        credentials=S3Credentials(server.access_key_id, server.secret_access_key),
    )
    async with S3ObjectStore(settings) as objects:
        yield s3_harness(objects)


async def publish(store: ArtifactBackend, data: bytes | None = None, **options: Any) -> Published:
    options.setdefault("expected_format", OutputFormat.PNG)
    options.setdefault("owner", OWNER)
    return await store.publish(png(2, 2) if data is None else data, **options)


async def artifact_error(call: Awaitable[object]) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        await call
    assert caught.value.code is ErrorCode.ARTIFACT
    return caught.value


async def test_an_artifact_reads_back_only_for_its_owner(harness: Harness) -> None:
    store = harness.store
    image = png(2, 3)
    published = await publish(store, image, filename_prefix="owned")
    assert published.name == f"owned-{published.id}.png"
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


async def test_refused_publications_store_nothing(harness: Harness) -> None:
    store = harness.store
    await artifact_error(publish(store, jpeg(2, 2), expected_format=OutputFormat.PNG))
    await artifact_error(publish(store, b"not an image"))
    await artifact_error(publish(store, owner=""))
    await artifact_error(publish(store, directory="../up"))
    await artifact_error(publish(store, filename="x.jpeg"))
    report = await store.repair_orphans(100, apply=False, now=time.time() + GRACE + 60)
    assert (report.scanned, report.stale_temp_files) == (0, 0)


async def test_replaced_bytes_are_never_served_nor_touched(harness: Harness) -> None:
    store = harness.store
    published = await publish(store, directory="d")
    await harness.replace_image(published)
    assert (await artifact_error(store.read(published.id, OWNER))).message == NOT_FOUND
    repair = await store.repair_orphans(100, apply=True)
    assert (repair.scanned, repair.repaired, repair.skipped) == (1, 0, 1)
    cleanup = await store.cleanup(now=time.time() + 10**6, max_age_secs=0)
    assert (cleanup.deleted, cleanup.skipped) == (0, 1)


async def test_a_sidecar_attaches_once_and_is_verified(harness: Harness) -> None:
    store = harness.store
    published = await publish(store, directory="d")
    name = await store.attach_metadata(published.id, published.name, {"prompt": "fox"})
    assert name == f"d/metadata-{published.id}.json"
    assert await store.read_sidecar(published.id, OWNER) == {"prompt": "fox"}
    assert (await store.read(published.id, OWNER)).sidecar_name == name
    await artifact_error(store.attach_metadata(published.id, published.name, {"again": 1}))
    await artifact_error(store.attach_metadata(published.id, "other.png", {"x": 1}))
    for bad in (b"[1]", b"not json", b"x" * (1024 * 1024 + 1)):
        other = await publish(store)
        await artifact_error(store.attach_metadata(other.id, other.name, bad))
    plain = await publish(store)
    assert await store.read_sidecar(plain.id, OWNER) is None


async def test_delete_removes_an_owned_artifact_and_nothing_else(harness: Harness) -> None:
    store = harness.store
    published = await publish(store, directory="d")
    await store.attach_metadata(published.id, published.name, {"prompt": "fox"})
    kept = await publish(store)
    await artifact_error(store.delete(published.id, OTHER))  # another owner's: not found
    await artifact_error(store.delete("019f0000-0000-7000-8000-000000000000", OWNER))
    assert (await store.read(published.id, OWNER)).id == published.id
    await store.delete(published.id, OWNER)
    for call in (
        store.read(published.id, OWNER),
        store.read_sidecar(published.id, OWNER),
        store.thumbnail(published.id, OWNER, 64),
        store.delete(published.id, OWNER),
    ):
        assert (await artifact_error(call)).message == NOT_FOUND
    assert (await store.read(kept.id, OWNER)).id == kept.id
    # nothing left behind: no marker, and no object or file a sweep would find
    report = await store.repair_orphans(100, apply=False, now=time.time() + GRACE + 60)
    assert (report.scanned, report.healthy, report.stale_temp_files) == (1, 1, 0)
    # altered bytes are never touched: not found, and still there for the operator
    altered = await publish(store)
    await harness.replace_image(altered)
    await artifact_error(store.delete(altered.id, OWNER))
    repair = await store.repair_orphans(100, apply=False)
    assert (repair.scanned, repair.skipped) == (2, 1)


async def test_thumbnails_come_from_verified_owned_artifacts(harness: Harness) -> None:
    store = harness.store
    published = await publish(store, png(400, 200, (255, 0, 0, 255)))
    info = inspect_image(await store.thumbnail(published.id, OWNER, 64))
    assert info.format is OutputFormat.PNG and (info.width, info.height) == (64, 32)
    await artifact_error(store.thumbnail(published.id, OTHER, 64))
    with pytest.raises(BridgeError) as caught:
        await store.thumbnail(published.id, OWNER, 16)
    assert caught.value.code is ErrorCode.INVALID_REQUEST


async def test_cleanup_honours_age_count_and_scan_bound(harness: Harness) -> None:
    ticks = iter(range(1000, 2000, 10))
    store = harness.make(lambda: float(next(ticks)))
    published = [await publish(store) for _ in range(4)]  # created at 1000 … 1030
    await store.attach_metadata(published[0].id, published[0].name, {"a": 1})
    report = await store.cleanup(now=1025, max_age_secs=10)  # removes 1000 and 1010
    assert (report.scanned, report.deleted, report.skipped) == (4, 2, 0)
    report = await store.cleanup(now=1025, max_age_secs=10_000, max_artifacts=1)
    assert (report.scanned, report.deleted) == (2, 1)
    assert (await store.read(published[3].id, OWNER)).id == published[3].id
    for gone in published[:3]:
        await artifact_error(store.read(gone.id, OWNER))
    bounded = await store.cleanup(now=1025, max_age_secs=10_000, max_scan_entries=1)
    assert (bounded.scanned, bounded.scan_limit_reached) == (1, False)


async def test_repair_removes_lost_images_and_clears_lost_sidecars(harness: Harness) -> None:
    store = harness.store
    lost = await publish(store)
    bare = await publish(store, directory="d")
    await store.attach_metadata(bare.id, bare.name, {"a": 1})
    await harness.lose_image(lost)
    await harness.lose_sidecar(bare)
    await publish(store)

    audit = await store.repair_orphans(100, apply=False)
    assert (audit.scanned, audit.healthy, audit.orphaned_records, audit.missing_sidecars) == (
        3,
        1,
        1,
        1,
    )
    assert audit.repaired == 0
    assert (await store.repair_orphans(100, apply=True)).repaired == 2
    assert (await store.read(bare.id, OWNER)).sidecar_name is None
    again = await store.repair_orphans(100, apply=False)
    assert (again.scanned, again.healthy, again.orphaned_records) == (2, 2, 0)


async def test_crash_leftovers_are_removed_only_after_the_grace(harness: Harness) -> None:
    store = harness.store
    owned = await publish(store)
    await harness.leave_leftover()
    young = await store.cleanup(max_age_secs=10**9, stale_temp_secs=GRACE)
    assert (young.stale_temp_files, young.stale_temp_files_removed) == (0, 0)
    later = time.time() + GRACE + 60
    audit = await store.repair_orphans(100, apply=False, now=later, stale_temp_secs=GRACE)
    assert (audit.healthy, audit.stale_temp_files, audit.stale_temp_files_removed) == (1, 1, 0)
    swept = await store.cleanup(now=later, max_age_secs=10**9, stale_temp_secs=GRACE)
    assert (swept.stale_temp_files, swept.stale_temp_files_removed) == (1, 1)
    final = await store.repair_orphans(100, apply=False, now=later, stale_temp_secs=GRACE)
    assert (final.healthy, final.stale_temp_files) == (1, 0)
    assert (await store.read(owned.id, OWNER)).id == owned.id
