"""Prometheus exposition: names, label sets, buckets, runtime gauges."""

from __future__ import annotations

from imagebridge.server.metrics import BridgeMetrics
from tests.support.fakes import FakeProvider
from tests.support.runtime import make_runtime


def test_exposition_has_the_original_families_and_labels() -> None:
    provider = FakeProvider("ready")
    runtime = make_runtime(provider)
    metrics = BridgeMetrics(runtime, runtime.registry.providers)
    metrics.record(
        provider="ready",
        code=None,
        total_ms=1500,
        provider_ms=1200,
        queue_ms=10,
        generated_bytes=70,
        normalizations=2,
    )
    metrics.record(provider="ready", code="invalid_request", total_ms=3)
    text = metrics.render().decode()
    success = 'code="none",provider="ready",result="success"'
    failure = 'code="invalid_request",provider="ready",result="error"'
    assert f"imagegen_bridge_requests_total{{{success}}} 1.0" in text
    assert f"imagegen_bridge_requests_total{{{failure}}} 1.0" in text
    bucket = 'imagegen_bridge_operation_duration_seconds_bucket{code="none",le="%s",'
    bucket += 'provider="ready",result="success"} %s'
    assert bucket % ("0.100", "0.0") in text
    assert bucket % ("1.000", "0.0") in text
    assert bucket % ("5.000", "1.0") in text
    assert bucket % ("1800.000", "1.0") in text
    assert bucket % ("+Inf", "1.0") in text
    assert f"imagegen_bridge_operation_duration_seconds_sum{{{success}}} 1.5" in text
    assert f"imagegen_bridge_generated_bytes_total{{{success}}} 70.0" in text
    assert f"imagegen_bridge_normalizations_total{{{success}}} 2.0" in text
    assert f"imagegen_bridge_provider_duration_seconds_count{{{success}}} 1.0" in text
    assert f"imagegen_bridge_provider_duration_seconds_count{{{failure}}}" not in text
    assert 'imagegen_bridge_queue_depth{provider="none",scope="global"} 0.0' in text
    assert 'imagegen_bridge_queue_depth{provider="ready",scope="provider"} 0.0' in text
    assert 'imagegen_bridge_circuit_state{provider="ready",state="closed"} 1.0' in text
    assert 'imagegen_bridge_circuit_state{provider="ready",state="open"} 0.0' in text
    assert 'imagegen_bridge_circuit_rejections_total{provider="ready"} 0.0' in text
    assert "_created" not in text
    assert "imagegen_bridge_provider_restarts_total{" not in text  # no child process here


def test_each_app_has_its_own_registry() -> None:
    runtime = make_runtime(FakeProvider("ready"))
    first = BridgeMetrics(runtime, runtime.registry.providers)
    second = BridgeMetrics(runtime, runtime.registry.providers)
    first.record(provider="ready", code=None, total_ms=1)
    assert "requests_total{" in first.render().decode()
    assert "requests_total{" not in second.render().decode()
