"""One suite of artifact-store behaviour, run on every backend (``ArtifactBackend``).

The filesystem store (``AsyncArtifactStore``) and the S3 store (``S3ArtifactStore`` on the
real Ceph RADOS Gateway of ``scripts/s3-server``) must answer alike: publication, naming and owner
scoping, refused options and images that store nothing (with the same messages), altered
bytes and tampered markers that are never served nor touched, sidecars attached once and
verified, thumbnails, delete, retention by age and count within the scan bound, repair of
lost images and lost sidecars that never touches changed content, and crash leftovers
removed only after the grace. Each backend supplies how to alter its bytes behind the
store's back and how to list everything it holds (``Harness``); what only one backend has
lives in filesystem/test_store.py (whose docstring lists it, and why) and s3/test_store.py.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imagebridge.artifacts.filesystem.markers import OWNERSHIP_DIRECTORY
from imagebridge.artifacts.filesystem.store import ArtifactStore, AsyncArtifactStore
from imagebridge.artifacts.interfaces import ArtifactBackend
from imagebridge.artifacts.publication import Publication
from imagebridge.artifacts.records import StoredArtifact
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.ids import uuid7
from imagebridge.imaging.inspect import inspect_image
from imagebridge.imaging.metadata import embed_metadata, extract_metadata_record
from tests.artifacts.images import jpeg, png
from tests.support.s3 import S3Server

OWNER = "anonymous-local"
OTHER = "bearer:" + "ab" * 32
NOT_FOUND = "artifact was not found or is invalid"
GRACE = 3600

Alter = Callable[[StoredArtifact], Awaitable[None]]
Clock = Callable[[], float] | None
MarkerChange = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Harness:
    """A backend's store and the ways to change its bytes behind the store's back."""

    make: Callable[[Clock], ArtifactBackend]
    replace_image: Alter
    lose_image: Alter
    lose_sidecar: Alter
    leave_leftover: Callable[[], Awaitable[None]]
    edit_marker: Callable[[StoredArtifact, MarkerChange], Awaitable[None]]
    put_invalid_marker: Callable[[str], Awaitable[None]]
    replace_sidecar: Callable[[StoredArtifact, bytes], Awaitable[None]]
    sidecar_exists: Callable[[StoredArtifact], Awaitable[bool]]
    put_unowned: Callable[[], Awaitable[None]]
    unowned_exists: Callable[[], Awaitable[bool]]
    stored: Callable[[], Awaitable[list[str]]]
    """Every file below the root, or every object under the key prefix (markers too)."""

    @property
    def store(self) -> ArtifactBackend:
        return self.make(None)


def filesystem_harness(root: Path) -> Harness:
    def make(clock: Clock) -> ArtifactBackend:
        return AsyncArtifactStore(ArtifactStore(root, clock=clock or time.time))

    async def replace_image(published: StoredArtifact) -> None:
        (root / published.name).write_bytes(png(3, 3))

    async def lose_image(published: StoredArtifact) -> None:
        (root / published.name).unlink()

    async def lose_sidecar(published: StoredArtifact) -> None:
        parent = published.name.rpartition("/")[0]
        sidecar = f"metadata-{published.id}.json"
        (root / parent / sidecar if parent else root / sidecar).unlink()

    async def leave_leftover() -> None:
        (root / f".imagegen-bridge-tmp-{'0' * 24}").write_bytes(b"half")

    def marker_path(published: StoredArtifact) -> Path:
        return root / OWNERSHIP_DIRECTORY / f"{published.id}.json"

    def sidecar_path(published: StoredArtifact) -> Path:
        parent = published.name.rpartition("/")[0]
        sidecar = f"metadata-{published.id}.json"
        return root / parent / sidecar if parent else root / sidecar

    async def edit_marker(published: StoredArtifact, change: MarkerChange) -> None:
        path = marker_path(published)
        path.write_text(json.dumps(change(json.loads(path.read_text()))))

    async def put_invalid_marker(name: str) -> None:
        (root / OWNERSHIP_DIRECTORY / name).write_text("{}")

    async def replace_sidecar(published: StoredArtifact, data: bytes) -> None:
        sidecar_path(published).write_bytes(data)

    async def sidecar_exists(published: StoredArtifact) -> bool:
        return sidecar_path(published).exists()

    async def put_unowned() -> None:
        (root / "unowned.png").write_bytes(png(2, 2))

    async def unowned_exists() -> bool:
        return (root / "unowned.png").exists()

    async def stored() -> list[str]:
        found: list[str] = []
        for dirpath, _dirnames, filenames in os.walk(root):
            found.extend(os.path.relpath(os.path.join(dirpath, f), root) for f in filenames)
        return sorted(found)

    return Harness(
        make,
        replace_image,
        lose_image,
        lose_sidecar,
        leave_leftover,
        edit_marker,
        put_invalid_marker,
        replace_sidecar,
        sidecar_exists,
        put_unowned,
        unowned_exists,
        stored,
    )


def s3_harness(objects: S3ObjectStore) -> Harness:
    def make(clock: Clock) -> ArtifactBackend:
        return S3ArtifactStore(objects, clock=clock or time.time)

    async def replace_image(published: StoredArtifact) -> None:
        await objects.put(f"images/{published.id}/{published.name}", png(3, 3))

    async def lose_image(published: StoredArtifact) -> None:
        await objects.delete(f"images/{published.id}/{published.name}")

    async def lose_sidecar(published: StoredArtifact) -> None:
        await objects.delete(f"metadata/{published.id}.json")

    async def leave_leftover() -> None:
        stray = str(uuid7())
        await objects.put(f"images/{stray}/image-{stray}.png", png(2, 2))

    async def edit_marker(published: StoredArtifact, change: MarkerChange) -> None:
        key = f"ownership/{published.id}.json"
        async with await objects.get(key) as stream:
            marker = json.loads(await stream.read(4096))
        await objects.put(key, json.dumps(change(marker)).encode())

    async def put_invalid_marker(name: str) -> None:
        await objects.put(f"ownership/{name}", b"{}")

    async def replace_sidecar(published: StoredArtifact, data: bytes) -> None:
        await objects.put(f"metadata/{published.id}.json", data)

    async def sidecar_exists(published: StoredArtifact) -> bool:
        return await objects.head(f"metadata/{published.id}.json") is not None

    async def put_unowned() -> None:
        await objects.put("unowned.png", png(2, 2))

    async def unowned_exists() -> bool:
        return await objects.head("unowned.png") is not None

    async def stored() -> list[str]:
        return sorted(item.key for item in await objects.list_objects("", limit=1000))

    return Harness(
        make,
        replace_image,
        lose_image,
        lose_sidecar,
        leave_leftover,
        edit_marker,
        put_invalid_marker,
        replace_sidecar,
        sidecar_exists,
        put_unowned,
        unowned_exists,
        stored,
    )


@pytest.fixture(params=["filesystem", pytest.param("s3", marks=pytest.mark.s3)])
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Harness]:
    if request.param == "filesystem":
        yield filesystem_harness(tmp_path / "artifacts")
        return
    server: S3Server = request.getfixturevalue("s3_server")
    prefix: str = request.getfixturevalue("s3_prefix")
    async with S3ObjectStore(server.settings(prefix)) as objects:
        yield s3_harness(objects)


async def publish(
    store: ArtifactBackend, data: bytes | None = None, **options: Any
) -> StoredArtifact:
    options.setdefault("expected_format", OutputFormat.PNG)
    options.setdefault("owner", OWNER)
    return await store.publish(Publication(png(2, 2) if data is None else data, **options))


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
    assert caught.value.http_status == 422


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


# -- moved from test_store.py, so the filesystem and S3 stores answer alike ------------------


async def test_publishes_verified_artifacts_without_name_reuse(harness: Harness) -> None:
    store = harness.store
    data = png(2, 2)
    first = await publish(store, data, filename_prefix="My portrait")
    second = await publish(store, data, filename_prefix="My portrait")
    assert first.name != second.name
    assert first.name == f"my-portrait-{first.id}.png"
    assert (await store.read(first.id, OWNER)).data == data
    assert first.info == inspect_image(data)
    assert (await publish(store)).name.startswith("image-")
    assert (await publish(store, jpeg(2, 2), expected_format="jpeg")).name.endswith(".jpg")


async def test_rejects_mismatched_effective_format_before_write(harness: Harness) -> None:
    store = harness.store
    error = await artifact_error(publish(store, png(1, 1), expected_format=OutputFormat.JPEG))
    assert error.message == "generated image format does not match the effective request"
    assert await harness.stored() == []


async def test_invalid_images_are_refused_with_an_artifact_error(harness: Harness) -> None:
    store = harness.store
    error = await artifact_error(publish(store, png(2, 2)[:-10]))
    assert error.message == "image payload is malformed or incomplete"
    assert await harness.stored() == []


@pytest.mark.parametrize("owner", ["", "has space", "x" * 257, "tab\t"])
async def test_owner_scope_is_validated(harness: Harness, owner: str) -> None:
    await artifact_error(publish(harness.store, owner=owner))
    assert await harness.stored() == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"filename": "../escape.png"}, "output filename must be a safe component"),
        ({"filename": "a/b.png"}, "output filename must be a safe component"),
        ({"filename": "x.jpg"}, "output filename must be a safe component"),
        ({"directory": "../up"}, "output directory is not a safe relative path"),
        ({"directory": "/etc"}, "output directory is not a safe relative path"),
        ({"directory": ".imagegen-bridge-ownership"}, "output directory is not a safe"),
    ],
)
async def test_direct_store_calls_reject_filename_traversal(
    harness: Harness, options: dict[str, Any], message: str
) -> None:
    error = await artifact_error(publish(harness.store, **options))
    assert error.message.startswith(message)
    assert await harness.stored() == []


async def test_legacy_markers_without_owner_belong_to_the_anonymous_scope(
    harness: Harness,
) -> None:
    store = harness.store
    published = await publish(store)

    def without_owner(marker: dict[str, Any]) -> dict[str, Any]:
        del marker["owner"]
        return marker

    await harness.edit_marker(published, without_owner)
    assert (await store.read(published.id, "anonymous-local")).id == published.id
    await artifact_error(store.read(published.id, OTHER))


@pytest.mark.parametrize(
    "change",
    [
        lambda m: {**m, "extra": 1},
        lambda m: {**m, "version": 2},
        lambda m: {**m, "name": "../escape.png"},
        lambda m: {**m, "sha256": "0" * 64},
        lambda m: {**m, "id": "019f0000-0000-7000-8000-000000000000"},
        lambda m: {**m, "sidecar_name": "x.json"},
        lambda m: {**m, "owner": ""},
    ],
)
async def test_tampered_markers_are_not_found(harness: Harness, change: MarkerChange) -> None:
    store = harness.store
    published = await publish(store)
    await harness.edit_marker(published, change)
    assert (await artifact_error(store.read(published.id, None))).message == NOT_FOUND


async def test_cleanup_deletes_only_verified_bridge_owned_artifacts(harness: Harness) -> None:
    store = harness.make(lambda: 5000.0)
    owned = await publish(store, filename_prefix="owned")
    await harness.put_unowned()
    report = await store.cleanup(now=5001, max_age_secs=0)
    assert (report.scanned, report.deleted, report.skipped) == (1, 1, 0)
    await artifact_error(store.read(owned.id, OWNER))
    assert await harness.unowned_exists()
    assert len(await harness.stored()) == 1  # the unowned file alone: no marker, no image


async def test_cleanup_keeps_young_artifacts_and_honours_max_artifacts(harness: Harness) -> None:
    ticks = iter(range(1000, 2000, 10))
    store = harness.make(lambda: float(next(ticks)))
    published = [await publish(store) for _ in range(4)]  # created at 1000, 1010, 1020, 1030

    async def readable() -> list[bool]:
        found = []
        for artifact in published:
            try:
                await store.read(artifact.id, OWNER)
            except BridgeError:
                found.append(False)
            else:
                found.append(True)
        return found

    report = await store.cleanup(now=1035, max_age_secs=3600)
    assert report.deleted == 0
    report = await store.cleanup(now=1035, max_age_secs=3600, max_artifacts=2)
    assert report.deleted == 2
    assert await readable() == [False, False, True, True]
    report = await store.cleanup(now=1035, max_age_secs=10)  # 1020 is exactly at the cutoff
    assert report.deleted == 1
    assert await readable() == [False, False, False, True]


async def test_cleanup_does_not_delete_an_owned_artifact_after_content_replacement(
    harness: Harness,
) -> None:
    store = harness.store
    owned = await publish(store)
    await harness.replace_image(owned)
    before = await harness.stored()
    report = await store.cleanup(now=10**12, max_age_secs=0)
    assert (report.deleted, report.skipped) == (0, 1)
    assert await harness.stored() == before
    assert (await artifact_error(store.read(owned.id, OWNER))).message == NOT_FOUND


async def test_cleanup_scan_is_bounded(harness: Harness) -> None:
    store = harness.store
    for index in range(3):
        await harness.put_invalid_marker(f"invalid-{index}.json")
    report = await store.cleanup(max_scan_entries=2)
    assert (report.scanned, report.skipped, report.scan_limit_reached) == (2, 2, True)
    await artifact_error(store.cleanup(max_scan_entries=0))


async def test_orphan_repair_is_auditable_and_removes_only_verified_owned_state(
    harness: Harness,
) -> None:
    store = harness.store
    owned = await publish(store, filename_prefix="orphan")
    await store.attach_metadata(owned.id, owned.name, {"prompt": "test"})
    await harness.put_unowned()
    await harness.lose_image(owned)
    with_marker = await harness.stored()
    audit = await store.repair_orphans(10, apply=False)
    assert (audit.scanned, audit.orphaned_records, audit.repaired) == (1, 1, 0)
    assert await harness.stored() == with_marker
    assert await harness.sidecar_exists(owned)
    repaired = await store.repair_orphans(10, apply=True)
    assert (repaired.orphaned_records, repaired.repaired) == (1, 1)
    assert (await store.repair_orphans(10, apply=False)).scanned == 0  # marker gone
    assert not await harness.sidecar_exists(owned)
    assert await harness.unowned_exists()


async def test_orphan_repair_clears_only_an_absent_sidecar_reference(harness: Harness) -> None:
    store = harness.store
    owned = await publish(store, filename_prefix="sidecar")
    await store.attach_metadata(owned.id, owned.name, {"prompt": "test"})
    await harness.lose_sidecar(owned)
    await artifact_error(store.read(owned.id, OWNER))  # missing sidecar: invalid until repaired
    audit = await store.repair_orphans(10, apply=False)
    assert (audit.missing_sidecars, audit.repaired) == (1, 0)
    repaired = await store.repair_orphans(10, apply=True)
    assert (repaired.missing_sidecars, repaired.repaired) == (1, 1)
    assert (await store.read(owned.id, OWNER)).name == owned.name
    assert (await store.repair_orphans(10, apply=False)).healthy == 1


async def test_orphan_repair_never_modifies_changed_or_invalid_content(harness: Harness) -> None:
    store = harness.store
    owned = await publish(store, filename_prefix="changed")
    await store.attach_metadata(owned.id, owned.name, {"prompt": "test"})
    await harness.replace_sidecar(owned, b'{"prompt":"changed"}')
    await harness.lose_image(owned)
    before = await harness.stored()
    report = await store.repair_orphans(10, apply=True)
    assert (report.repaired, report.orphaned_records, report.skipped) == (0, 1, 1)
    assert await harness.sidecar_exists(owned)
    assert await harness.stored() == before  # the marker and the changed sidecar stay
    await artifact_error(store.repair_orphans(0, apply=False))


async def test_publishes_nested_exact_names_and_cleans_them_up(harness: Harness) -> None:
    store = harness.store
    data = png(2, 2)
    owned = await publish(store, data, directory="portraits/people", filename="alice")
    assert owned.name == "portraits/people/alice.png"
    assert (await store.read(owned.id, OWNER)).data == data
    sidecar = await store.attach_metadata(owned.id, owned.name, {"prompt": "test"})
    assert sidecar == f"portraits/people/metadata-{owned.id}.json"
    assert (await store.read(owned.id, OWNER)).sidecar_name == sidecar
    assert await store.read_sidecar(owned.id, OWNER) == {"prompt": "test"}
    report = await store.cleanup(now=10**12, max_age_secs=0)
    assert report.deleted == 1
    assert await harness.stored() == []


async def test_metadata_attachment_rejects_non_json_and_duplicate_sidecars(
    harness: Harness,
) -> None:
    store = harness.store
    owned = await publish(store)
    before = await harness.stored()
    for bad in (b"[]", b"not json", b"", b"{" * 10):
        await artifact_error(store.attach_metadata(owned.id, owned.name, bad))
    await artifact_error(store.attach_metadata(owned.id, owned.name, {"x": float("nan")}))
    await artifact_error(store.attach_metadata(owned.id, "other.png", {"prompt": "p"}))
    await artifact_error(store.attach_metadata("nope", owned.name, {"prompt": "p"}))
    too_big = {"blob": "x" * (1024 * 1024)}
    await artifact_error(store.attach_metadata(owned.id, owned.name, too_big))
    assert await harness.stored() == before
    await store.attach_metadata(owned.id, owned.name, b'{"prompt":"p"}')
    error = await artifact_error(store.attach_metadata(owned.id, owned.name, {"prompt": "q"}))
    assert error.message == "artifact metadata cannot be attached to this artifact"
    assert await store.read_sidecar(owned.id, OWNER) == {"prompt": "p"}


async def test_per_request_placement_and_embedded_metadata_survive_publication(
    harness: Harness,
) -> None:
    store = harness.store
    record = {"kind": "imagegen_bridge_generation", "original_prompt": "a lighthouse"}
    embedded, info = embed_metadata(png(4, 4), OutputFormat.PNG, record)
    owned = await publish(store, embedded, directory="portraits", filename="woman.png")
    assert owned.name == "portraits/woman.png"
    assert owned.info.sha256 == info.sha256
    content = await store.read(owned.id, OWNER)
    assert content.data == embedded
    assert extract_metadata_record(content.data) == record
    await store.attach_metadata(owned.id, owned.name, {**record, "image": {"width": 4}})
    assert await harness.sidecar_exists(owned)
    assert await store.read_sidecar(owned.id, OWNER) == {**record, "image": {"width": 4}}


@pytest.mark.parametrize("grace", [0, 59, -1, True])
async def test_the_temp_grace_protects_live_writers(harness: Harness, grace: int) -> None:
    store = harness.store
    await artifact_error(store.cleanup(stale_temp_secs=grace))
    await artifact_error(store.repair_orphans(10, apply=True, stale_temp_secs=grace))
