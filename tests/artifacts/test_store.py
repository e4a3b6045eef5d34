from __future__ import annotations

import functools
import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from imagebridge.artifacts._fs import TEMP_PREFIX
from imagebridge.artifacts.async_store import AsyncArtifactStore
from imagebridge.artifacts.store import (
    DEFAULT_STALE_TEMP_SECS,
    OWNERSHIP_DIRECTORY,
    ArtifactStore,
    StoredArtifact,
)
from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import inspect_image
from imagebridge.imaging.metadata import embed_metadata, extract_metadata_record
from tests.artifacts.images import jpeg, png

OWNER = "anonymous-local"
OTHER = "bearer:" + "ab" * 32
NOT_FOUND = "artifact was not found or is invalid"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "artifacts"


@pytest.fixture
def store(root: Path) -> ArtifactStore:
    return ArtifactStore(root)


def publish(store: ArtifactStore, data: bytes | None = None, **options: Any) -> StoredArtifact:
    options.setdefault("expected_format", OutputFormat.PNG)
    options.setdefault("owner", OWNER)
    return store.publish(png(2, 2) if data is None else data, **options)


def visible_files(root: Path) -> list[str]:
    """Everything below the root except the ownership directory."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != OWNERSHIP_DIRECTORY]
        found.extend(os.path.relpath(os.path.join(dirpath, f), root) for f in filenames)
    return sorted(found)


def markers(root: Path) -> list[str]:
    return sorted(os.listdir(root / OWNERSHIP_DIRECTORY))


def marker_files(root: Path) -> list[str]:
    """The ownership markers proper (crash-leftover temp files aside)."""
    return [name for name in markers(root) if not name.startswith(TEMP_PREFIX)]


def artifact_error(call: Callable[[], object]) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        call()
    assert caught.value.code is ErrorCode.ARTIFACT
    return caught.value


def test_root_is_created_and_canonical(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    store = ArtifactStore(tmp_path / "link" / "nested")
    assert store.root == (tmp_path / "real" / "nested").resolve()
    assert (store.root / OWNERSHIP_DIRECTORY).is_dir()


def test_a_symlinked_ownership_directory_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (root / OWNERSHIP_DIRECTORY).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(BridgeError) as caught:
        ArtifactStore(root)
    assert caught.value.code is ErrorCode.CONFIGURATION


def test_publishes_verified_artifacts_without_name_reuse(store: ArtifactStore) -> None:
    data = png(2, 2)
    first = publish(store, data, filename_prefix="My portrait")
    second = publish(store, data, filename_prefix="My portrait")
    assert first.name != second.name
    assert first.name == f"my-portrait-{first.id}.png"
    assert first.path.read_bytes() == data
    assert first.info == inspect_image(data)
    assert publish(store).name.startswith("image-")
    assert publish(store, jpeg(2, 2), expected_format="jpeg").name.endswith(".jpg")


def test_marker_records_owner_and_is_private(store: ArtifactStore, root: Path) -> None:
    published = publish(store)
    marker_path = root / OWNERSHIP_DIRECTORY / f"{published.id}.json"
    marker = json.loads(marker_path.read_text())
    assert marker["owner"] == OWNER
    assert marker["sha256"] == published.info.sha256
    assert marker["name"] == published.name
    assert set(marker) == {"version", "id", "name", "created_at", "sha256", "owner"}
    assert stat.S_IMODE(marker_path.stat().st_mode) == 0o600


def test_rejects_mismatched_effective_format_before_write(store: ArtifactStore, root: Path) -> None:
    error = artifact_error(lambda: publish(store, png(1, 1), expected_format=OutputFormat.JPEG))
    assert error.message == "generated image format does not match the effective request"
    assert visible_files(root) == []
    assert markers(root) == []


def test_invalid_images_are_refused_with_an_artifact_error(
    store: ArtifactStore, root: Path
) -> None:
    error = artifact_error(lambda: publish(store, png(2, 2)[:-10]))
    assert error.message == "image payload is malformed or incomplete"
    assert visible_files(root) == []


def test_reads_only_matching_owned_artifacts(store: ArtifactStore) -> None:
    published = publish(store, png(2, 3), filename_prefix="owned")
    content = store.read(published.id, OWNER)
    assert (content.id, content.name) == (published.id, published.name)
    assert (content.info.width, content.info.height) == (2, 3)
    assert content.data == published.path.read_bytes()
    assert store.read(published.id.upper(), OWNER).id == published.id
    assert store.read(published.id, None).id == published.id  # trusted local access
    for bad_id in ("019f0000-0000-7000-8000-000000000000", "not-a-uuid", "../../x"):
        error = artifact_error(functools.partial(store.read, bad_id, OWNER))
        assert error.message == NOT_FOUND
    # Another caller's artifact is indistinguishable from an unknown one.
    foreign = artifact_error(lambda: store.read(published.id, OTHER))
    unknown = artifact_error(lambda: store.read("019f0000-0000-7000-8000-000000000000", OTHER))
    assert foreign.to_dict() == unknown.to_dict()


def test_legacy_markers_without_owner_belong_to_the_anonymous_scope(
    store: ArtifactStore, root: Path
) -> None:
    published = publish(store)
    marker_path = root / OWNERSHIP_DIRECTORY / f"{published.id}.json"
    marker = json.loads(marker_path.read_text())
    del marker["owner"]
    marker_path.write_text(json.dumps(marker))
    assert store.read(published.id, "anonymous-local").id == published.id
    artifact_error(lambda: store.read(published.id, OTHER))


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
def test_tampered_markers_are_not_found(
    store: ArtifactStore, root: Path, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    published = publish(store)
    marker_path = root / OWNERSHIP_DIRECTORY / f"{published.id}.json"
    marker_path.write_text(json.dumps(change(json.loads(marker_path.read_text()))))
    assert artifact_error(lambda: store.read(published.id, None)).message == NOT_FOUND


def test_cleanup_deletes_only_verified_bridge_owned_artifacts(
    store: ArtifactStore, root: Path
) -> None:
    owned = publish(store, filename_prefix="owned")
    unowned = root / "unowned.png"
    unowned.write_bytes(png(2, 2))
    report = store.cleanup(now=owned_time(store, owned) + 1, max_age_secs=0)
    assert (report.scanned, report.deleted, report.skipped) == (1, 1, 0)
    assert not owned.path.exists()
    assert unowned.exists()
    assert markers(root) == []


def owned_time(store: ArtifactStore, published: StoredArtifact) -> int:
    marker = store.root / OWNERSHIP_DIRECTORY / f"{published.id}.json"
    created: int = json.loads(marker.read_text())["created_at"]
    return created


def test_cleanup_keeps_young_artifacts_and_honours_max_artifacts(root: Path) -> None:
    clock = iter(range(1000, 2000, 10))
    store = ArtifactStore(root, clock=lambda: float(next(clock)))
    published = [publish(store) for _ in range(4)]  # created at 1000, 1010, 1020, 1030
    report = store.cleanup(now=1035, max_age_secs=3600)
    assert report.deleted == 0
    report = store.cleanup(now=1035, max_age_secs=3600, max_artifacts=2)
    assert report.deleted == 2
    assert [p.path.exists() for p in published] == [False, False, True, True]
    report = store.cleanup(now=1035, max_age_secs=10)  # 1020 is exactly at the cutoff
    assert report.deleted == 1
    assert [p.path.exists() for p in published] == [False, False, False, True]


def test_cleanup_does_not_delete_an_owned_path_after_content_replacement(
    store: ArtifactStore,
) -> None:
    owned = publish(store)
    owned.path.write_bytes(png(3, 3))
    report = store.cleanup(now=10**12, max_age_secs=0)
    assert (report.deleted, report.skipped) == (0, 1)
    assert owned.path.exists()
    assert artifact_error(lambda: store.read(owned.id, OWNER)).message == NOT_FOUND


def test_cleanup_scan_is_bounded(store: ArtifactStore, root: Path) -> None:
    for index in range(3):
        (root / OWNERSHIP_DIRECTORY / f"invalid-{index}.json").write_text("{}")
    report = store.cleanup(max_scan_entries=2)
    assert (report.scanned, report.skipped, report.scan_limit_reached) == (2, 2, True)
    artifact_error(lambda: store.cleanup(max_scan_entries=0))


def test_orphan_repair_is_auditable_and_removes_only_verified_owned_state(
    store: ArtifactStore, root: Path
) -> None:
    owned = publish(store, filename_prefix="orphan")
    sidecar = root / store.attach_metadata(owned.id, owned.name, {"prompt": "test"})
    unowned = root / "unowned.png"
    unowned.write_bytes(png(1, 1))
    owned.path.unlink()
    audit = store.repair_orphans(10, apply=False)
    assert (audit.scanned, audit.orphaned_records, audit.repaired) == (1, 1, 0)
    assert markers(root) == [f"{owned.id}.json"]
    assert sidecar.exists()
    repaired = store.repair_orphans(10, apply=True)
    assert (repaired.orphaned_records, repaired.repaired) == (1, 1)
    assert markers(root) == []
    assert not sidecar.exists()
    assert unowned.exists()


def test_orphan_repair_clears_only_an_absent_sidecar_reference(
    store: ArtifactStore, root: Path
) -> None:
    owned = publish(store, filename_prefix="sidecar")
    (root / store.attach_metadata(owned.id, owned.name, {"prompt": "test"})).unlink()
    artifact_error(lambda: store.read(owned.id, OWNER))  # missing sidecar: invalid until repaired
    audit = store.repair_orphans(10, apply=False)
    assert (audit.missing_sidecars, audit.repaired) == (1, 0)
    repaired = store.repair_orphans(10, apply=True)
    assert (repaired.missing_sidecars, repaired.repaired) == (1, 1)
    assert store.read(owned.id, OWNER).name == owned.name
    assert store.repair_orphans(10, apply=False).healthy == 1


def test_orphan_repair_never_modifies_changed_or_invalid_content(
    store: ArtifactStore, root: Path
) -> None:
    owned = publish(store, filename_prefix="changed")
    sidecar = root / store.attach_metadata(owned.id, owned.name, {"prompt": "test"})
    sidecar.write_text('{"prompt":"changed"}')
    owned.path.unlink()
    report = store.repair_orphans(10, apply=True)
    assert (report.repaired, report.orphaned_records, report.skipped) == (0, 1, 1)
    assert sidecar.exists()
    assert markers(root) == [f"{owned.id}.json"]
    artifact_error(lambda: store.repair_orphans(0, apply=False))


def test_reads_cleanup_and_repair_reject_replaced_parent_symlinks(
    store: ArtifactStore, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    data = png(2, 2)
    owned = publish(store, data, directory="gallery")
    owned.path.unlink()
    (root / "gallery").rmdir()
    (outside / owned.path.name).write_bytes(data)
    (root / "gallery").symlink_to(outside)
    assert artifact_error(lambda: store.read(owned.id, OWNER)).message == NOT_FOUND
    cleanup = store.cleanup(now=10**12, max_age_secs=0)
    assert (cleanup.deleted, cleanup.skipped) == (0, 1)
    repair = store.repair_orphans(10, apply=True)
    assert (repair.repaired, repair.skipped) == (0, 1)
    assert (outside / owned.path.name).exists()


def test_ownership_operations_reject_a_replaced_ownership_root(
    store: ArtifactStore, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    owned = publish(store, filename_prefix="owned")
    marker_name = f"{owned.id}.json"
    (outside / marker_name).write_bytes((root / OWNERSHIP_DIRECTORY / marker_name).read_bytes())
    (root / OWNERSHIP_DIRECTORY).rename(root / "original-ownership")
    (root / OWNERSHIP_DIRECTORY).symlink_to(outside)
    artifact_error(lambda: store.read(owned.id, OWNER))
    artifact_error(lambda: store.cleanup())
    artifact_error(lambda: store.repair_orphans(10, apply=True))
    artifact_error(lambda: publish(store))
    assert (outside / marker_name).is_file()
    assert owned.path.is_file()


def test_publishes_nested_exact_names_and_cleans_them_up(store: ArtifactStore, root: Path) -> None:
    data = png(2, 2)
    owned = publish(store, data, directory="portraits/people", filename="alice")
    assert owned.name == "portraits/people/alice.png"
    assert owned.path == root.resolve() / "portraits/people/alice.png"
    assert owned.path.read_bytes() == data
    sidecar = store.attach_metadata(owned.id, owned.name, {"prompt": "test"})
    assert sidecar == f"portraits/people/metadata-{owned.id}.json"
    assert json.loads((root / sidecar).read_text()) == {"prompt": "test"}
    assert store.read(owned.id, OWNER).sidecar_name == sidecar
    assert store.read_sidecar(owned.id, OWNER) == {"prompt": "test"}
    report = store.cleanup(now=10**12, max_age_secs=0)
    assert report.deleted == 1
    assert visible_files(root) == []
    assert markers(root) == []


def test_explicit_collision_can_error_or_select_a_suffix(store: ArtifactStore) -> None:
    first = publish(store, filename="portrait.png")
    error = artifact_error(lambda: publish(store, filename="portrait.png"))
    assert error.message == "artifact file already exists"
    assert first.path.read_bytes() == png(2, 2)
    second = publish(store, png(3, 3), filename="portrait.png", collision="suffix")
    third = publish(store, png(4, 4), filename="portrait", collision="suffix")
    assert (second.name, third.name) == ("portrait-2.png", "portrait-3.png")
    assert first.path.read_bytes() == png(2, 2)  # never overwritten


def test_collision_suffixes_are_bounded(
    store: ArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import imagebridge.artifacts.store as store_module

    monkeypatch.setattr(store_module, "MAX_COLLISION_ATTEMPTS", 3)
    for _ in range(3):
        publish(store, filename="x.png", collision="suffix")
    error = artifact_error(lambda: publish(store, filename="x.png", collision="suffix"))
    assert error.message == "artifact collision suffix limit was reached"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"filename": "../escape.png"}, "output filename must be a safe component"),
        ({"filename": "a/b.png"}, "output filename must be a safe component"),
        ({"filename": "x.jpg"}, "output filename must be a safe component"),
        ({"directory": "../up"}, "output directory is not a safe relative path"),
        ({"directory": "/etc"}, "output directory is not a safe relative path"),
        ({"directory": ".imagegen-bridge-ownership"}, "output directory is not a safe"),
        ({"directory": "linked"}, "output directory component must not be a file or symlink"),
        ({"directory": "file.txt/below"}, "output directory component must not be a file"),
    ],
)
def test_direct_store_calls_reject_filename_traversal_and_symlink_directories(
    store: ArtifactStore,
    root: Path,
    tmp_path: Path,
    options: dict[str, Any],
    message: str,
) -> None:
    (tmp_path / "outside").mkdir()
    (root / "linked").symlink_to(tmp_path / "outside")
    (root / "file.txt").write_text("x")
    error = artifact_error(lambda: publish(store, **options))
    assert error.message.startswith(message)
    assert os.listdir(tmp_path / "outside") == []
    assert markers(root) == []


def test_metadata_attachment_rejects_non_json_and_duplicate_sidecars(
    store: ArtifactStore, root: Path
) -> None:
    owned = publish(store)
    for bad in (b"[]", b"not json", b"", b"{" * 10):
        artifact_error(functools.partial(store.attach_metadata, owned.id, owned.name, bad))
    artifact_error(lambda: store.attach_metadata(owned.id, owned.name, {"x": float("nan")}))
    artifact_error(lambda: store.attach_metadata(owned.id, "other.png", {"prompt": "p"}))
    artifact_error(lambda: store.attach_metadata("nope", owned.name, {"prompt": "p"}))
    too_big = {"blob": "x" * (1024 * 1024)}
    artifact_error(lambda: store.attach_metadata(owned.id, owned.name, too_big))
    assert visible_files(root) == [owned.name]
    store.attach_metadata(owned.id, owned.name, b'{"prompt":"p"}')
    error = artifact_error(lambda: store.attach_metadata(owned.id, owned.name, {"prompt": "q"}))
    assert error.message == "artifact metadata cannot be attached to this artifact"
    assert store.read_sidecar(owned.id, OWNER) == {"prompt": "p"}


def test_thumbnails_come_from_verified_owned_artifacts(store: ArtifactStore) -> None:
    owned = publish(store, png(800, 400))
    thumbnail = inspect_image(store.thumbnail(owned.id, OWNER, 128))
    assert (thumbnail.format, thumbnail.width, thumbnail.height) == (OutputFormat.PNG, 128, 64)
    with pytest.raises(BridgeError) as caught:
        store.thumbnail(owned.id, OWNER, 16)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.http_status == 422
    artifact_error(lambda: store.thumbnail(owned.id, OTHER, 128))


def test_local_path_is_verified(store: ArtifactStore) -> None:
    owned = publish(store)
    assert store.local_path(owned.id, None) == owned.path
    owned.path.write_bytes(png(5, 5))
    artifact_error(lambda: store.local_path(owned.id, None))


# -- crash safety: nothing half-written is ever visible -------------------------------------


def failing(real: Callable[..., Any], fail_on: set[int]) -> Callable[..., Any]:
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] in fail_on:
            raise OSError(5, "injected failure")
        return real(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize(
    ("function", "fail_on"),
    [
        ("fsync", {1}),  # the artifact's data never reaches the disk
        ("fsync", {2}),  # the marker's data never reaches the disk
        ("link", {1}),  # the ownership marker cannot be published
        ("fsync", {3}),  # the ownership directory entry is not durable
        ("link", {2}),  # the artifact never gets its name (its marker is withdrawn)
        ("fsync", {4}),  # the artifact's directory entry is not durable
    ],
)
def test_a_crash_during_publication_leaves_nothing_visible(
    store: ArtifactStore,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    function: str,
    fail_on: set[int],
) -> None:
    monkeypatch.setattr(os, function, failing(getattr(os, function), fail_on))
    artifact_error(lambda: publish(store, filename_prefix="crash"))
    assert visible_files(root) == []
    assert markers(root) == []
    monkeypatch.undo()
    assert store.cleanup().scanned == 0


def _publish_and_die_at_link(root: Path, directory: str | None, link_call: int) -> None:
    """Run a publication in a child process that dies at the ``link_call``-th ``os.link``."""
    script = textwrap.dedent(
        f"""
        import io, os
        from PIL import Image
        from imagebridge.artifacts.store import ArtifactStore
        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), (9, 9, 9)).save(buffer, format="PNG")
        store = ArtifactStore({str(root)!r})
        real_link, calls = os.link, []
        def link(*args, **kwargs):
            calls.append(1)
            if len(calls) == {link_call}:
                os._exit(17)
            return real_link(*args, **kwargs)
        os.link = link
        store.publish(buffer.getvalue(), expected_format="png", owner="o", filename="crash.png",
                      directory={directory!r})
        """
    )
    done = subprocess.run([sys.executable, "-c", script], timeout=60, capture_output=True)
    assert done.returncode == 17, done.stderr.decode()


def temp_files(root: Path) -> list[str]:
    """Every crash leftover below the root, the ownership directory included."""
    found: list[str] = []
    for dirpath, _dirnames, filenames in os.walk(root):
        found.extend(
            os.path.relpath(os.path.join(dirpath, f), root)
            for f in filenames
            if f.startswith(TEMP_PREFIX)
        )
    return sorted(found)


@pytest.mark.parametrize("directory", [None, "gallery/2024"])
def test_a_process_killed_before_the_marker_is_linked_leaves_only_temp_files(
    root: Path, directory: str | None
) -> None:
    """A real crash runs no cleanup: the process dies the moment the marker would be named.

    The hidden temp files it leaves (the image's and the marker's) are kept while a live
    writer could still own them and removed by the next cleanup after the grace period.
    """
    _publish_and_die_at_link(root, directory, link_call=1)
    leftovers = visible_files(root)
    assert len(leftovers) == 1 and os.path.basename(leftovers[0]).startswith(TEMP_PREFIX)
    assert os.path.dirname(leftovers[0]) == (directory or "")
    assert marker_files(root) == []
    assert len(temp_files(root)) == 2  # the image's and the marker's
    store = ArtifactStore(root)
    young = store.cleanup()
    assert (young.stale_temp_files, young.stale_temp_files_removed) == (0, 0)
    assert visible_files(root) == leftovers
    assert store.repair_orphans(10, apply=False).orphaned_records == 0
    after_grace = time.time() + DEFAULT_STALE_TEMP_SECS + 5
    report = store.cleanup(now=after_grace)
    assert (report.deleted, report.stale_temp_files, report.stale_temp_files_removed) == (0, 2, 2)
    assert not report.temp_scan_limit_reached
    assert visible_files(root) == [] and temp_files(root) == []
    expected = f"{directory}/crash.png" if directory else "crash.png"
    published = publish(store, filename="crash.png", directory=directory)
    assert published.name == expected  # the name was never taken


@pytest.mark.parametrize("directory", [None, "gallery/2024"])
def test_a_process_killed_before_the_artifact_is_linked_leaves_a_marker_repair_removes(
    root: Path, directory: str | None
) -> None:
    """The marker is durable before the image gets its name, so no file is ever unowned:
    a crash in between leaves a marker naming a missing file, which repair removes (a live
    publication holds the ownership lock over that window, so repair never sees one)."""
    _publish_and_die_at_link(root, directory, link_call=2)
    assert [os.path.basename(f)[: len(TEMP_PREFIX)] for f in visible_files(root)] == [TEMP_PREFIX]
    assert len(marker_files(root)) == 1
    store = ArtifactStore(root)
    report = store.repair_orphans(10, apply=True)
    assert (report.orphaned_records, report.repaired, report.stale_temp_files) == (1, 1, 0)
    assert marker_files(root) == []
    after_grace = time.time() + DEFAULT_STALE_TEMP_SECS + 5
    swept = store.repair_orphans(10, apply=True, now=after_grace)
    assert (swept.orphaned_records, swept.stale_temp_files_removed) == (0, 1)
    assert visible_files(root) == [] and temp_files(root) == []
    expected = f"{directory}/crash.png" if directory else "crash.png"
    assert publish(store, filename="crash.png", directory=directory).name == expected


def _leave_temp(directory: Path, data: bytes = b"partial") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (TEMP_PREFIX + os.urandom(12).hex())
    path.write_bytes(data)
    return path


def test_stale_temp_files_are_removed_only_after_the_grace(
    store: ArtifactStore, root: Path
) -> None:
    publish(store, directory="a/b")
    made = [_leave_temp(root), _leave_temp(root / "a" / "b"), _leave_temp(root / "a")]
    made.append(_leave_temp(root / OWNERSHIP_DIRECTORY))
    grace = 600
    start = time.time()
    assert store.cleanup(now=start + grace - 5, stale_temp_secs=grace).stale_temp_files == 0
    assert all(path.exists() for path in made)
    audit = store.repair_orphans(10, apply=False, now=start + grace + 5, stale_temp_secs=grace)
    assert (audit.healthy, audit.stale_temp_files, audit.stale_temp_files_removed) == (1, 4, 0)
    assert all(path.exists() for path in made)
    report = store.cleanup(now=start + grace + 5, stale_temp_secs=grace)
    assert (report.scanned, report.deleted, report.skipped) == (1, 0, 0)
    assert (report.stale_temp_files, report.stale_temp_files_removed) == (4, 4)
    assert temp_files(root) == []
    assert len(visible_files(root)) == 1


def test_repair_applies_the_temp_sweep_too(store: ArtifactStore, root: Path) -> None:
    leftover = _leave_temp(root / "gallery")
    repair = store.repair_orphans(10, apply=True, now=time.time() + 3600 + 5)
    assert (repair.scanned, repair.stale_temp_files, repair.stale_temp_files_removed) == (0, 1, 1)
    assert not leftover.exists()


def test_age_is_measured_from_the_last_write(store: ArtifactStore, root: Path) -> None:
    """A temp file's writer writes, fsyncs and links at once: an old mtime means no writer."""
    skewed, old = _leave_temp(root), _leave_temp(root)
    two_hours_ago = time.time() - 2 * 3600
    os.utime(old, (two_hours_ago, two_hours_ago))
    future = time.time() + 3600  # clock skew: a file from the future is never stale
    os.utime(skewed, (future, future))
    report = store.cleanup()
    assert (report.stale_temp_files, report.stale_temp_files_removed) == (1, 1)
    assert skewed.exists() and not old.exists()


