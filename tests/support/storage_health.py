"""``fresh_storage_health``: a test that starts and ends with no storage fault recorded.

The storage health (``imagebridge.engine.storage_faults.STORAGE_HEALTH``) is process-wide: a
fault one test provokes would otherwise show in the health headers, readiness and
diagnostics of every later test in the process (an xdist worker runs many modules). Tests
that provoke or read faults use the fixture (``pytestmark = pytest.mark.usefixtures(...)``).
Registered once, as a plugin in ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from imagebridge.engine.storage_faults import STORAGE_HEALTH


@pytest.fixture
def fresh_storage_health() -> Iterator[None]:
    STORAGE_HEALTH.reset()
    yield
    STORAGE_HEALTH.reset()
