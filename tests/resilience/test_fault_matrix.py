"""Every upstream fault × every surface × every fallback mode, over real HTTP end to end.

The bridge runs as a real uvicorn server on 127.0.0.1 with ``codex-responses`` as its
primary provider, pointed at the loopback Codex mock (``tests/support/codex_backend.py``);
``mock`` is the fallback route. Each fault is scripted for every upstream call of a case,
so a retry or a reroute that should not happen shows up as an extra call.

``MATRIX`` below is the expectation, one row per (fault, fallback mode). It holds for all
three surfaces, each of which reports the same outcome in its own form:

* ``sync``   ``POST /v1/images``: the HTTP status and the error envelope;
* ``stream`` ``POST /v1/images/stream``: HTTP 200, ``started`` first, then exactly one
  terminal ``completed`` / ``error`` event (the same envelope) and nothing after it;
* ``job``    ``POST /v1/jobs`` (202), polled to a terminal state: ``succeeded`` with an
  artifact, or ``failed`` with the same error.

Columns: ``fault`` a label from ``FAULTS`` (the mock behaviour it scripts); ``served``
the provider that answered (``-`` = an error); ``http`` the status ``sync`` answers with
(the error's code maps to it on every surface); ``attempts`` the outcomes of the route
attempts the bridge reports, codex-responses first, then mock (``details.attempts`` of an
error, ``attempts`` of a response; ``-`` = none reported, the rule for a success without
fallbacks); ``calls`` the exact number of calls the Codex mock received (2 = the
provider's one safe transient retry); ``mock`` the calls the fallback provider received;
``breaker`` what the codex-responses breaker did: ``+1`` one more consecutive failure,
``=`` unchanged (a neutral outcome: safety rejections and quota 429s), ``0`` reset by a
success. Unknown outcomes (``outcome`` = unknown) are never retried nor rerouted.

Run with ``-s`` to see the observed matrix; it is also written to
``test-output/fault-matrix.txt``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from imagebridge.providers.mock import MockProvider
from tests.resilience.harness import (
    Table,
    ThreadServer,
    breakers,
    parse_sse,
    poll_job,
    start_in_thread,
)
from tests.support.codex_backend import (
    BRIDGE_ACCOUNT,
    BRIDGE_TOKEN,
    Behaviour,
    CodexBackend,
    Route,
    write_codex_auth,
)

FAULTS: Final = {
    "429": ("http_429", "HTTP 429 usage_limit_reached with resets_in_seconds and Retry-After"),
    "500": ("http_500", "HTTP 500 JSON error"),
    "502": ("http_502", "HTTP 502 with an HTML body"),
    "503": ("http_503", "HTTP 503 server_is_overloaded with Retry-After"),
    "stall": ("stall", "accepts the request, never answers (past the request deadline)"),
    "stall_mid": ("stall_mid_stream", "SSE starts, a partial image, then silence"),
    "drop_early": ("disconnect_before_first_byte", "hangs up before the first byte"),
    "drop_mid": ("disconnect_mid_stream", "SSE starts, a partial image, then hangs up"),
    "bad_sse": ("malformed_json", "an SSE event whose JSON is cut off"),
    "img_failed": ("failed_image_call", "stream completes; the image call has status failed"),
    "no_image": ("completed_without_image", "stream completes with only a text message"),
    "policy": ("content_policy_refusal", "response.failed content_policy_violation"),
    "refusal": ("refusal_message", "completes with an assistant refusal, no image"),
    "slow_ok": ("slow_ok", "success after 3 s"),
}

# One row per (fault, fallback); holds for sync, stream and job alike (see the docstring).
MATRIX: Final = """
fault      fallback       served http code            retry outcome attempts  calls mock breaker
429        none           -      429  rate_limited    yes   -       failed    1     0    =
429        on_unavailable mock   200  -               -     -       failed,ok 1     1    =
429        on_error       mock   200  -               -     -       failed,ok 1     1    =
500        none           -      502  upstream        yes   -       failed    2     0    +1
500        on_unavailable -      502  upstream        yes   -       failed    2     0    +1
500        on_error       mock   200  -               -     -       failed,ok 2     1    +1
502        none           -      502  upstream        yes   -       failed    2     0    +1
502        on_unavailable -      502  upstream        yes   -       failed    2     0    +1
502        on_error       mock   200  -               -     -       failed,ok 2     1    +1
503        none           -      502  upstream        yes   -       failed    2     0    +1
503        on_unavailable -      502  upstream        yes   -       failed    2     0    +1
503        on_error       mock   200  -               -     -       failed,ok 2     1    +1
stall      none           -      504  timeout         no    unknown failed    1     0    +1
stall      on_unavailable -      504  timeout         no    unknown failed    1     0    +1
stall      on_error       -      504  timeout         no    unknown failed    1     0    +1
stall_mid  none           -      504  timeout         no    unknown failed    1     0    +1
stall_mid  on_unavailable -      504  timeout         no    unknown failed    1     0    +1
stall_mid  on_error       -      504  timeout         no    unknown failed    1     0    +1
drop_early none           -      502  upstream        no    unknown failed    1     0    +1
drop_early on_unavailable -      502  upstream        no    unknown failed    1     0    +1
drop_early on_error       -      502  upstream        no    unknown failed    1     0    +1
drop_mid   none           -      502  upstream        no    unknown failed    1     0    +1
drop_mid   on_unavailable -      502  upstream        no    unknown failed    1     0    +1
drop_mid   on_error       -      502  upstream        no    unknown failed    1     0    +1
bad_sse    none           -      502  protocol        no    unknown failed    1     0    +1
bad_sse    on_unavailable -      502  protocol        no    unknown failed    1     0    +1
bad_sse    on_error       -      502  protocol        no    unknown failed    1     0    +1
img_failed none           -      502  upstream        yes   -       failed    2     0    +1
img_failed on_unavailable -      502  upstream        yes   -       failed    2     0    +1
img_failed on_error       mock   200  -               -     -       failed,ok 2     1    +1
no_image   none           -      502  upstream        yes   -       failed    2     0    +1
no_image   on_unavailable -      502  upstream        yes   -       failed    2     0    +1
no_image   on_error       mock   200  -               -     -       failed,ok 2     1    +1
policy     none           -      422  safety_rejected no    -       failed    1     0    =
policy     on_unavailable -      422  safety_rejected no    -       failed    1     0    =
policy     on_error       -      422  safety_rejected no    -       failed    1     0    =
refusal    none           -      422  safety_rejected no    -       failed    1     0    =
refusal    on_unavailable -      422  safety_rejected no    -       failed    1     0    =
refusal    on_error       -      422  safety_rejected no    -       failed    1     0    =
slow_ok    none           codex  200  -               -     -       -         1     0    0
slow_ok    on_unavailable codex  200  -               -     -       ok        1     0    0
slow_ok    on_error       codex  200  -               -     -       ok        1     0    0
"""

SURFACES: Final = ("sync", "stream", "job")
SLOW_OK_SECONDS: Final = 3.0  # "a slow success of several seconds"
STALL_TIMEOUT_MS: Final = 1_000
DEFAULT_TIMEOUT_MS: Final = 30_000
QUOTA_RESET_S: Final = 90
NAMES: Final = {"codex": "codex-responses", "mock": "mock"}
OUTCOMES: Final = {"ok": "succeeded", "failed": "failed"}
GENERATION_ROUTES: Final[tuple[Route, ...]] = ("responses", "images_generations", "images_edits")


@dataclass(frozen=True, slots=True)
class Expectation:
    fault: str
    fallback: str
    served: str | None
    status: int
    code: str | None
    retryable: bool | None
    outcome: str | None
    attempts: tuple[tuple[str, str], ...] | None
    upstream: int
    mock: int
    breaker: str

    @property
    def behaviour(self) -> Behaviour:
        if self.fault == "slow_ok":
            return Behaviour.slow_ok(SLOW_OK_SECONDS)
        return Behaviour(FAULTS[self.fault][0])  # type: ignore[arg-type]

    @property
    def stalls(self) -> bool:
        return self.fault.startswith("stall")

    @property
    def timeout_ms(self) -> int:
        return STALL_TIMEOUT_MS if self.stalls else DEFAULT_TIMEOUT_MS


def _optional(cell: str) -> str | None:
    return None if cell == "-" else cell


def parse_matrix(text: str) -> list[Expectation]:
    lines = [line.split() for line in text.strip().splitlines() if line.strip()]
    header = lines[0]
    rows: list[Expectation] = []
    for line in lines[1:]:
        cells = dict(zip(header, line, strict=True))
        attempts = _optional(cells["attempts"])
        retry = _optional(cells["retry"])
        route = ("codex-responses", "mock")
        rows.append(
            Expectation(
                fault=cells["fault"],
                fallback=cells["fallback"],
                served=None if cells["served"] == "-" else NAMES[cells["served"]],
                status=int(cells["http"]),
                code=_optional(cells["code"]),
                retryable=None if retry is None else retry == "yes",
                outcome=_optional(cells["outcome"]),
                attempts=None
                if attempts is None
                else tuple(
                    (provider, OUTCOMES[result])
                    for provider, result in zip(route, attempts.split(","), strict=False)
                ),
                upstream=int(cells["calls"]),
                mock=int(cells["mock"]),
                breaker=cells["breaker"],
            )
        )
    return rows


EXPECTATIONS: Final = parse_matrix(MATRIX)
CASES: Final = [
    pytest.param(row, surface, id=f"{row.fault}-{surface}-{row.fallback}")
    for row in EXPECTATIONS
    for surface in SURFACES
]


@dataclass
class Observed:
    """What one surface reported, normalised to the matrix's terms."""

    surface_result: str
    served: str | None = None
    code: str | None = None
    retryable: bool | None = None
    outcome: str | None = None
    attempts: tuple[tuple[str, str], ...] | None = None
    provider_attempts: int | None = None
    retry_after_ms: int | None = None
    retry_after_header: str | None = None
    events: list[str] = field(default_factory=list)