def test_a_temp_name_left_beside_its_published_artifact_is_removed_but_the_artifact_stays(
    store: ArtifactStore, root: Path
) -> None:
    """A crash after ``link`` but before the temp name is dropped: two names, one file."""
    owned = publish(store, directory="gallery")
    second_name = owned.path.parent / (TEMP_PREFIX + "ab" * 12)
    os.link(owned.path, second_name)
    report = store.cleanup(now=time.time() + 3600 + 5, max_age_secs=10**9)
    assert (report.deleted, report.stale_temp_files_removed) == (0, 1)
    assert not second_name.exists()
    assert store.read(owned.id, OWNER).data == owned.path.read_bytes()


def test_the_temp_sweep_never_leaves_the_root_or_touches_what_is_not_a_bridge_temp(
    store: ArtifactStore, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside_temp = _leave_temp(outside)
    (root / "linked-dir").symlink_to(outside, target_is_directory=True)
    (root / (TEMP_PREFIX + "cd" * 12)).symlink_to(outside_temp)  # a temp-named symlink
    (root / (TEMP_PREFIX + "ef" * 12)).mkdir()  # a temp-named directory
    untouched = [
        _leave_temp(root / ".hidden"),  # no publication creates a hidden directory
        _leave_temp(root / "has space"),  # nor a directory with an unsafe name
        _leave_temp(root / OWNERSHIP_DIRECTORY / "nested"),
        root / (TEMP_PREFIX + "not-ours"),
        root / (TEMP_PREFIX + "AB" * 12),
        root / (TEMP_PREFIX + "ab" * 13),
        root / "imagegen-bridge-tmp-" / ("ab" * 12),
    ]
    for path in untouched:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"keep")
    report = store.cleanup(now=time.time() + 10 * 3600)
    assert (report.stale_temp_files, report.stale_temp_files_removed) == (0, 0)
    assert outside_temp.read_bytes() == b"partial"
    assert (root / (TEMP_PREFIX + "cd" * 12)).is_symlink()
    assert (root / (TEMP_PREFIX + "ef" * 12)).is_dir()
    assert all(path.read_bytes() == b"keep" for path in untouched)


