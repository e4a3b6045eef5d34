from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.staging import StagingArea
from tests.support.fake_codex import FINAL_PNG, PARTIAL_PNG, make_png

JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64


async def test_images_are_written_privately_and_named_by_content(tmp_path: Path) -> None:
    area = StagingArea(tmp_path / "staging")
    async with area.batch() as batch:
        first = await batch.add(FINAL_PNG)
        second = await batch.add(JPEG, media_type="image/jpeg")
        again = await batch.add(FINAL_PNG)
        assert again == first
        assert batch.paths == [first, second]
        assert batch.total_bytes == len(FINAL_PNG) + len(JPEG)
        assert first.read_bytes() == FINAL_PNG
        assert first.is_absolute()
        assert first.suffix == ".png" and second.suffix == ".jpg"
        assert first.parent == second.parent == batch.directory
        assert first.parent.parent == (tmp_path / "staging").resolve()
        assert oct(first.parent.stat().st_mode & 0o777) == "0o700"
        assert [p.name for p in first.parent.iterdir() if p.name.startswith(".")] == []
    assert not first.parent.exists()


async def test_each_turn_gets_its_own_folder(tmp_path: Path) -> None:
    area = StagingArea(tmp_path)
    async with area.batch() as one, area.batch() as two:
        a = await one.add(FINAL_PNG)
        b = await two.add(FINAL_PNG)
        assert a != b and a.name == b.name
        await one.cleanup()
        assert b.exists()


async def test_cleanup_runs_when_the_turn_fails(tmp_path: Path) -> None:
    area = StagingArea(tmp_path)
    staged: list[Path] = []

    async def failing_turn() -> None:
        async with area.batch() as batch:
            staged.append(await batch.add(FINAL_PNG))
            raise RuntimeError("turn failed")

    with pytest.raises(RuntimeError):
        await failing_turn()
    assert staged and not staged[0].exists()
    assert list(tmp_path.iterdir()) == []


async def test_limits_are_enforced_before_writing(tmp_path: Path) -> None:
    big = make_png(64, 64)
    area = StagingArea(
        tmp_path, max_file_bytes=len(big), max_total_bytes=len(big) + 100, max_files=2
    )
    async with area.batch() as batch:
        with pytest.raises(BridgeError) as too_big:
            await batch.add(big + b"\x00")
        assert too_big.value.code is ErrorCode.INPUT
        await batch.add(big)
        with pytest.raises(BridgeError) as total:
            await batch.add(make_png(32, 32, (1, 2, 3, 255)))
        assert total.value.details["limit_bytes"] == len(big) + 100
        await batch.add(PARTIAL_PNG)
        with pytest.raises(BridgeError) as count:
            await batch.add(make_png(1, 1))
        assert count.value.details["limit"] == 2
        assert len(batch.paths) == 2


async def test_non_images_are_refused(tmp_path: Path) -> None:
    async with StagingArea(tmp_path).batch() as batch:
        with pytest.raises(BridgeError) as caught:
            await batch.add(b"#!/bin/sh\nrm -rf /\n", media_type="image/png")
        assert caught.value.code is ErrorCode.INPUT
        assert batch.directory is None


async def test_sweep_removes_only_old_turn_folders(tmp_path: Path) -> None:
    area = StagingArea(tmp_path)
    old, fresh = tmp_path / "turn-old", tmp_path / "turn-fresh"
    keep = tmp_path / "not-a-turn"
    for folder in (old, fresh, keep):
        folder.mkdir()
        (folder / "x.png").write_bytes(FINAL_PNG)
    past = time.time() - 7200
    os.utime(old, (past, past))
    os.utime(keep, (past, past))
    assert await area.sweep(older_than_seconds=3600) == 1
    assert not old.exists() and fresh.exists() and keep.exists()


@pytest.mark.usefixtures("fresh_storage_health")  # it records a fault: none may outlive it
@pytest.mark.parametrize(("code", "reason"), [(28, "no_space"), (5, "io_error")])
async def test_a_full_staging_disk_is_a_retryable_clean_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, reason: str
) -> None:
    """Staging runs before the turn: nothing was sent upstream, so a retry is safe; the
    half-written ``.part`` file is gone and the turn's folder is removed."""
    from imagebridge.engine.storage_faults import STORAGE_HEALTH

    area = StagingArea(tmp_path / "staging")
    real = os.replace

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(BridgeError) as caught:
        async with area.batch() as batch:
            await batch.add(FINAL_PNG)
    error = caught.value
    assert (error.code, error.retryable) == (ErrorCode.ARTIFACT, True)
    assert (error.details["reason"], error.details["storage"]) == (reason, "staging")
    assert list((tmp_path / "staging").iterdir()) == []
    assert STORAGE_HEALTH.reasons() == {"staging": reason}

    monkeypatch.setattr(os, "replace", real)
    async with area.batch() as batch:
        assert (await batch.add(FINAL_PNG)).read_bytes() == FINAL_PNG
    assert not STORAGE_HEALTH.degraded