def _attempts(items: Any) -> tuple[tuple[str, str], ...] | None:
    if not items:
        return None
    return tuple((item["provider"], item["outcome"]) for item in items)


def _from_error(observed: Observed, error: dict[str, Any]) -> Observed:
    details = error.get("details") or {}
    observed.code = error["code"]
    observed.retryable = error["retryable"]
    observed.outcome = details.get("outcome")
    observed.attempts = _attempts(details.get("attempts"))
    observed.provider_attempts = details.get("provider_attempts")
    observed.retry_after_ms = details.get("retry_after_ms")
    return observed


def _from_response(observed: Observed, response: dict[str, Any]) -> Observed:
    observed.served = response["provider"]
    observed.attempts = _attempts(response.get("attempts"))
    assert response["data"], "a success carries its image"
    return observed


def run_sync(client: httpx.Client, body: dict[str, Any]) -> Observed:
    answer = client.post("/v1/images", json=body)
    payload = answer.json()
    observed = Observed(surface_result=str(answer.status_code))
    if answer.status_code == 200:
        assert payload["data"][0]["type"] == "b64_json"
        return _from_response(observed, payload)
    envelope = payload["error"]
    assert envelope["code"] and envelope["type"], "an OpenAI-style envelope"
    observed.retry_after_header = answer.headers.get("retry-after")
    return _from_error(observed, envelope["imagegen_bridge"])


