"""Schemathesis on the operations that take a resource in their path, with *real* resources.

``tests/server/openapi/test_openapi_fuzz.py`` fuzzes every operation, but a random ``{id}`` or
``{name}`` only ever reaches the "not found" branch. Here each such operation is fuzzed
with its path parameter pinned to something that exists — a finished job, its artifact, a
preset, a persistent session, the mock provider — created afresh for every operation, so
the fuzzed query strings and bodies reach the handlers' real work (history updates,
thumbnails at fuzzed edges, preset rewrites, cancellation of a terminal job …). Checks:
no 5xx, a documented status and content type, and a body that matches the documented
schema. Derandomized and bounded, like the server engineer's fuzz.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, cast

import httpx
import hypothesis
import pytest
import schemathesis
from schemathesis import checks as builtin_checks
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi import checks as openapi_checks

from tests.resilience.harness import ThreadServer, poll_job, start_in_thread

pytestmark = pytest.mark.slow

EXAMPLES: Final = 15
CHECKS: Final[list[Callable[..., Any]]] = [
    builtin_checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]
PRESET: Final = "fuzz-preset"
SESSION: Final = "fuzz-session"
SMALL: Final = {"size": "64x64"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    root: Path = tmp_path_factory.mktemp("openapi-resources")
    live = start_in_thread(
        root,
        [
            "runtime.request.max_edge=64",
            "runtime.request.max_outputs=2",
            "providers.mock.max_outputs=2",
        ],
    )
    yield live
    live.stop()


def fresh_resources(client: httpx.Client) -> dict[str, str]:
    """A finished job with its artifact, a preset and a persistent session, all new."""
    created = client.post(
        "/v1/jobs", json={"operation": "generate", "prompt": "fuzz fox", "parameters": SMALL}
    )
    job = poll_job(client, created.raise_for_status().json()["id"])
    assert job["status"] == "succeeded", job
    client.delete(f"/v1/presets/{PRESET}")
    client.post(
        "/v1/presets", json={"name": PRESET, "template": {"parameters": SMALL}}
    ).raise_for_status()
    client.post(
        "/v1/images",
        json={
            "operation": "generate",
            "prompt": "fuzz fox",
            "parameters": SMALL,
            "session": {"mode": "persistent", "key": SESSION},
        },
    ).raise_for_status()
    return {
        "job": job["id"],
        "artifact": job["result"]["data"][0]["id"],
        "preset": PRESET,
        "session": SESSION,
        "provider": "mock",
    }


def pinned(label: str, parameter: str) -> str:
    """Which resource a path parameter of ``label`` names."""
    if parameter == "provider":
        return "provider"
    if parameter == "key":
        return "session"
    if parameter == "name":
        return "preset"
    return "artifact" if label.split()[1].startswith("/v1/artifacts") else "job"


def test_resource_operations_accept_fuzzed_input_on_real_resources(
    server: ThreadServer,
) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/v1/openapi.json")
    operations = [cast(Any, result).ok() for result in schema.get_all_operations()]
    targets = [op for op in operations if op.path_parameters]
    # deletions last: they remove what the next operations of the kind would need
    targets.sort(key=lambda op: (op.method.upper() == "DELETE", op.label))
    assert len(targets) >= 12, [op.label for op in targets]
    seen: dict[str, Counter[int]] = defaultdict(Counter)
    failures: list[str] = []
    with server.client(timeout=30) as client:
        for operation in targets:
            resources = fresh_resources(client)
            values = {
                parameter.name: resources[pinned(operation.label, parameter.name)]
                for parameter in operation.path_parameters
            }
            try:
                fuzz(server, operation, values, seen)
            except Exception as exc:  # collect every operation's failure, then report
                failures.append(f"{operation.label}: {exc}")
    print({label: dict(statuses) for label, statuses in sorted(seen.items())})
    assert not failures, "\n\n".join(failures)
    # the point of pinning: the handlers' success paths were reached
    for label in (
        "GET /v1/jobs/{id}",
        "GET /v1/presets/{name}",
        "GET /v1/artifacts/{id}",
        "GET /v1/artifacts/{id}/thumbnail",
        "GET /v1/sessions/{key}",
        "GET /v1/providers/{provider}/capabilities",
    ):
        assert seen[label][200] > 0, (label, seen[label])


def fuzz(
    server: ThreadServer,
    operation: Any,
    values: dict[str, str],
    seen: dict[str, Counter[int]],
) -> None:
    @hypothesis.settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
    )
    @hypothesis.given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    def exercise(case: Any) -> None:
        case.path_parameters = {**(case.path_parameters or {}), **values}
        response = case.call(base_url=server.url, timeout=30)
        seen[operation.label][response.status_code] += 1
        case.validate_response(response, checks=CHECKS)

    exercise()
