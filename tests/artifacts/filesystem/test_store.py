"""The filesystem artifact store (``ArtifactStore``): what only a directory tree has.

Everything in the store's contract that both backends offer — publish checks and their
errors, owner scoping, reads verifying SHA-256, tampered markers, sidecars and metadata,
thumbnails, cleanup and retention, repair, delete, the scan and grace limits — lives in
``tests/artifacts/test_backends.py``, which runs each test on this store and on the S3
store alike. What stays here is filesystem-only, because the S3 store keys every object by
the artifact's id and has no directories, file modes, links or temp files:

- the root and its ownership directory (canonical root, a symlinked ownership directory,
  a replaced ownership root, replaced parent symlinks, a directory component that is a
  symlink or a file): S3 has no symlinks nor directories;
- the marker file's mode (0600) and ``local_path``: S3 has no file modes nor local paths;
- name collisions (``collision="error"``/``"suffix"``, the suffix bound, an existing
  unowned file never overwritten): an S3 key holds the artifact's id, so names never
  collide and ``collision`` never applies;
- crash safety by failing ``fsync``/``link``/``replace`` and by killing a child process at
  ``os.link``, and the ``.imagegen-bridge-tmp-*`` temp-file sweep (age from mtime, scan
  bound, files that are not bridge temps, a temp name beside a published file): these are
  the filesystem's publication steps; the S3 store's own (an image without its marker,
  stale multipart uploads, a marker that cannot be stored) are in ``s3/test_store.py``
  and ``s3/test_objects.py``;
- the ``AsyncArtifactStore`` wrapper's thread hand-off over a root directory.

Likewise filesystem-only: ``test_disk_faults.py`` (ENOSPC/EIO injected at each system
call; the S3 store's unreachable/refusing bucket is in ``s3/test_store.py``,
``s3/test_errors.py`` and ``s3/test_objects.py``) and ``test_links.py`` (the link key file
kept in the artifact root; the S3 store's presigned URLs are in ``s3/test_store.py``).
"""

from __future__ import annotations

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

from imagebridge.artifacts.filesystem.markers import OWNERSHIP_DIRECTORY
from imagebridge.artifacts.filesystem.objects import TEMP_PREFIX
from imagebridge.artifacts.filesystem.store import ArtifactStore, AsyncArtifactStore
from imagebridge.artifacts.publication import Publication
from imagebridge.artifacts.records import StoredArtifact
from imagebridge.artifacts.rules import DEFAULT_STALE_TEMP_SECS
from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import inspect_image
from tests.artifacts.images import png

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
    return store.publish(Publication(png(2, 2) if data is None else data, **options))


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


def test_marker_records_owner_and_is_private(store: ArtifactStore, root: Path) -> None:
    published = publish(store)
    marker_path = root / OWNERSHIP_DIRECTORY / f"{published.id}.json"
    marker = json.loads(marker_path.read_text())
    assert marker["owner"] == OWNER
    assert marker["sha256"] == published.info.sha256
    assert marker["name"] == published.name
    assert set(marker) == {"version", "id", "name", "created_at", "sha256", "owner"}
    assert stat.S_IMODE(marker_path.stat().st_mode) == 0o600


def test_reads_cleanup_and_repair_reject_replaced_parent_symlinks(
    store: ArtifactStore, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    data = png(2, 2)
    owned = publish(store, data, directory="gallery")
    (store.root / owned.name).unlink()
    (root / "gallery").rmdir()
    (outside / (store.root / owned.name).name).write_bytes(data)
    (root / "gallery").symlink_to(outside)
    assert artifact_error(lambda: store.read(owned.id, OWNER)).message == NOT_FOUND
    cleanup = store.cleanup(now=10**12, max_age_secs=0)
    assert (cleanup.deleted, cleanup.skipped) == (0, 1)
    repair = store.repair_orphans(10, apply=True)
    assert (repair.repaired, repair.skipped) == (0, 1)
    assert (outside / (store.root / owned.name).name).exists()


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
    assert (store.root / owned.name).is_file()


def test_explicit_collision_can_error_or_select_a_suffix(store: ArtifactStore) -> None:
    first = publish(store, filename="portrait.png")
    error = artifact_error(lambda: publish(store, filename="portrait.png"))
    assert error.message == "artifact file already exists"
    assert (store.root / first.name).read_bytes() == png(2, 2)
    second = publish(store, png(3, 3), filename="portrait.png", collision="suffix")
    third = publish(store, png(4, 4), filename="portrait", collision="suffix")
    assert (second.name, third.name) == ("portrait-2.png", "portrait-3.png")
    assert (store.root / first.name).read_bytes() == png(2, 2)  # never overwritten


def test_collision_suffixes_are_bounded(
    store: ArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import imagebridge.artifacts.filesystem.publish as store_module

    monkeypatch.setattr(store_module, "MAX_COLLISION_ATTEMPTS", 3)
    for _ in range(3):
        publish(store, filename="x.png", collision="suffix")
    error = artifact_error(lambda: publish(store, filename="x.png", collision="suffix"))
    assert error.message == "artifact collision suffix limit was reached"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"directory": "linked"}, "output directory component must not be a file or symlink"),
        ({"directory": "file.txt/below"}, "output directory component must not be a file"),
    ],
)
def test_direct_store_calls_reject_symlinked_or_file_directories(
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


def test_local_path_is_verified(store: ArtifactStore) -> None:
    owned = publish(store)
    assert store.local_path(owned.id, None) == store.root / owned.name
    (store.root / owned.name).write_bytes(png(5, 5))
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
        from imagebridge.artifacts.publication import Publication
        from imagebridge.artifacts.filesystem.store import ArtifactStore
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
        store.publish(Publication(buffer.getvalue(), expected_format="png", owner="o",
                                  filename="crash.png", directory={directory!r}))
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
    second_name = (store.root / owned.name).parent / (TEMP_PREFIX + "ab" * 12)
    os.link(store.root / owned.name, second_name)
    report = store.cleanup(now=time.time() + 3600 + 5, max_age_secs=10**9)
    assert (report.deleted, report.stale_temp_files_removed) == (0, 1)
    assert not second_name.exists()
    assert store.read(owned.id, OWNER).data == (store.root / owned.name).read_bytes()


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
    owned = await store.publish(
        Publication(png(40, 20), expected_format="png", owner=OWNER, filename="a")
    )
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


def test_an_existing_unowned_file_is_never_overwritten(store: ArtifactStore, root: Path) -> None:
    (root / "mine.png").write_bytes(b"user data")
    artifact_error(lambda: publish(store, filename="mine.png"))
    assert (root / "mine.png").read_bytes() == b"user data"
    assert publish(store, filename="mine.png", collision="suffix").name == "mine-2.png"