def run_stream(client: httpx.Client, body: dict[str, Any]) -> Observed:
    with client.stream("POST", "/v1/images/stream", json=body) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        frames = parse_sse(answer.iter_lines())
    events = [frame.event for frame in frames]
    assert events[0] == "started", events
    terminal = [index for index, name in enumerate(events) if name in ("completed", "error")]
    assert terminal == [len(events) - 1], f"exactly one terminal event, last: {events}"
    observed = Observed(surface_result=f"200+{events[-1]}", events=events)
    last = frames[-1].data
    if events[-1] == "completed":
        assert last["type"] == "completed"
        return _from_response(observed, last["response"])
    return _from_error(observed, last["error"]["imagegen_bridge"])


def run_job(client: httpx.Client, body: dict[str, Any]) -> Observed:
    created = client.post("/v1/jobs", json=body)
    assert created.status_code == 202, created.text
    job = poll_job(client, created.json()["id"], timeout=30)
    observed = Observed(surface_result=f"202+{job['status']}")
    if job["status"] == "succeeded":
        assert job["result"]["data"][0]["type"] == "artifact"
        return _from_response(observed, job["result"])
    assert job["status"] == "failed", job["status"]
    return _from_error(observed, job["error"])


RUNNERS: Final = {"sync": run_sync, "stream": run_stream, "job": run_job}


# -- fixtures --------------------------------------------------------------------------------


