"""OpenTelemetry traces as a collector receives them: one trace per request, the tree drawn
in docs/operations.md §4 (Traces), continuing the caller's ``traceparent``.

Each test starts a real bridge exporting to an OTLP receiver in this process
(:mod:`tests.support.otlp`: an HTTP server on 127.0.0.1 decoding the real
``ExportTraceServiceRequest`` protobuf messages, or its gRPC twin) and reads the spans back:
their names, parents, attributes and status, and the ids the answer and the logs carry.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.provider import ProviderContext
from imagebridge.engine.served import mark_served
from imagebridge.server.tracing import configure_logging
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of, with_mock
from tests.support.fakes import FakeProvider
from tests.support.jobs_api import finished_job
from tests.support.otlp import (
    SERVER_KIND,
    OtlpGrpcReceiver,
    OtlpHttpReceiver,
    ReceivedSpan,
    Trace,
)
from tests.support.waiting import wait_until

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
BODY: dict[str, Any] = {
    "operation": "generate",
    "prompt": "a fox in the snow",
    "parameters": {"size": "16x16"},
}
ARTIFACT = {**BODY, "output": {"response_format": "artifact"}}
PLAIN = {"operation": "generate", "prompt": "a fox"}
"""For the test providers (their capabilities list no sizes)."""

# The trees docs/operations.md draws (children in start order; admitted at once, so no
# admission spans: test_a_request_that_waits_in_line_has_an_admission_span).
ATTEMPT_PUBLISHING = ("provider.attempt", (("verification", ()), ("artifact.publish", ())))
REQUEST_TREE = ("POST /v1/images", (ATTEMPT_PUBLISHING,))


@pytest.fixture
def receiver() -> Iterator[OtlpHttpReceiver]:
    with OtlpHttpReceiver() as running:
        yield running


def traced(endpoint: str, *sets: str) -> tuple[str, ...]:
    """Traces on through the config keys, exported every 50 ms."""
    return (
        f'server.tracing.otel.endpoint="{endpoint}"',
        "server.tracing.otel.schedule_delay_ms=50",
        *sets,
    )


def traceparent(trace_id: str = CALLER_TRACE, span_id: str = CALLER_SPAN, flags: str = "01") -> str:
    return f"00-{trace_id}-{span_id}-{flags}"


def served_trace(receiver: OtlpHttpReceiver | OtlpGrpcReceiver, trace_id: str) -> Trace:
    """The trace ``trace_id`` once its server span (the last to end) has arrived."""
    receiver.wait(
        lambda spans: any(s.trace_id == trace_id and s.kind == SERVER_KIND for s in spans)
    )
    return receiver.trace(trace_id)


def answer_ids(response: httpx.Response) -> tuple[str, str, str]:
    _, trace_id, span_id, flags = response.headers["traceparent"].split("-")
    return trace_id, span_id, flags


def post(server: LiveServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    with server.client() as client:
        return client.post("/v1/images", json=body, headers=headers)


def test_one_trace_per_request_continuing_the_callers_traceparent(
    serve: ServeFactory, receiver: OtlpHttpReceiver
) -> None:
    server = serve(*traced(receiver.endpoint))
    callers = [
        (CALLER_TRACE, CALLER_SPAN),
        ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"),
    ]
    answers = [post(server, ARTIFACT, traceparent=traceparent(*caller)) for caller in callers]
    assert [answer.status_code for answer in answers] == [200, 200]
    for (trace_id, parent_id), answer in zip(callers, answers, strict=True):
        trace = served_trace(receiver, trace_id)
        root = trace.root
        assert root.kind == SERVER_KIND and root.parent_id == parent_id
        assert trace.tree() == REQUEST_TREE
        # the answer names this very span: the caller's trace goes on from it
        assert answer_ids(answer) == (trace_id, root.span_id, "01")
        assert root.attributes["http.route"] == "/v1/images"
        assert root.attributes["http.response.status_code"] == 200
        assert root.attributes["imagebridge.request_id"] == answer.headers["x-request-id"]
        assert root.resource["service.name"] == "imagegen-bridge"
        attempt = trace.one("provider.attempt")
        assert attempt.attributes == {
            "imagebridge.provider": "mock",
            "imagebridge.model": "mock-image-1",
            "imagebridge.outcome": "succeeded",
            "imagebridge.billing": "billed",
        }
        publish = trace.one("artifact.publish")
        assert publish.attributes["imagebridge.artifacts.backend"] == "filesystem"
        assert publish.attributes["imagebridge.artifact.id"] == answer.json()["data"][0]["id"]
        assert not any(span.failed for span in trace.spans)
    # one trace per request, nothing else (the spans of both requests arrived by now)
    assert receiver.trace_ids() == {trace_id for trace_id, _ in callers}


def test_a_request_without_traceparent_starts_a_trace_of_its_own(
    serve: ServeFactory, receiver: OtlpHttpReceiver
) -> None:
    server = serve(*traced(receiver.endpoint))
    answer = post(server, BODY)
    trace_id, span_id, _ = answer_ids(answer)
    trace = served_trace(receiver, trace_id)
    assert trace.root.span_id == span_id and trace.root.parent_id == ""
    # the answer's b64_json image is kept as an artifact after the answer, inside the request
    assert trace.tree() == (
        "POST /v1/images",
        (("provider.attempt", (("verification", ()),)), ("artifact.publish", ())),
    )


def test_a_fan_out_request_has_a_child_per_upstream_call(
    serve: ServeFactory, receiver: OtlpHttpReceiver
) -> None:
    server = serve(*traced(receiver.endpoint, "providers.mock.native_count=1"))
    body = {
        **ARTIFACT,
        "prompt": "[mock:fail-output=1] three foxes",
        "parameters": {"size": "16x16", "n": 3, "failure_policy": "best_effort"},
        "policies": {"batch_execution": "sequential"},
    }
    answer = post(server, body, traceparent=traceparent())
    assert answer.status_code == 200, answer.text
    trace = served_trace(receiver, CALLER_TRACE)
    attempt = trace.one("provider.attempt")
    assert [child.name for child in trace.children(attempt)] == [
        "fanout.child",
        "fanout.child",
        "fanout.child",
        "verification",
        "artifact.publish",
        "artifact.publish",
    ]
    children = trace.named("fanout.child")
    assert all(child.parent_id == attempt.span_id for child in children)
    by_offset = {child.attributes["imagebridge.fanout.offset"]: child for child in children}
    assert sorted(by_offset) == [0, 1, 2]
    assert {child.attributes["imagebridge.fanout.count"] for child in children} == {1}
    for offset in (0, 2):
        assert by_offset[offset].attributes["imagebridge.outcome"] == "succeeded"
        assert by_offset[offset].attributes["imagebridge.billing"] == "billed"
        assert not by_offset[offset].failed
    failed = by_offset[1]
    assert failed.attributes["imagebridge.outcome"] == "failed"
    assert failed.attributes["imagebridge.error.code"] == "upstream"
    assert failed.attributes["error.type"] == "upstream"
    assert failed.failed
    # the attempt served two of three images: it succeeded, saying one output failed
    assert attempt.attributes["imagebridge.outcome"] == "succeeded"
    assert attempt.attributes["imagebridge.failed_outputs"] == 1


def test_a_request_that_waits_in_line_has_an_admission_span(
    serve: ServeFactory, receiver: OtlpHttpReceiver
) -> None:
    server = serve(*traced(receiver.endpoint), "runtime.global.max_concurrent=1")
    assert post(server, BODY).status_code == 200  # warm: the next two start at once
    with server.client() as client, ThreadPoolExecutor(1) as pool:
        slow = pool.submit(
            client.post, "/v1/images", json={**BODY, "prompt": "[mock:latency=1000] first"}
        )
        assert wait_until(lambda: mock_of(server).in_flight == 1)  # it holds the only slot
        waited = post(server, BODY, traceparent=traceparent())
        assert slow.result().status_code == 200
    assert waited.status_code == 200
    assert waited.json()["timings"]["queue_ms"] >= 200
    trace = served_trace(receiver, CALLER_TRACE)
    assert trace.tree() == (
        "POST /v1/images",
        (
            ("admission", ()),
            ("provider.attempt", (("verification", ()),)),
            ("artifact.publish", ()),
        ),
    )
    admission = trace.one("admission")
    assert admission.attributes == {"imagebridge.gate": "global"}
    # the span is the wait the answer reports
    assert admission.end_ns - admission.start_ns >= 200_000_000


def _served_by(account: str) -> Any:
    async def behaviour(request: ImageRequest, context: ProviderContext) -> ImageResponse:
        response = FakeProvider("backup").response(request, context)
        mark_served(response, account)
        return response

    return behaviour


def test_a_fallback_is_two_attempts_and_an_unknown_outcome_one(
    serve: ServeFactory, receiver: OtlpHttpReceiver
) -> None:
    refused = BridgeError(ErrorCode.RATE_LIMITED, "try later", details={"account": "acct-a"})
    primary = FakeProvider("primary", fail=refused)
    backup = FakeProvider("backup", behaviour=_served_by("acct-b"))
    unknown = FakeProvider(
        "lost", fail=BridgeError(ErrorCode.TIMEOUT, "lost").mark_unknown_outcome()
    )
    server = serve(*traced(receiver.endpoint), providers=with_mock(primary, backup, unknown))
    routing = {"provider": "primary", "fallbacks": [{"provider": "backup"}]}
    answer = post(server, {**PLAIN, "routing": routing}, traceparent=traceparent())
    assert answer.status_code == 200, answer.text
    trace = served_trace(receiver, CALLER_TRACE)
    assert trace.tree() == (
        "POST /v1/images",
        (
            ("provider.attempt", ()),
            ("provider.attempt", (("verification", ()),)),
            ("artifact.publish", ()),
        ),
    )
    first, second = sorted(trace.named("provider.attempt"), key=lambda span: span.start_ns)
    assert first.attributes == {
        "imagebridge.provider": "primary",
        "imagebridge.account": "acct-a",
        "imagebridge.outcome": "failed",
        "imagebridge.error.code": "rate_limited",
        "imagebridge.billing": "not_billed",
        "error.type": "rate_limited",
    }
    assert first.failed
    assert second.attributes["imagebridge.provider"] == "backup"
    assert second.attributes["imagebridge.account"] == "acct-b"
    assert second.attributes["imagebridge.billing"] == "billed"
    assert not second.failed and not trace.root.failed

    other_trace = "5bf92f3577b34da6a3ce929d0e0e4737"
    routing = {"provider": "lost", "fallbacks": [{"provider": "backup"}]}
    lost = post(server, {**PLAIN, "routing": routing}, traceparent=traceparent(other_trace))
    assert lost.status_code >= 500
    trace = served_trace(receiver, other_trace)
    attempt = trace.one("provider.attempt")  # an unknown outcome never falls back
    assert attempt.attributes["imagebridge.billing"] == "unknown"
    assert attempt.attributes["imagebridge.error.code"] == "timeout"
    assert trace.root.failed and trace.root.attributes["http.response.status_code"] >= 500
    assert backup.calls == 1


def _job(client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    submitted = client.post("/v1/jobs", json=body, headers={"traceparent": traceparent()})
    assert submitted.status_code == 202, submitted.text
    return finished_job(client, submitted.json()["id"])


def job_trace(receiver: OtlpHttpReceiver, job_id: str) -> Trace:
    """The trace whose root is the ``job`` span of ``job_id``, once it has ended."""

    def ended(spans: list[ReceivedSpan]) -> bool:
        return any(
            s.name == "job" and s.attributes.get("imagebridge.job.id") == job_id for s in spans
        )

    receiver.wait(ended)
    (root,) = (
        s
        for s in receiver.spans
        if s.name == "job" and s.attributes.get("imagebridge.job.id") == job_id
    )
    return receiver.trace(root.trace_id)


JOB_TREE = (
    "job",
    (
        ("job.claim", ()),
        ("job.run", (ATTEMPT_PUBLISHING,)),
    ),
)


def test_a_job_is_claimed_and_run_under_one_trace(
    serve: ServeFactory, receiver: OtlpHttpReceiver
) -> None:
    server = serve(*traced(receiver.endpoint))
    with server.client() as client:
        job = _job(client, BODY)
    assert job["status"] == "succeeded"
    trace = job_trace(receiver, job["id"])
    assert trace.tree() == JOB_TREE
    root = trace.root
    assert root.parent_id == "" and root.trace_id != CALLER_TRACE  # a trace of its own
    assert root.attributes["imagebridge.job.shared"] is False
    claim = trace.one("job.claim")
    assert claim.attributes["imagebridge.job.id"] == job["id"]
    assert root.start_ns == claim.start_ns <= claim.end_ns <= trace.one("job.run").start_ns
    assert trace.one("job.run").attributes["imagebridge.outcome"] == "succeeded"
    # the submission is the caller's trace: the POST, nothing of the run
    submission = served_trace(receiver, CALLER_TRACE)
    assert submission.tree() == ("POST /v1/jobs", ())


def test_a_failed_job_says_why_on_its_run(serve: ServeFactory, receiver: OtlpHttpReceiver) -> None:
    server = serve(*traced(receiver.endpoint))
    with server.client() as client:
        job = _job(client, {**BODY, "prompt": "[mock:fail=upstream] a fox"})
    assert job["status"] == "failed"
    run = job_trace(receiver, job["id"]).one("job.run")
    assert run.failed
    assert run.attributes["imagebridge.outcome"] == "failed"
    assert run.attributes["imagebridge.error.code"] == "upstream"


@pytest.mark.postgres
def test_a_shared_queue_job_is_claimed_and_run_under_one_trace(
    serve: ServeFactory, receiver: OtlpHttpReceiver, postgres_server: Any, postgres_schema: str
) -> None:
    password_env = "TEST_BRIDGE_PG_PASSWORD"
    url = f"postgresql://bridge@{postgres_server.host}:{postgres_server.port}/imagebridge_test"
    server = serve(
        *traced(receiver.endpoint),
        f'server.jobs.database="{url}"',
        f'server.jobs.postgres_schema="{postgres_schema}"',
        f'server.jobs.postgres_password_env="{password_env}"',
        "server.jobs.poll_interval_ms=50",
        'server.jobs.instance_id="traced-1"',
        env={password_env: postgres_server.password},
    )
    with server.client() as client:
        job = _job(client, BODY)
    assert job["status"] == "succeeded"
    trace = job_trace(receiver, job["id"])
    assert trace.tree() == JOB_TREE
    assert trace.root.attributes["imagebridge.job.shared"] is True
    assert trace.root.attributes["imagebridge.instance"] == "traced-1"
    # an idle instance polls the queue every 50 ms: a claim that finds nothing is no trace
    time.sleep(0.5)
    assert len([s for s in receiver.spans if s.name == "job.claim"]) == 1


@pytest.mark.s3
def test_publishing_to_s3_is_a_span_of_the_attempt(
    serve: ServeFactory,
    receiver: OtlpHttpReceiver,
    s3_server: Any,
    s3_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRACE_S3_KEY", s3_server.access_key_id)  # the wiring reads os.environ
    monkeypatch.setenv("TRACE_S3_SECRET", s3_server.secret_access_key)
    server = serve(
        *traced(receiver.endpoint),
        'artifacts.backend="s3"',
        f'artifacts.s3.endpoint="{s3_server.endpoint}"',
        f'artifacts.s3.region="{s3_server.region}"',
        f'artifacts.s3.bucket="{s3_server.bucket}"',
        f'artifacts.s3.key_prefix="{s3_prefix}"',
        'artifacts.s3.addressing_style="path"',
        'artifacts.s3.access_key_id_env="TRACE_S3_KEY"',
        'artifacts.s3.secret_access_key_env="TRACE_S3_SECRET"',
    )
    answer = post(server, ARTIFACT, traceparent=traceparent())
    assert answer.status_code == 200, answer.text
    trace = served_trace(receiver, CALLER_TRACE)
    assert trace.tree() == REQUEST_TREE
    publish = trace.one("artifact.publish")
    assert publish.attributes["imagebridge.artifacts.backend"] == "s3"
    assert publish.attributes["imagebridge.artifact.id"] == answer.json()["data"][0]["id"]
    assert publish.parent_id == trace.one("provider.attempt").span_id
    with server.client() as client:  # the object is there: the span was the real write
        stored = client.get(f"/v1/artifacts/{publish.attributes['imagebridge.artifact.id']}")
    assert stored.status_code == 200


def test_the_standard_variables_configure_a_grpc_export_with_headers(serve: ServeFactory) -> None:
    with OtlpGrpcReceiver() as grpc_receiver:
        server = serve(
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": grpc_receiver.endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_HEADERS": "x-collector-token=s3cr%3Dt",
                "OTEL_SERVICE_NAME": "bridge-west",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
                "OTEL_BSP_SCHEDULE_DELAY": "50",
            }
        )
        answer = post(server, BODY, traceparent=traceparent())
        assert answer.status_code == 200
        trace = served_trace(grpc_receiver, CALLER_TRACE)
        assert trace.root.parent_id == CALLER_SPAN
        assert trace.root.resource["service.name"] == "bridge-west"
        assert trace.root.resource["deployment.environment"] == "test"
        assert grpc_receiver.headers[0]["x-collector-token"] == "s3cr=t"


def test_keys_win_over_the_variables_and_enabled_false_wins_over_both(
    serve: ServeFactory, receiver: OtlpHttpReceiver
) -> None:
    with OtlpHttpReceiver() as by_variable:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": by_variable.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        keyed = serve(*traced(receiver.endpoint), env=env)
        assert post(keyed, BODY, traceparent=traceparent()).status_code == 200
        served_trace(receiver, CALLER_TRACE)
        off = serve("server.tracing.otel.enabled=false", env=env)
        other = "6bf92f3577b34da6a3ce929d0e0e4738"
        answer = post(off, BODY, traceparent=traceparent(other))
        # untraced: the answer still continues the caller's trace (a new span id)
        trace_id, span_id, flags = answer_ids(answer)
        assert (trace_id, flags) == (other, "01") and span_id != CALLER_SPAN
        by_variable_server = serve(env=env)  # only the variable: it is used
        third = "7bf92f3577b34da6a3ce929d0e0e4739"
        post(by_variable_server, BODY, traceparent=traceparent(third))
        served_trace(by_variable, third)
        time.sleep(0.5)  # a 50 ms export delay: the untraced request would be there by now
        assert other not in by_variable.trace_ids() | receiver.trace_ids()
        assert by_variable.trace_ids() == {third}


def test_a_caller_that_does_not_sample_is_not_exported_but_still_continued(
    serve: ServeFactory, receiver: OtlpHttpReceiver
) -> None:
    server = serve(*traced(receiver.endpoint))
    unsampled = post(server, BODY, traceparent=traceparent(flags="00"))
    assert answer_ids(unsampled)[0] == CALLER_TRACE and answer_ids(unsampled)[2] == "00"
    sampled_trace = "8bf92f3577b34da6a3ce929d0e0e473a"
    post(server, BODY, traceparent=traceparent(sampled_trace))
    served_trace(receiver, sampled_trace)  # exported after the unsampled one ended
    assert CALLER_TRACE not in receiver.trace_ids()


def test_probes_and_scrapes_are_not_traced(serve: ServeFactory, receiver: OtlpHttpReceiver) -> None:
    server = serve(*traced(receiver.endpoint), "server.metrics.enabled=true")
    with server.client() as client:
        for path in ("/health/live", "/health/ready", "/metrics"):
            assert client.get(path, headers={"traceparent": traceparent()}).status_code == 200
        last = client.get("/v1/providers", headers={"traceparent": traceparent("9" * 32)})
    assert last.status_code == 200
    served_trace(receiver, "9" * 32)
    assert receiver.trace_ids() == {"9" * 32}


class _LoggingProvider(FakeProvider):
    """Logs one line from inside its call, as a provider's warning would be."""

    async def execute(self, request: ImageRequest, context: ProviderContext) -> ImageResponse:
        logging.getLogger("imagebridge.providers.test").warning("upstream was slow")
        return await super().execute(request, context)


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    configure_logging(True, stream)
    try:
        yield stream
    finally:
        configure_logging(False)
        root = logging.getLogger("imagebridge")
        root.propagate = True
        root.setLevel(logging.NOTSET)


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_log_lines_carry_the_trace_and_span_ids(
    serve: ServeFactory, receiver: OtlpHttpReceiver, log_stream: io.StringIO
) -> None:
    slow = _LoggingProvider("slow")
    server = serve(*traced(receiver.endpoint), providers=with_mock(slow))
    answer = post(server, {**PLAIN, "routing": {"provider": "slow"}}, traceparent=traceparent())
    assert answer.status_code == 200
    trace = served_trace(receiver, CALLER_TRACE)
    lines = _lines(log_stream)
    (warning,) = [line for line in lines if line["message"] == "upstream was slow"]
    (access,) = [
        line
        for line in lines
        if line["message"] == "request completed" and line.get("route") == "/v1/images"
    ]
    # the provider's line names the innermost span (its attempt), the access line the request's
    assert (warning["trace_id"], warning["span_id"]) == (
        CALLER_TRACE,
        trace.one("provider.attempt").span_id,
    )
    assert (access["trace_id"], access["span_id"]) == (CALLER_TRACE, trace.root.span_id)


def test_without_traces_log_lines_carry_the_requests_ids(
    serve: ServeFactory, log_stream: io.StringIO
) -> None:
    slow = _LoggingProvider("slow")
    server = serve(providers=with_mock(slow))
    answer = post(server, {**PLAIN, "routing": {"provider": "slow"}}, traceparent=traceparent())
    trace_id, span_id, _ = answer_ids(answer)
    (warning,) = [line for line in _lines(log_stream) if line["message"] == "upstream was slow"]
    assert (warning["trace_id"], warning["span_id"]) == (trace_id, span_id)
    assert trace_id == CALLER_TRACE
