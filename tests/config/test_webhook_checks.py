"""``[server.webhooks]``: what ``config check`` says about its bounds and its endpoints.

The address rules (private targets) need DNS and are applied when the server starts
(tests/server/webhooks/test_webhooks.py); here the shapes, names, bounds and relations.
"""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.config import BridgeConfig, check
from imagebridge.contract.webhooks import ALL_EVENT_TYPES

ENDPOINT = {"url": "https://hooks.example/in", "secret_env": "HOOK_SECRET"}


def issues(**webhooks: Any) -> set[tuple[str, str]]:
    config = BridgeConfig.model_validate({"server": {"webhooks": webhooks}})
    return {
        (issue.field, issue.code)
        for issue in check(config)
        if issue.field.startswith("server.webhooks")
    }


def test_defaults_and_a_plain_endpoint_report_nothing() -> None:
    assert issues() == set()
    assert issues(enabled=True, endpoints={"ops": ENDPOINT}) == set()
    config = BridgeConfig.model_validate({"server": {"webhooks": {"endpoints": {"ops": ENDPOINT}}}})
    assert config.server.webhooks.endpoints["ops"].events == list(ALL_EVENT_TYPES)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ({"url": "ftp://hooks.example/in"}, ("server.webhooks.endpoints.ops.url", "invalid")),
        ({"url": "https://u:p@hooks.example/"}, ("server.webhooks.endpoints.ops.url", "invalid")),
        ({"url": "https://hooks.example:99999/"}, ("server.webhooks.endpoints.ops.url", "invalid")),
        ({"secret_env": "lower"}, ("server.webhooks.endpoints.ops.secret_env", "invalid")),
        ({"events": []}, ("server.webhooks.endpoints.ops.events", "invalid")),
        ({"events": ["job.exploded"]}, ("server.webhooks.endpoints.ops.events.0", "invalid")),
        ({"key": "team"}, ("server.webhooks.endpoints.ops.key", "invalid")),
    ],
)
def test_endpoint_problems_name_their_field(
    endpoint: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert expected in issues(endpoints={"ops": {**ENDPOINT, **endpoint}})


def test_names_bounds_and_relations() -> None:
    assert ("server.webhooks.endpoints.a b", "invalid") in issues(endpoints={"a b": ENDPOINT})
    assert ("server.webhooks.timeout_ms", "out_of_range") in issues(timeout_ms=0)
    assert ("server.webhooks.lease_secs", "out_of_range") in issues(lease_secs=5, timeout_ms=5_000)
    assert ("server.webhooks.retry_initial_ms", "out_of_range") in issues(
        retry_initial_ms=10, retry_max_interval_ms=5
    )
    assert ("server.webhooks.allowed_ports", "invalid") in issues(allowed_ports=[])
    assert ("server.webhooks.endpoints", "out_of_range") in issues(
        max_endpoints=1, endpoints={"a": ENDPOINT, "b": ENDPOINT}
    )
