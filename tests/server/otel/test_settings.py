"""``[server.tracing.otel]`` over the standard ``OTEL_*`` variables: when traces are on, which
setting wins, and what a wrong variable says (its name, never its value)."""

from __future__ import annotations

import builtins
import logging
from typing import Any

import pytest

from imagebridge.config.model import OtelSettings
from imagebridge.contract.errors import BridgeError
from imagebridge.server.otel import start_tracing
from imagebridge.server.otel.settings import TraceExport, resolve_export

COLLECTOR = "http://collector.internal:4318"


def section(**keys: Any) -> OtelSettings:
    return OtelSettings.model_validate(keys)


def resolved(env: dict[str, str] | None = None, **keys: Any) -> TraceExport:
    export = resolve_export(section(**keys), env or {})
    assert export is not None
    return export


def refusal(env: dict[str, str], **keys: Any) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        resolve_export(section(**keys), env)
    assert caught.value.code.value == "configuration"
    return caught.value


@pytest.mark.parametrize(
    ("env", "keys"),
    [
        ({}, {}),  # the default: off
        ({"OTEL_SERVICE_NAME": "bridge"}, {}),  # naming a service is not asking for an export
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR}, {"enabled": False}),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_SDK_DISABLED": "true"}, {}),
        ({"OTEL_SDK_DISABLED": "TRUE"}, {"enabled": True}),  # the SDK's own switch
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_TRACES_EXPORTER": "none"}, {}),
    ],
)
def test_traces_are_off(env: dict[str, str], keys: dict[str, Any]) -> None:
    assert resolve_export(section(**keys), env) is None


def test_an_endpoint_variable_turns_them_on_with_the_opentelemetry_defaults() -> None:
    export = resolved({"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR + "/"})
    assert export.endpoint == COLLECTOR + "/v1/traces"
    assert (export.protocol, export.service_name) == ("http/protobuf", "imagegen-bridge")
    assert (export.sampler, export.sampler_arg) == ("parentbased_always_on", 1.0)
    assert (export.export_timeout_ms, export.schedule_delay_ms) == (10_000, 5_000)
    assert (export.max_queue_size, export.max_export_batch_size) == (2048, 512)
    assert export.headers == {} and not export.explicit


def test_the_signal_endpoint_is_used_as_it_is_and_wins_over_the_generic_one() -> None:
    export = resolved(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://generic:4318",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:9999/custom/path",
        }
    )
    assert export.endpoint == "http://traces:9999/custom/path"


def test_enabled_alone_exports_to_the_local_default_of_the_protocol() -> None:
    assert resolved(enabled=True).endpoint == "http://localhost:4318/v1/traces"
    assert resolved(enabled=True, protocol="grpc").endpoint == "http://localhost:4317"
    assert resolved(enabled=True).explicit


def test_grpc_endpoints_get_no_path() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    export = resolved(env)
    assert (export.protocol, export.endpoint) == ("grpc", "http://collector:4317")


def test_a_key_that_is_set_wins_over_its_variables() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://variable:4318",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://variable:4318/v1/traces",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_SERVICE_NAME": "from-variable",
        "OTEL_TRACES_SAMPLER": "always_off",
        "OTEL_TRACES_SAMPLER_ARG": "0.5",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1000",
        "OTEL_BSP_SCHEDULE_DELAY": "1000",
        "OTEL_BSP_MAX_QUEUE_SIZE": "100",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10",
        "OTEL_EXPORTER_OTLP_HEADERS": "token=variable",
        "BRIDGE_OTLP_HEADERS": "token=key",
    }
    export = resolved(
        env,
        endpoint=COLLECTOR,
        protocol="http/protobuf",
        service_name="from-key",
        sampler="parentbased_traceidratio",
        sampler_arg=0.25,
        export_timeout_ms=2000,
        schedule_delay_ms=200,
        max_queue_size=4000,
        max_export_batch_size=1000,
        headers_env="BRIDGE_OTLP_HEADERS",
    )
    assert export.endpoint == COLLECTOR + "/v1/traces"
    assert (export.protocol, export.service_name) == ("http/protobuf", "from-key")
    assert (export.sampler, export.sampler_arg) == ("parentbased_traceidratio", 0.25)
    assert (export.export_timeout_ms, export.schedule_delay_ms) == (2000, 200)
    assert (export.max_queue_size, export.max_export_batch_size) == (4000, 1000)
    assert export.headers == {"token": "key"}


def test_unset_keys_take_the_variables() -> None:
    export = resolved(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR,
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource,team=images",
            "OTEL_TRACES_SAMPLER": "traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.1",
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "3000",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "9000",
            "OTEL_BSP_MAX_QUEUE_SIZE": "64",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=1,b=x%20y",
            "OTEL_EXPORTER_OTLP_HEADERS": "c=3",
        }
    )
    assert export.protocol == "grpc"  # the signal's variable first
    assert export.service_name == "from-resource"  # no OTEL_SERVICE_NAME: the resource's
    assert export.resource == {"service.name": "from-resource", "team": "images"}
    assert (export.sampler, export.sampler_arg) == ("traceidratio", 0.1)
    assert export.export_timeout_ms == 3000
    assert (export.max_queue_size, export.max_export_batch_size) == (64, 64)
    assert export.headers == {"a": "1", "b": "x y"}


def test_a_service_name_variable_wins_over_the_resource_attribute() -> None:
    export = resolved(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR,
            "OTEL_SERVICE_NAME": "named",
            "OTEL_RESOURCE_ATTRIBUTES": "service.name=other",
        }
    )
    assert export.service_name == "named"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:secret-password@collector:4318"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/v1/traces?secret-token=1"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_TRACES_SAMPLER", "secret-sampler"),
        ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "-1"),
        ("OTEL_BSP_SCHEDULE_DELAY", "secret"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization secret-token"),
        ("OTEL_RESOURCE_ATTRIBUTES", "=secret"),
        ("OTEL_TRACES_EXPORTER", "console"),
    ],
)
def test_a_wrong_variable_is_refused_by_name(variable: str, value: str) -> None:
    env = {variable: value}
    if "ENDPOINT" not in variable:  # an endpoint turns traces on
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = COLLECTOR
    if variable == "OTEL_TRACES_SAMPLER_ARG":
        env["OTEL_TRACES_SAMPLER"] = "traceidratio"
    error = refusal(env)
    assert error.details == {"variable": variable}
    assert variable in error.message
    assert "secret" not in error.message


def test_headers_env_must_name_a_set_variable() -> None:
    error = refusal({}, enabled=True, headers_env="MISSING_HEADERS")
    assert error.details == {"field": "server.tracing.otel.headers_env"}


def test_traces_asked_for_without_the_extra(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``enabled = true`` without the SDK is refused; an endpoint variable alone warns."""
    real_import = builtins.__import__

    def no_sdk(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry.sdk"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sdk)
    with pytest.raises(BridgeError) as caught:
        start_tracing(section(enabled=True), {})
    assert "imagebridge[otel]" in caught.value.message
    assert caught.value.details == {"field": "server.tracing.otel.enabled"}
    with caplog.at_level(logging.WARNING, logger="imagebridge.server"):
        assert start_tracing(section(), {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR}) is None
    assert "otel extra is not installed" in caplog.text


def test_traces_off_build_nothing() -> None:
    assert start_tracing(section(), {}) is None