@dataclass
class Bench:
    """The mock backend plus one bridge server per fault (started on first use)."""

    backend: CodexBackend
    root: Path
    table: Table
    fault: str | None = None
    server: ThreadServer | None = None

    def server_for(self, fault: str) -> ThreadServer:
        if self.fault != fault or self.server is None:
            self.close_server()
            sets = [
                'default_provider="codex-responses"',
                "providers.codex_responses.enabled=true",
                f'providers.codex_responses.endpoint="{self.backend.responses_url}"',
                "providers.codex_responses.transient_retry_backoff_ms=20",
                "runtime.cancellation_grace_ms=300",
                # far above what one fault's nine cases can reach: the breaker never opens
                "runtime.circuit_breaker.failure_threshold=1000",
                "runtime.circuit_breakers.codex-responses.failure_threshold=1000",
            ]
            self.server = start_in_thread(self.root / fault, sets)
            self.fault = fault
        return self.server

    def close_server(self) -> None:
        if self.server is not None:
            self.backend.release()
            self.server.stop()
            self.server = None


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    root = tmp_path_factory.mktemp("fault-matrix")
    codex_home = root / "codex-home"
    write_codex_auth(codex_home, access_token=BRIDGE_TOKEN, account_id=BRIDGE_ACCOUNT)
    table = Table(
        [
            "fault",
            "surface",
            "fallback",
            "answer",
            "served",
            "code",
            "retryable",
            "outcome",
            "attempts",
            "upstream",
            "mock",
            "breaker",
            "seconds",
        ]
    )
    with pytest.MonkeyPatch.context() as patch, CodexBackend(stall_timeout_s=10) as backend:
        patch.setenv("CODEX_HOME", str(codex_home))
        backend.quota.limit_resets_in_s = QUOTA_RESET_S
        state = Bench(backend, root, table)
        try:
            yield state
        finally:
            state.close_server()
    if table.rows:
        table.publish(
            "fault-matrix.txt",
            "Fault matrix: codex-responses over the loopback Codex mock, fallback to mock",
        )


def _breaker_matches(expected: str, before: int, after: int) -> bool:
    if expected == "+1":
        return after == before + 1
    if expected == "=":
        return after == before
    return after == 0


@pytest.mark.parametrize(("row", "surface"), CASES)
def test_fault(bench: Bench, row: Expectation, surface: str) -> None:
    server = bench.server_for(row.fault)
    backend = bench.backend
    mock = server.app.state.bridge.find_provider(MockProvider)
    assert mock is not None
    backend.reset()
    backend.script(*[row.behaviour] * 3)
    body: dict[str, Any] = {
        "operation": "generate",
        "prompt": "a red fox in the snow",
        "timeout_ms": row.timeout_ms,
    }
    if row.fallback != "none":
        body["routing"] = {"fallbacks": [{"provider": "mock"}], "fallback_policy": row.fallback}
    with server.client(timeout=30) as client:
        before = breakers(client)["codex-responses"]
        mock_before = mock.calls
        started = time.monotonic()
        observed = RUNNERS[surface](client, body)
        seconds = time.monotonic() - started
        # The bridge has answered: every upstream call it made is on its way to the mock.
        backend.wait_for_calls(row.upstream, timeout=5)
        upstream = backend.calls("responses")
        after = breakers(client)["codex-responses"]
    backend.release()  # free stalled mock handlers now, not at their own timeout
    mock_calls = mock.calls - mock_before
    breaker = f"{before['consecutive_failures']}->{after['consecutive_failures']}"
    bench.table.add(
        row.fault,
        surface,
        row.fallback,
        observed.surface_result,
        observed.served or "-",
        observed.code or "-",
        "-" if observed.retryable is None else ("yes" if observed.retryable else "no"),
        observed.outcome or "-",
        " ".join(f"{p}:{o}" for p, o in observed.attempts or ()) or "-",
        upstream,
        mock_calls,
        breaker,
        f"{seconds:.2f}",
    )

    assert observed.served == row.served
    assert observed.code == row.code
    assert observed.retryable == row.retryable
    assert observed.outcome == row.outcome
    assert observed.attempts == row.attempts
    assert upstream == row.upstream, backend.call_counts
    generation_calls = sum(backend.calls(route) for route in GENERATION_ROUTES)
    assert generation_calls == row.upstream, "no other generation route was touched"
    assert mock_calls == row.mock
    assert after["state"] == "closed"
    assert _breaker_matches(
        row.breaker, before["consecutive_failures"], after["consecutive_failures"]
    ), (row.breaker, breaker)
    # each surface's own form of the outcome: an HTTP status, a terminal event, a job state
    assert (
        observed.surface_result
        == {
            "sync": str(row.status),
            "stream": "200+completed" if row.served else "200+error",
            "job": "202+succeeded" if row.served else "202+failed",
        }[surface]
    )
    if row.code is not None and not row.stalls:
        # the provider's own upstream tries: its one safe transient retry, or none
        assert observed.provider_attempts == row.upstream
    if row.code == "rate_limited":
        assert observed.retry_after_ms is not None
        assert (QUOTA_RESET_S - 5) * 1000 <= observed.retry_after_ms <= QUOTA_RESET_S * 1000
        if surface == "sync":
            assert observed.retry_after_header is not None
            assert QUOTA_RESET_S - 5 <= int(observed.retry_after_header) <= QUOTA_RESET_S
    if row.outcome == "unknown":
        # never rerouted, never retried: the image may exist upstream
        assert mock_calls == 0 and upstream == 1
    if row.stalls:
        assert seconds < row.timeout_ms / 1000 + 3, "stopped at the deadline, not the stall"
    if row.fault == "slow_ok":
        assert seconds >= SLOW_OK_SECONDS


