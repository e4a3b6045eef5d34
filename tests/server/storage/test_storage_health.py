"""What the HTTP surface says while a write area is faulty: health headers, diagnostics.

The original's ``/health/*`` bodies stay exactly as they are (its clients decode them
strictly) and ``/v1/diagnostics`` keeps its keys; the storage state is in the
``x-imagebridge-storage`` header and under ``storage`` in ``/v1/diagnostics/extended``.
"""

from __future__ import annotations

import pytest

from imagebridge.engine.storage_faults import STORAGE_HEALTH
from tests.server.conftest import ServeFactory
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("fresh_storage_health")


def test_a_storage_fault_shows_in_health_headers_and_extended_diagnostics(
    serve: ServeFactory,
) -> None:
    server = serve()
    assert wait_until(lambda: server.state.readiness.probed)
    with server.client() as client:
        assert "x-imagebridge-storage" not in client.get("/health/ready").headers
        assert client.get("/v1/diagnostics/extended").json()["storage"] == {
            "status": "ok",
            "areas": {},
        }

        STORAGE_HEALTH.failed("artifacts", "no_space")
        STORAGE_HEALTH.failed("database", "io_error")
        ready = client.get("/health/ready")
        live = client.get("/health/live")
        extended = client.get("/v1/diagnostics/extended").json()
        base = client.get("/v1/diagnostics").json()

        STORAGE_HEALTH.succeeded("artifacts")
        STORAGE_HEALTH.succeeded("database")
        after = client.get("/health/ready")

    # still ready: reads are served; the body is the original's, the header says why
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    expected = "degraded; artifacts=no_space, database=io_error"
    assert ready.headers["x-imagebridge-storage"] == expected
    assert live.headers["x-imagebridge-storage"] == expected
    storage = extended["storage"]
    assert storage["status"] == "degraded"
    assert storage["areas"]["artifacts"]["reason"] == "no_space"
    assert storage["areas"]["database"]["failures"] == 1
    assert "storage" not in base
    assert "x-imagebridge-storage" not in after.headers
