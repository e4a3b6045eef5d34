"""Route templating of the operator event ring."""

from __future__ import annotations

import pytest

from imagebridge.server.events import OperatorEvents, route_template


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/v1/images", "/v1/images"),
        ("/metrics", "/metrics"),
        ("/v1/sessions/private-key", "/v1/sessions/{key}"),
        ("/v1/jobs/019f0000-0000-7000-8000-000000000000", "/v1/jobs/{id}"),
        ("/v1/jobs/x/partial", "/v1/jobs/{id}/partial"),
        ("/v1/artifacts/abc/thumbnail", "/v1/artifacts/{id}/thumbnail"),
        ("/v1/providers/mock/capabilities", "/v1/providers/{provider}/capabilities"),
        ("/v1/presets/portrait", "/v1/presets/{name}"),
        ("/v1/secret/path/here", "/v1/unmatched"),
        ("/v1/sessions/a/b", "/v1/unmatched"),
        ("/health/live", None),
        ("/v1/openapi.json", None),
        ("/dashboard/app.js", None),
        ("/missing", None),
    ],
)
def test_routes_are_templated(path: str, route: str | None) -> None:
    assert route_template(path) == route


def test_unusual_methods_are_labelled_other() -> None:
    events = OperatorEvents(capacity=2)
    events.record("BREW", "/v1/images", 405, 1)
    assert events.snapshot()["items"][0]["method"] == "OTHER"