def test_matrix_covers_every_fault_and_fallback() -> None:
    faults = {row.fault for row in EXPECTATIONS}
    assert {(row.fault, row.fallback) for row in EXPECTATIONS} == {
        (fault, fallback) for fault in faults for fallback in ("none", "on_unavailable", "on_error")
    }
    assert len(EXPECTATIONS) == 3 * len(faults)


def test_an_open_breaker_fails_fast_then_falls_back_and_recovers(bench: Bench) -> None:
    """Past the threshold the circuit opens: no upstream call, 503 + Retry-After, the
    fallback serves (an open circuit always reroutes), and a probe closes it again."""
    bench.close_server()
    backend = bench.backend
    backend.reset()
    sets = [
        'default_provider="codex-responses"',
        "providers.codex_responses.enabled=true",
        f'providers.codex_responses.endpoint="{backend.responses_url}"',
        "providers.codex_responses.transient_retry_backoff_ms=20",
        "runtime.circuit_breakers.codex-responses.failure_threshold=2",
        "runtime.circuit_breakers.codex-responses.open_duration_ms=1500",
    ]
    server = start_in_thread(bench.root / "breaker", sets)
    body: dict[str, Any] = {"operation": "generate", "prompt": "a red fox in the snow"}
    fallback = {"fallbacks": [{"provider": "mock"}], "fallback_policy": "on_unavailable"}
    try:
        with server.client(timeout=30) as client:
            backend.script(*["http_500"] * 4)
            for _ in range(2):
                assert client.post("/v1/images", json=body).status_code == 502
            assert backend.calls("responses") == 4
            assert breakers(client)["codex-responses"]["state"] == "open"

            rejected = client.post("/v1/images", json=body)
            error = rejected.json()["error"]["imagegen_bridge"]
            assert rejected.status_code == 503
            assert error["code"] == "overloaded" and error["retryable"] is True
            assert error["details"]["circuit_state"] == "open"
            assert 0 < error["details"]["retry_after_ms"] <= 1500
            assert rejected.headers["retry-after"] in ("1", "2")

            rerouted = client.post("/v1/images", json={**body, "routing": fallback})
            assert rerouted.status_code == 200
            answer = rerouted.json()
            assert answer["provider"] == "mock"
            assert [a["outcome"] for a in answer["attempts"]] == ["failed", "succeeded"]
            assert answer["attempts"][0]["error_code"] == "overloaded"
            assert backend.calls("responses") == 4, "an open circuit makes no upstream call"
            opened = breakers(client)["codex-responses"]
            assert opened["rejected_calls"] == 2

            time.sleep(1.6)  # the open period ends; the next call is the half-open probe
            assert client.post("/v1/images", json=body).status_code == 200
            assert backend.calls("responses") == 5
            closed = breakers(client)["codex-responses"]
            assert closed["state"] == "closed"
            assert closed["consecutive_failures"] == 0
            assert closed["transitions"] >= opened["transitions"] + 2
    finally:
        server.stop()
