"""A full disk or an I/O error at every write step of the artifact store.

As SQLite's own I/O-error tests do, each system call a publication makes is failed in turn
(``ENOSPC``, then ``EIO``): the answer is always the same clean ``artifact`` error naming
the fault in ``details.reason``, nothing half-written is left or served, the process's
storage health says ``degraded`` for the artifacts, and the next write after the fault
works and clears it.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from imagebridge.artifacts.filesystem import objects as _fs
from imagebridge.artifacts.filesystem.markers import OWNERSHIP_DIRECTORY
from imagebridge.artifacts.filesystem.store import ArtifactStore
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.storage_faults import STORAGE_HEALTH
from tests.artifacts.filesystem.test_store import (
    OWNER,
    marker_files,
    publish,
    temp_files,
    visible_files,
)
from tests.artifacts.images import png

pytestmark = pytest.mark.usefixtures("fresh_storage_health")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "artifacts"


def failing_nth(real: Callable[..., Any], n: int, code: int) -> Callable[..., Any]:
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == n:
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    return wrapper


# Every call a publication into a new directory makes that can meet a full disk or a bad
# sector: the directory, the image's data and sync, the marker's data, sync and name, the
# ownership directory's sync, the image's name and its directory's sync.
STEPS = [
    ("mkdir", 1),
    ("write", 1),
    ("fsync", 1),
    ("write", 2),
    ("fsync", 2),
    ("link", 1),
    ("fsync", 3),
    ("link", 2),
    ("fsync", 4),
]
REASONS = {errno.ENOSPC: "no_space", errno.EIO: "io_error", errno.EDQUOT: "no_space"}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize(("call", "nth"), STEPS)
def test_a_fault_at_any_publication_step_is_a_clean_artifact_error(
    root: Path, monkeypatch: pytest.MonkeyPatch, call: str, nth: int, code: int
) -> None:
    store = ArtifactStore(root)
    monkeypatch.setattr(os, call, failing_nth(getattr(os, call), nth, code))
    with pytest.raises(BridgeError) as caught:
        publish(store, directory="gallery")
    monkeypatch.undo()

    error = caught.value
    assert error.code is ErrorCode.ARTIFACT
    assert error.details["reason"] == REASONS[code]
    assert error.details["storage"] == "artifacts"
    assert not error.retryable  # the image it was asked to keep was already made
    assert visible_files(root) == []
    assert marker_files(root) == [] and temp_files(root) == []
    assert STORAGE_HEALTH.reasons() == {"artifacts": REASONS[code]}

    stored = publish(store, directory="gallery")  # space is back: no restart needed
    assert store.read(stored.id, OWNER).data == png(2, 2)
    assert STORAGE_HEALTH.snapshot() == {"status": "ok", "areas": {}}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize(
    ("call", "nth"),
    [
        ("write", 1),  # the sidecar's data
        ("fsync", 1),
        ("write", 2),  # the marker naming it
        ("fsync", 2),
        ("replace", 1),
        ("fsync", 3),
        ("link", 1),  # the sidecar's name
        ("fsync", 4),
    ],
)
def test_a_fault_while_attaching_a_sidecar_keeps_the_artifact_and_its_old_marker(
    root: Path, monkeypatch: pytest.MonkeyPatch, call: str, nth: int, code: int
) -> None:
    store = ArtifactStore(root)
    stored = publish(store)
    monkeypatch.setattr(os, call, failing_nth(getattr(os, call), nth, code))
    with pytest.raises(BridgeError) as caught:
        store.attach_metadata(stored.id, stored.name, {"prompt": "a fox"})
    monkeypatch.undo()

    assert caught.value.code is ErrorCode.ARTIFACT
    assert caught.value.details["reason"] == REASONS[code]
    content = store.read(stored.id, OWNER)  # still served, as before the attempt
    assert content.sidecar_name is None
    assert visible_files(root) == [stored.name] and temp_files(root) == []
    assert store.attach_metadata(stored.id, stored.name, {"prompt": "a fox"}).startswith(
        "metadata-"
    )


def test_a_quota_error_is_no_space_too(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ArtifactStore(root)
    monkeypatch.setattr(os, "write", failing_nth(os.write, 1, errno.EDQUOT))
    with pytest.raises(BridgeError) as caught:
        publish(store)
    assert caught.value.details["reason"] == "no_space"


def test_reads_keep_working_while_writes_fail(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ArtifactStore(root)
    stored = publish(store)

    def full(*_args: Any, **_kwargs: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    for _ in range(3):
        with pytest.raises(BridgeError):
            publish(store)
    assert store.read(stored.id, OWNER).data == png(2, 2)
    assert store.thumbnail(stored.id, OWNER, 32).startswith(b"\x89PNG")
    snapshot = STORAGE_HEALTH.snapshot()
    assert snapshot["status"] == "degraded"
    assert snapshot["areas"]["artifacts"]["failures"] == 3


def test_repair_waits_for_a_publication_between_its_marker_and_its_name(root: Path) -> None:
    """The window a crash can leave open is, while the writer lives, held under a shared
    lock: repair, which takes it alone, never removes a marker whose file is on its way."""
    store = ArtifactStore(root)
    stored = publish(store)
    (store.root / stored.name).unlink()  # now a marker naming a missing file, as mid-publication
    own = os.open(root / OWNERSHIP_DIRECTORY, os.O_RDONLY | os.O_DIRECTORY)
    finished = threading.Event()
    reports: list[Any] = []
    try:
        with _fs.locked(own, exclusive=False):
            worker = threading.Thread(
                target=lambda: (
                    reports.append(store.repair_orphans(10, apply=True)),
                    finished.set(),
                )
            )
            worker.start()
            assert not finished.wait(0.5)  # blocked behind the "publication"
            (store.root / stored.name).write_bytes(png(2, 2))  # the publication names its file
        assert finished.wait(30)
        worker.join()
    finally:
        os.close(own)
    assert (reports[0].orphaned_records, reports[0].healthy) == (0, 1)
    assert store.read(stored.id, OWNER).data == png(2, 2)