def test_the_temp_sweep_is_bounded_by_the_scan_limit(store: ArtifactStore, root: Path) -> None:
    for _ in range(5):
        _leave_temp(root)
    later = time.time() + 3600 + 5
    first = store.cleanup(now=later, max_scan_entries=2)
    assert first.temp_scan_limit_reached
    assert first.stale_temp_files_removed <= 2
    assert len(temp_files(root)) == 5 - first.stale_temp_files_removed
    rest = store.cleanup(now=later, max_scan_entries=100)
    assert not rest.temp_scan_limit_reached
    assert first.stale_temp_files_removed + rest.stale_temp_files_removed == 5
    assert temp_files(root) == []


@pytest.mark.parametrize("grace", [0, 59, -1, True])
def test_the_temp_grace_protects_live_writers(store: ArtifactStore, grace: int) -> None:
    artifact_error(lambda: store.cleanup(stale_temp_secs=grace))
    artifact_error(lambda: store.repair_orphans(10, apply=True, stale_temp_secs=grace))


def test_a_failed_marker_replacement_rolls_back_the_sidecar(
    store: ArtifactStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owned = publish(store)
    monkeypatch.setattr(os, "replace", failing(os.replace, {1}))
    artifact_error(lambda: store.attach_metadata(owned.id, owned.name, {"prompt": "p"}))
    assert visible_files(root) == [owned.name]
    monkeypatch.undo()
    assert store.read(owned.id, OWNER).sidecar_name is None


async def test_async_store_runs_the_same_operations(root: Path) -> None:
    store = AsyncArtifactStore(ArtifactStore(root))
    owned = await store.publish(png(40, 20), expected_format="png", owner=OWNER, filename="a")
    assert owned.name == "a.png"
    sidecar = await store.attach_metadata(owned.id, owned.name, {"k": 1})
    assert (await store.read(owned.id, OWNER)).sidecar_name == sidecar
    assert await store.read_sidecar(owned.id, OWNER) == {"k": 1}
    assert inspect_image(await store.thumbnail(owned.id, OWNER, 32)).width == 32
    assert (await store.repair_orphans(5, apply=False)).healthy == 1
    assert (await store.cleanup(now=10**12, max_age_secs=0)).deleted == 1
    leftover = root / (TEMP_PREFIX + "ab" * 12)
    leftover.write_bytes(b"partial")
    later = time.time() + 120
    audit = await store.repair_orphans(5, apply=False, now=later, stale_temp_secs=60)
    assert audit.stale_temp_files == 1
    swept = await store.cleanup(now=later, stale_temp_secs=60)
    assert swept.stale_temp_files_removed == 1 and not leftover.exists()
    assert store.root == root.resolve()


@pytest.mark.parametrize("fail_on", [{1}, {2}, {3}, {4}])
def test_a_crash_during_sidecar_attachment_keeps_the_artifact_readable(
    store: ArtifactStore, root: Path, monkeypatch: pytest.MonkeyPatch, fail_on: set[int]
) -> None:
    owned = publish(store)
    # fsync calls: sidecar data, its directory, the new marker's data, ownership directory
    monkeypatch.setattr(os, "fsync", failing(os.fsync, fail_on))
    artifact_error(lambda: store.attach_metadata(owned.id, owned.name, {"prompt": "p"}))
    monkeypatch.undo()
    assert visible_files(root) == [owned.name]
    assert store.read(owned.id, OWNER).sidecar_name is None
    assert store.attach_metadata(owned.id, owned.name, {"prompt": "p"})


def test_per_request_placement_and_embedded_metadata_survive_publication(
    store: ArtifactStore, root: Path
) -> None:
    record = {"kind": "imagegen_bridge_generation", "original_prompt": "a lighthouse"}
    embedded, info = embed_metadata(png(4, 4), OutputFormat.PNG, record)
    owned = publish(store, embedded, directory="portraits", filename="woman.png")
    assert owned.name == "portraits/woman.png"
    assert (root / "portraits" / "woman.png").read_bytes() == embedded
    assert owned.info.sha256 == info.sha256
    content = store.read(owned.id, OWNER)
    assert extract_metadata_record(content.data) == record
    sidecar = store.attach_metadata(owned.id, owned.name, {**record, "image": {"width": 4}})
    assert (root / sidecar).is_file()
    assert store.read_sidecar(owned.id, OWNER) == {**record, "image": {"width": 4}}


def test_an_existing_unowned_file_is_never_overwritten(store: ArtifactStore, root: Path) -> None:
    (root / "mine.png").write_bytes(b"user data")
    artifact_error(lambda: publish(store, filename="mine.png"))
    assert (root / "mine.png").read_bytes() == b"user data"
    assert publish(store, filename="mine.png", collision="suffix").name == "mine-2.png"


@pytest.mark.parametrize("owner", ["", "has space", "x" * 257, "tab\t"])
def test_owner_scope_is_validated(store: ArtifactStore, root: Path, owner: str) -> None:
    artifact_error(lambda: publish(store, owner=owner))
    assert visible_files(root) == []
