from __future__ import annotations

import time
import uuid

from imagebridge.imaging.ids import UUID7Generator, canonical_uuid, uuid7


def test_uuid7_layout_and_time() -> None:
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000
    assert value.version == 7
    assert value.variant == uuid.RFC_4122
    assert before <= value.int >> 80 <= after + 1


def test_uuid7_is_monotonic_within_one_millisecond() -> None:
    frozen = UUID7Generator(clock_ms=lambda: 1_700_000_000_000)
    ids = [frozen() for _ in range(5000)]  # more than the 12-bit counter holds
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert [str(i) for i in ids] == sorted(str(i) for i in ids)


def test_canonical_uuid() -> None:
    text = str(uuid7())
    assert canonical_uuid(text) == text
    assert canonical_uuid(text.upper()) == text
    assert canonical_uuid(text.replace("-", "")) is None
    assert canonical_uuid("{" + text + "}") is None
    assert canonical_uuid("../../etc/passwd") is None
