"""A generated (billed) image whose storage fails is delivered inline, never lost silently.

The artifact store on a full disk (or one answering EIO) refuses the publication cleanly;
the engine then delivers the verified image as ``b64_json`` (bounded by
``artifacts.max_response_bytes``, like any answer), says so with the
``artifact_not_stored`` warning and a ``data[i].type`` normalization, and the provider is
never asked again: the image was paid for once.
"""

from __future__ import annotations

import base64
import errno
import os
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.publishing import ARTIFACT_NOT_STORED, SIDECAR_NOT_STORED
from imagebridge.engine.storage_faults import (
    STORAGE_HEALTH,
    StorageHealth,
    disk_fault,
    disk_fault_reason,
)
from tests.engine.outputs import ONE, request, store_runtime
from tests.support.fakes import FakeProvider

pytestmark = pytest.mark.usefixtures("fresh_storage_health")


class Links:
    async def ready(self) -> None:
        return None

    async def link(self, artifact: Any) -> str:
        return str(artifact.name)


def full_disk(monkeypatch: pytest.MonkeyPatch, code: int = errno.ENOSPC) -> None:
    real = os.write

    def write(fd: int, data: Any) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").find("artifacts") >= 0:
            raise OSError(code, os.strerror(code))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize(("code", "reason"), [(errno.ENOSPC, "no_space"), (errno.EIO, "io_error")])
@pytest.mark.parametrize("response_format", ["artifact", "url"])
async def test_a_billed_image_that_cannot_be_stored_is_delivered_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, reason: str, response_format: str
) -> None:
    provider = FakeProvider(caps=ONE)
    runtime, store = store_runtime(tmp_path, provider)
    runtime.materializer.public_base_url = "https://img.example/a/"
    runtime.materializer.links = Links()
    full_disk(monkeypatch, code)

    response = await runtime.execute(request(output={"response_format": response_format}))

    [item] = response.data
    assert item.type == "b64_json" and item.b64_json is not None
    assert len(base64.b64decode(item.b64_json)) == item.bytes
    assert ARTIFACT_NOT_STORED in response.warnings
    [note] = [n for n in response.normalizations if n.field == "data[0].type"]
    assert (note.requested, note.effective, note.reason) == (
        response_format,
        "b64_json",
        f"artifact_storage_{reason}",
    )
    assert provider.calls == 1  # generated once, never again
    assert os.listdir(store.root) == [".imagegen-bridge-ownership"]
    assert os.listdir(store.root / ".imagegen-bridge-ownership") == []
    assert STORAGE_HEALTH.reasons() == {"artifacts": reason}

    monkeypatch.undo()  # space is back
    again = await runtime.execute(request(output={"response_format": "artifact"}))
    assert again.data[0].type == "artifact" and ARTIFACT_NOT_STORED not in again.warnings
    assert not STORAGE_HEALTH.degraded


async def test_with_a_sidecar_asked_for_the_inline_image_still_arrives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, _store = store_runtime(tmp_path, FakeProvider(caps=ONE))
    full_disk(monkeypatch)
    response = await runtime.execute(
        request(output={"response_format": "artifact", "metadata": "sidecar"})
    )
    assert response.data[0].type == "b64_json"
    assert ARTIFACT_NOT_STORED in response.warnings


async def test_a_sidecar_that_cannot_be_stored_leaves_the_stored_image_delivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, store = store_runtime(tmp_path, FakeProvider(caps=ONE))
    real = store.attach_metadata

    def attach(*args: Any, **kwargs: Any) -> str:
        monkeypatch.setattr(os, "write", _enospc)
        try:
            return real(*args, **kwargs)
        finally:
            monkeypatch.undo()

    monkeypatch.setattr(store, "attach_metadata", attach)
    response = await runtime.execute(
        request(output={"response_format": "artifact", "metadata": "sidecar"})
    )
    [item] = response.data
    assert item.type == "artifact" and item.metadata_name is None
    assert SIDECAR_NOT_STORED in response.warnings
    assert store.read(item.id or "", None).name == item.name
    assert (store.root / (item.name or "")).is_file()


def _enospc(*_args: Any, **_kwargs: Any) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_the_fault_reason_is_read_through_causes() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        assert disk_fault_reason(outer) == "no_space"
    assert disk_fault_reason(OSError(errno.EIO, "bad")) == "io_error"
    assert disk_fault_reason(OSError(errno.EROFS, "ro")) == "read_only"
    assert disk_fault_reason(OSError(errno.ENOENT, "gone")) is None
    assert disk_fault_reason(ValueError("x")) is None


def test_storage_health_remembers_each_area_until_a_write_there_succeeds() -> None:
    now = [100.0]
    health = StorageHealth(clock=lambda: now[0])
    health.failed("database", "no_space")
    now[0] = 130.0
    health.failed("database", "no_space")
    health.failed("artifacts", "io_error")
    snapshot = health.snapshot()
    assert snapshot["status"] == "degraded"
    assert snapshot["areas"]["database"] == {
        "reason": "no_space",
        "since": 100,
        "last_seen": 130,
        "failures": 2,
    }
    health.succeeded("database")
    assert health.reasons() == {"artifacts": "io_error"}
    health.succeeded("artifacts")
    assert health.snapshot() == {"status": "ok", "areas": {}}


def test_a_disk_fault_error_names_reason_area_and_retry() -> None:
    error = disk_fault(ErrorCode.INTERNAL, "could not save", "no_space", "database", retryable=True)
    assert isinstance(error, BridgeError)
    assert error.details == {"reason": "no_space", "storage": "database"}
    assert error.retryable
    assert "no space left" in error.message
