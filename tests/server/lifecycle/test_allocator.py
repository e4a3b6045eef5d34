"""``server.malloc``: the served process keeps freed image-sized blocks instead of faulting
them back in on every request."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from imagebridge.config import load_config
from imagebridge.contract.errors import BridgeError
from imagebridge.server import serve
from tests.server.conftest import MOCK_ONLY

MiB = 1024 * 1024

# A request's life in miniature: three image-sized blocks allocated, then all freed, 20
# times; prints the page faults of the last 19 rounds.
_ROUNDS = """
import resource, sys
from imagebridge.server.allocator import tune_malloc
if sys.argv[1] == "tuned":
    assert tune_malloc({mmap}, {trim})
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def request():
    blocks = [bytearray(5 * 1024 * 1024) for _ in range(3)]
    del blocks
request()
before = faults()
for _ in range(19):
    request()
print(faults() - before)
"""


def _faults(mode: str) -> int:
    code = _ROUNDS.format(mmap=16 * MiB, trim=64 * MiB)
    result = subprocess.run(
        [sys.executable, "-c", code, mode], capture_output=True, text=True, check=True
    )
    return int(result.stdout)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="the thresholds are glibc's",
)
def test_tuned_thresholds_keep_freed_blocks_for_the_next_request() -> None:
    default, tuned = _faults("default"), _faults("tuned")
    assert default > 19 * 1000  # rounds fault most of their 15 MiB (3840 pages) back in
    assert tuned < 100


def test_the_served_process_applies_the_configured_thresholds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    applied: list[tuple[int, int]] = []
    monkeypatch.setattr(serve, "tune_malloc", lambda *values: applied.append(values) or True)

    class NotServing:
        started = False

        def __init__(self, *args: Any) -> None:
            pass

        def run(self, sockets: Any) -> None:
            pass

    monkeypatch.setattr(serve, "_Server", NotServing)
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    for sets, expected in (
        ([], [(16 * MiB, 256 * MiB)]),
        (
            ["server.malloc.mmap_threshold_bytes=1048576", "server.malloc.trim_threshold_bytes=2"],
            [(MiB, 2)],
        ),
        (["server.malloc.enabled=false"], []),
    ):
        applied.clear()
        loaded = load_config(env=env, sets=[*MOCK_ONLY, *sets], cwd=tmp_path)
        with pytest.raises(BridgeError):  # the stand-in never starts
            serve.run_server(loaded, bind="127.0.0.1:0", env=env)
        assert applied == expected
