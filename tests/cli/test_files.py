"""Bounded reads and atomic writes."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from imagebridge.cli.atomic import write_atomic
from imagebridge.cli.files import read_bounded, read_prompt_stream
from imagebridge.contract.errors import BridgeError


def test_read_bounded_limits_and_kinds(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    assert read_bounded(str(path), 5, "file") == b"12345"
    with pytest.raises(BridgeError, match="exceeds the configured byte limit"):
        read_bounded(str(path), 4, "file")
    with pytest.raises(BridgeError, match="is not a regular file"):
        read_bounded(str(tmp_path), 10, "file")
    with pytest.raises(BridgeError, match="does not exist"):
        read_bounded(str(tmp_path / "nope"), 10, "file")
    assert read_bounded("-", 3, "stdin", stdin=io.BytesIO(b"abc")) == b"abc"
    with pytest.raises(BridgeError):
        read_bounded("-", 3, "stdin", stdin=io.BytesIO(b"abcd"))


def test_read_bounded_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(BridgeError, match="not a regular file"):
        read_bounded(str(fifo), 10, "file")


def test_prompt_stream_drops_one_final_newline_and_checks_utf8() -> None:
    assert read_prompt_stream(io.BytesIO(b"fox\r\n"), 3) == "fox"
    assert read_prompt_stream(io.BytesIO(b"two\n\n"), 4) == "two\n"
    with pytest.raises(BridgeError, match="not valid UTF-8"):
        read_prompt_stream(io.BytesIO(b"\xff"), 10)


def test_atomic_write_never_clobbers_unless_asked(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    write_atomic(target, b"first", mode=0o600)
    assert target.read_bytes() == b"first"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        write_atomic(target, b"second")
    assert target.read_bytes() == b"first"
    write_atomic(target, b"third", replace=True)
    assert target.read_bytes() == b"third"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]
