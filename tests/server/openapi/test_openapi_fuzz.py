"""Schemathesis over ``/v1/openapi.json`` against a live server: no 5xx, no schema drift.

Every documented operation is exercised with schema-valid (positive) and schema-invalid
(negative) inputs, a bounded number of examples each, derandomized so CI runs are
repeatable. Checks: no server error, documented status code, documented content type,
response body valid against the documented schema, and invalid input rejected.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis import checks as builtin_checks
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi import checks as openapi_checks

from tests.server.conftest import LiveServer, ServeFactory

pytestmark = pytest.mark.slow

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
POSITIVE_EXAMPLES = 20
NEGATIVE_EXAMPLES = 10

CHECKS: list[Callable[..., Any]] = [
    builtin_checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzzed(serve_module: ServeFactory) -> LiveServer:
    return serve_module(
        'server.bearer_token_env="FUZZ_TOKEN"',
        "server.metrics.enabled=true",
        'artifacts.public_base_url="http://127.0.0.1/artifacts/"',
        # keep generated work small: tiny images, few outputs
        "runtime.request.max_edge=64",
        "runtime.request.max_outputs=3",
        "providers.mock.max_outputs=3",
        env={"FUZZ_TOKEN": TOKEN},
    )


def operations(server: LiveServer) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{server.url}/v1/openapi.json")
    schema.config.update(headers=AUTH)
    return [result.ok() for result in schema.get_all_operations()]


def test_every_operation_is_documented_and_fuzzed(fuzzed: LiveServer) -> None:
    found = operations(fuzzed)
    labels = sorted(operation.label for operation in found)
    assert labels == sorted(
        [
            "DELETE /v1/sessions/{key}",
            "GET /health/live",
            "GET /health/ready",
            "GET /metrics",
            "GET /v1/diagnostics",
            "GET /v1/diagnostics/extended",
            "GET /v1/providers",
            "GET /v1/providers/{provider}/capabilities",
            "GET /v1/sessions/{key}",
            "POST /v1/images",
            "POST /v1/images/edits",
            "POST /v1/images/generations",
            "POST /v1/images/stream",
            "POST /v1/jobs",
            "GET /v1/jobs",
            "GET /v1/jobs/{id}",
            "DELETE /v1/jobs/{id}",
            "PATCH /v1/jobs/{id}",
            "GET /v1/jobs/{id}/partial",
            "GET /v1/gallery",
            "GET /v1/presets",
            "POST /v1/presets",
            "GET /v1/presets/{name}",
            "PUT /v1/presets/{name}",
            "DELETE /v1/presets/{name}",
            "GET /v1/artifacts/{id}",
            "DELETE /v1/artifacts/{id}",
            "GET /v1/artifacts/{id}/thumbnail",
            "GET /v1/artifact-links/{id}/{filename}",
            "GET /v1/models",
            "GET /v1/models/{model}",
            "POST /v1/responses",
            "GET /v1/responses/{response_id}",
            "POST /v1/responses/{response_id}/cancel",
            "DELETE /v1/responses/{response_id}",
        ]
    )
    failures: list[str] = []
    seen: dict[str, Counter[int]] = defaultdict(Counter)
    for operation in found:
        for mode, examples in (
            (GenerationMode.POSITIVE, POSITIVE_EXAMPLES),
            (GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES),
        ):
            try:
                fuzz(fuzzed, operation, mode, examples, seen)
            except hypothesis.errors.Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # nothing to negate: no inputs
            except Exception as exc:  # collect every operation's failure, then report
                failures.append(f"{operation.label} [{mode.value}]: {exc}")
    assert not failures, "\n\n".join(failures)
    print({label: dict(statuses) for label, statuses in sorted(seen.items())})
    # the fuzz must reach the provider, not only the validators
    image_operations = ("POST /v1/images", "POST /v1/images/stream", "POST /v1/images/generations")
    assert sum(seen[label][200] for label in image_operations) > 0, seen
    assert seen["GET /v1/providers"][200] > 0, seen


def fuzz(
    server: LiveServer,
    operation: Any,
    mode: GenerationMode,
    examples: int,
    seen: dict[str, Counter[int]],
) -> None:
    checks = [*CHECKS]
    if mode is GenerationMode.NEGATIVE:
        checks.append(openapi_checks.negative_data_rejection)

    @hypothesis.settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=[hypothesis.Phase.generate],
    )
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    def exercise(case: Any) -> None:
        response = case.call(base_url=server.url, timeout=30)
        seen[operation.label][response.status_code] += 1
        case.validate_response(response, checks=checks)

    exercise()
