"""OTLP trace receivers for tests: what a collector gets from the bridge, decoded.

:class:`OtlpHttpReceiver` is an HTTP server on ``127.0.0.1`` (a free port, a thread) that
answers ``POST /v1/traces`` the way a collector does: it parses the body as the real
``ExportTraceServiceRequest`` protobuf message (``opentelemetry-proto``), keeps every
span, and answers an ``ExportTraceServiceResponse``. :class:`OtlpGrpcReceiver` does the
same over gRPC (``TraceService/Export``). Both record the request headers too, so a test
can see the configured export headers arrive.

Spans are kept as :class:`ReceivedSpan` (hex ids, the parent's id, attributes as plain
values, the resource's attributes); :meth:`Receiver.trace` returns one trace's spans and
:meth:`Trace.tree` draws its parent-child structure by span name, which is what the tests
compare with the tree docs/operations.md draws.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

__all__ = ["OtlpGrpcReceiver", "OtlpHttpReceiver", "ReceivedSpan", "Trace"]

SERVER_KIND = Span.SPAN_KIND_SERVER
ERROR_STATUS = Status.STATUS_CODE_ERROR


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    pairs: list[KeyValue] = list(items)
    return {pair.key: _value(pair.value) for pair in pairs}


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    attributes: dict[str, Any]
    status: int
    start_ns: int
    end_ns: int
    resource: dict[str, Any]

    @property
    def failed(self) -> bool:
        return self.status == ERROR_STATUS


@dataclass
class Trace:
    """The spans of one trace, as received."""

    spans: list[ReceivedSpan]

    def named(self, name: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.name == name]

    def one(self, name: str) -> ReceivedSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [span.name for span in self.spans])
        return found[0]

    def children(self, parent: ReceivedSpan) -> list[ReceivedSpan]:
        return sorted(
            (span for span in self.spans if span.parent_id == parent.span_id),
            key=lambda span: span.start_ns,
        )

    @property
    def root(self) -> ReceivedSpan:
        ids = {span.span_id for span in self.spans}
        roots = [span for span in self.spans if span.parent_id not in ids]
        assert len(roots) == 1, [(span.name, span.parent_id) for span in roots]
        return roots[0]

    def tree(self, span: ReceivedSpan | None = None) -> tuple[Any, ...]:
        """``(name, (child tree, …))``, children in start order: the drawn tree."""
        node = span or self.root
        return (node.name, tuple(self.tree(child) for child in self.children(node)))


def _spans(message: trace_service_pb2.ExportTraceServiceRequest) -> list[ReceivedSpan]:
    spans: list[ReceivedSpan] = []
    for resource_spans in message.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=span.kind,
                        attributes=_attributes(span.attributes),
                        status=span.status.code,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        resource=resource,
                    )
                )
    return spans


class Receiver:
    """What both receivers keep: the decoded spans and each export's headers."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.headers: list[dict[str, str]] = []
        self.exports = 0
        self._lock = threading.Lock()

    def _keep(
        self, message: trace_service_pb2.ExportTraceServiceRequest, headers: dict[str, str]
    ) -> None:
        with self._lock:
            self.spans.extend(_spans(message))
            self.headers.append(headers)
            self.exports += 1

    def wait(self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 15.0) -> None:
        """Until ``predicate(spans)`` holds (the export is batched), or fail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return
            time.sleep(0.05)
        with self._lock:
            names = sorted({span.name for span in self.spans})
        raise AssertionError(f"the expected spans did not arrive; received: {names}")

    def trace(self, trace_id: str) -> Trace:
        with self._lock:
            return Trace([span for span in self.spans if span.trace_id == trace_id])

    def trace_ids(self) -> set[str]:
        with self._lock:
            return {span.trace_id for span in self.spans}

    def clear(self) -> None:
        with self._lock:
            self.spans.clear()
            self.headers.clear()


class OtlpHttpReceiver(Receiver):
    """OTLP/HTTP with protobuf bodies on ``http://127.0.0.1:<port>`` (``/v1/traces``)."""

    def __init__(self) -> None:
        super().__init__()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                if self.headers.get("content-type") != "application/x-protobuf":
                    self.send_error(415)
                    return
                message = trace_service_pb2.ExportTraceServiceRequest()
                message.ParseFromString(body)
                receiver._keep(message, {k.lower(): v for k, v in self.headers.items()})
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpHttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


class OtlpGrpcReceiver(Receiver):
    """OTLP/gRPC (``opentelemetry.proto.collector.trace.v1.TraceService``) on 127.0.0.1."""

    def __init__(self) -> None:
        super().__init__()
        import grpc

        receiver = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(
                self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
            ) -> trace_service_pb2.ExportTraceServiceResponse:
                headers = dict(context.invocation_metadata())
                receiver._keep(request, headers)
                return trace_service_pb2.ExportTraceServiceResponse()

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpGrpcReceiver:
        self._server.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.stop(grace=None).wait(10)
