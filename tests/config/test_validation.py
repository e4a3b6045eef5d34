"""Semantic checks of the key tree's values: one case per rule, plus the list's shape."""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.application.codex_app_server import app_server_options
from imagebridge.config import BridgeConfig, ConfigIssue, check, require_valid
from imagebridge.contract.errors import BridgeError, ErrorCode

MiB = 1024 * 1024


def _issues(data: dict[str, Any]) -> set[tuple[str, str]]:
    return {(issue.field, issue.code) for issue in check(BridgeConfig.model_validate(data))}


def _nest(dotted: str, value: Any) -> dict[str, Any]:
    keys = dotted.split(".")
    tree: dict[str, Any] = {keys[-1]: value}
    for key in reversed(keys[:-1]):
        tree = {key: tree}
    return tree


def _merge(*trees: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for tree in trees:
        for key, value in tree.items():
            if isinstance(value, dict) and isinstance(result.get(key), dict):
                result[key] = _merge(result[key], value)
            else:
                result[key] = value
    return result


def _cfg(**dotted: Any) -> dict[str, Any]:
    """``_cfg(**{"a.b": 1})`` → ``{"a": {"b": 1}}``."""
    return _merge(*(_nest(key, value) for key, value in dotted.items()))


# (case id, settings, expected (field, code) issue)
RULES: list[tuple[str, dict[str, Any], tuple[str, str]]] = [
    ("version", _cfg(version=2), ("version", "unsupported")),
    ("provider-name", _cfg(default_provider="Codex"), ("default_provider", "invalid")),
    ("default-disabled", _cfg(default_provider="openai"), ("default_provider", "disabled")),
    (
        "none-enabled",
        _cfg(
            **{
                "providers.codex_app_server.enabled": False,
                "providers.codex_responses.enabled": False,
                "providers.mock.enabled": False,
            }
        ),
        ("providers", "required"),
    ),
    (
        "timeout-zero",
        _cfg(**{"runtime.default_timeout_ms": 0}),
        ("runtime.default_timeout_ms", "out_of_range"),
    ),
    (
        "timeout-above-max",
        _cfg(**{"runtime.default_timeout_ms": 2_000, "runtime.request.max_timeout_ms": 1_000}),
        ("runtime.default_timeout_ms", "out_of_range"),
    ),
    (
        "grace-zero",
        _cfg(**{"runtime.cancellation_grace_ms": 0}),
        ("runtime.cancellation_grace_ms", "out_of_range"),
    ),
    (
        "grace-high",
        _cfg(**{"runtime.cancellation_grace_ms": 30_001}),
        ("runtime.cancellation_grace_ms", "out_of_range"),
    ),
    (
        "shutdown-zero",
        _cfg(**{"runtime.shutdown_grace_ms": 0}),
        ("runtime.shutdown_grace_ms", "out_of_range"),
    ),
    (
        "shutdown-high",
        _cfg(**{"runtime.shutdown_grace_ms": 300_001}),
        ("runtime.shutdown_grace_ms", "out_of_range"),
    ),
    (
        "server-shutdown-zero",
        _cfg(**{"server.shutdown_grace_ms": 0}),
        ("server.shutdown_grace_ms", "out_of_range"),
    ),
    (
        "server-shutdown-high",
        _cfg(**{"server.shutdown_grace_ms": 3_600_001}),
        ("server.shutdown_grace_ms", "out_of_range"),
    ),
    (
        "shutdown-settle-zero",
        _cfg(**{"server.shutdown_settle_ms": 0}),
        ("server.shutdown_settle_ms", "out_of_range"),
    ),
    (
        "stream-heartbeat-too-short",
        _cfg(**{"server.stream_heartbeat_ms": 50}),
        ("server.stream_heartbeat_ms", "out_of_range"),
    ),
    (
        "join-window-too-long",
        _cfg(**{"server.sync.retry_join_window_secs": 604_801}),
        ("server.sync.retry_join_window_secs", "out_of_range"),
    ),
    (
        "responses-stream-poll-zero",
        _cfg(**{"server.openai.responses.stream_poll_ms": 0}),
        ("server.openai.responses.stream_poll_ms", "out_of_range"),
    ),
    (
        "responses-follow-zero",
        _cfg(**{"server.openai.responses.max_stream_follow_secs": 0}),
        ("server.openai.responses.max_stream_follow_secs", "out_of_range"),
    ),
    (
        "join-poll-zero",
        _cfg(**{"server.sync.join_poll_ms": 0}),
        ("server.sync.join_poll_ms", "out_of_range"),
    ),
    (
        "postgres-startup-wait-high",
        _cfg(**{"server.jobs.postgres_startup_wait_ms": 3_600_001}),
        ("server.jobs.postgres_startup_wait_ms", "out_of_range"),
    ),
    (
        "metrics-scrape-timeout-zero",
        _cfg(**{"server.metrics.scrape_timeout_ms": 0}),
        ("server.metrics.scrape_timeout_ms", "out_of_range"),
    ),
    (
        "otel-endpoint-credentials",
        _cfg(**{"server.tracing.otel.endpoint": "http://user:pw@collector:4318"}),
        ("server.tracing.otel.endpoint", "invalid"),
    ),
    (
        "otel-endpoint-scheme",
        _cfg(**{"server.tracing.otel.endpoint": "collector:4317"}),
        ("server.tracing.otel.endpoint", "invalid"),
    ),
    (
        "otel-protocol",
        _cfg(**{"server.tracing.otel.protocol": "http/json"}),
        ("server.tracing.otel.protocol", "invalid"),
    ),
    (
        "otel-sampler",
        _cfg(**{"server.tracing.otel.sampler": "sometimes"}),
        ("server.tracing.otel.sampler", "invalid"),
    ),
    (
        "otel-sampler-arg",
        _cfg(**{"server.tracing.otel.sampler_arg": 1.5}),
        ("server.tracing.otel.sampler_arg", "out_of_range"),
    ),
    (
        "otel-headers-env",
        _cfg(**{"server.tracing.otel.headers_env": "otlp headers"}),
        ("server.tracing.otel.headers_env", "invalid"),
    ),
    (
        "otel-service-name-empty",
        _cfg(**{"server.tracing.otel.service_name": ""}),
        ("server.tracing.otel.service_name", "out_of_range"),
    ),
    (
        "otel-queue-zero",
        _cfg(**{"server.tracing.otel.max_queue_size": 0}),
        ("server.tracing.otel.max_queue_size", "out_of_range"),
    ),
    (
        "otel-timeout-high",
        _cfg(**{"server.tracing.otel.export_timeout_ms": 300_001}),
        ("server.tracing.otel.export_timeout_ms", "out_of_range"),
    ),
    (
        "otel-delay-zero",
        _cfg(**{"server.tracing.otel.schedule_delay_ms": 0}),
        ("server.tracing.otel.schedule_delay_ms", "out_of_range"),
    ),
    (
        "otel-batch-above-queue",
        _cfg(
            **{
                "server.tracing.otel.max_queue_size": 10,
                "server.tracing.otel.max_export_batch_size": 11,
            }
        ),
        ("server.tracing.otel.max_export_batch_size", "inconsistent"),
    ),
    (
        "metrics-scrape-cache-high",
        _cfg(**{"server.metrics.scrape_cache_ms": 3_600_001}),
        ("server.metrics.scrape_cache_ms", "out_of_range"),
    ),
    (
        "global-zero",
        _cfg(**{"runtime.global.max_concurrent": 0}),
        ("runtime.global.max_concurrent", "out_of_range"),
    ),
    (
        "provider-default-zero",
        _cfg(**{"runtime.provider_default.max_concurrent": 0}),
        ("runtime.provider_default.max_concurrent", "out_of_range"),
    ),
    (
        "provider-gate-zero",
        {"runtime": {"providers": {"mock": {"max_concurrent": 0}}}},
        ("runtime.providers.mock.max_concurrent", "out_of_range"),
    ),
    (
        "provider-key-underscore",
        {"runtime": {"providers": {"codex_responses": {"max_queued": 1}}}},
        ("runtime.providers", "invalid_key"),
    ),
    (
        "provider-key-unknown",
        {"runtime": {"providers": {"dall-e": {"max_queued": 1}}}},
        ("runtime.providers.dall-e", "unknown_provider"),
    ),
    (
        "breaker-key",
        {"runtime": {"circuit_breakers": {"Mock": {}}}},
        ("runtime.circuit_breakers", "invalid_key"),
    ),
    *[
        (
            f"breaker-{field}-{value}",
            _cfg(**{f"runtime.circuit_breaker.{field}": value}),
            (f"runtime.circuit_breaker.{field}", "out_of_range"),
        )
        for field, value in [
            ("failure_threshold", 0),
            ("failure_threshold", 10_001),
            ("open_duration_ms", 0),
            ("open_duration_ms", 86_400_001),
            ("half_open_max_calls", 0),
            ("half_open_max_calls", 101),
            ("success_threshold", 0),
            ("success_threshold", 101),
        ]
    ],
    (
        "per-provider-breaker",
        {"runtime": {"circuit_breakers": {"mock": {"success_threshold": 0}}}},
        ("runtime.circuit_breakers.mock.success_threshold", "out_of_range"),
    ),
    *[
        (
            f"request-{field}",
            _cfg(**{f"runtime.request.{field}": 0}),
            (f"runtime.request.{field}", "out_of_range"),
        )
        for field in [
            "max_prompt_bytes",
            "max_negative_prompt_bytes",
            "max_outputs",
            "max_inputs",
            "max_inline_encoded_bytes",
            "max_edge",
            "max_timeout_ms",
            "max_identifier_bytes",
        ]
    ],
    *[
        (
            f"idempotency-{field}",
            _cfg(**{f"runtime.idempotency.{field}": 0}),
            (f"runtime.idempotency.{field}", "out_of_range"),
        )
        for field in [
            "max_entries",
            "max_completed_bytes",
            "completed_ttl_secs",
            "in_flight_ttl_secs",
            "unknown_ttl_secs",
        ]
    ],
    ("local-roots", _cfg(**{"inputs.local_roots": []}), ("inputs.local_roots", "required")),
    *[
        case
        for prefix in ("inputs.remote", "artifacts.remote_output")
        for case in [
            (
                f"{prefix}-redirects",
                _cfg(**{f"{prefix}.max_redirects": 11}),
                (f"{prefix}.max_redirects", "out_of_range"),
            ),
            (
                f"{prefix}-timeout",
                _cfg(**{f"{prefix}.timeout_ms": 0}),
                (f"{prefix}.timeout_ms", "out_of_range"),
            ),
            (
                f"{prefix}-url",
                _cfg(**{f"{prefix}.max_url_bytes": 0}),
                (f"{prefix}.max_url_bytes", "out_of_range"),
            ),
            (
                f"{prefix}-port0",
                _cfg(**{f"{prefix}.allowed_ports": [0, 443]}),
                (f"{prefix}.allowed_ports", "out_of_range"),
            ),
            (
                f"{prefix}-no-ports",
                _cfg(**{f"{prefix}.enabled": True, f"{prefix}.allowed_ports": []}),
                (f"{prefix}.allowed_ports", "required"),
            ),
            (
                f"{prefix}-host-case",
                _cfg(**{f"{prefix}.allowed_hosts": ["Images.Example"]}),
                (f"{prefix}.allowed_hosts", "invalid_host"),
            ),
            (
                f"{prefix}-host-space",
                _cfg(**{f"{prefix}.allowed_hosts": ["a b"]}),
                (f"{prefix}.allowed_hosts", "invalid_host"),
            ),
            (
                f"{prefix}-host-empty",
                _cfg(**{f"{prefix}.allowed_hosts": [""]}),
                (f"{prefix}.allowed_hosts", "invalid_host"),
            ),
        ]
    ],
    (
        "base64",
        _cfg(**{"artifacts.max_base64_chars": 0}),
        ("artifacts.max_base64_chars", "out_of_range"),
    ),
    (
        "response-bytes",
        _cfg(**{"artifacts.max_response_bytes": 0}),
        ("artifacts.max_response_bytes", "out_of_range"),
    ),
    *[
        (
            f"image-{field}",
            _cfg(**{f"artifacts.image.{field}": 0}),
            (f"artifacts.image.{field}", "out_of_range"),
        )
        for field in ["max_encoded_bytes", "max_edge", "max_pixels", "max_decode_alloc"]
    ],
    (
        "pixels-above-edge-squared",
        _cfg(**{"artifacts.image.max_edge": 100, "artifacts.image.max_pixels": 10_001}),
        ("artifacts.image.max_pixels", "inconsistent"),
    ),
    *[
        (
            f"retention-{field}",
            _cfg(**{f"artifacts.retention.{field}": 0}),
            (f"artifacts.retention.{field}", "out_of_range"),
        )
        for field in ["max_age_secs", "max_artifacts", "max_scan_entries"]
    ],
    *[
        (
            f"stale-temp-grace-{value}",
            _cfg(**{"artifacts.retention.stale_temp_secs": value}),
            ("artifacts.retention.stale_temp_secs", "out_of_range"),
        )
        for value in [0, 59, 365 * 24 * 3600 + 1]
    ],
    *[
        (
            f"repair-interval-{value}",
            _cfg(**{"artifacts.retention.repair_interval_secs": value}),
            ("artifacts.retention.repair_interval_secs", "out_of_range"),
        )
        for value in [1, 59, 365 * 24 * 3600 + 1]
    ],
    *[
        (
            f"public-url-{url}",
            _cfg(**{"artifacts.public_base_url": url}),
            ("artifacts.public_base_url", "invalid_url"),
        )
        for url in [
            "ftp://images.example/",
            "https://user:pw@images.example/",
            "https://images.example/a",
            "https://images.example/?q=1",
            "https://images.example/#top",
            "not a url",
            "https://[::1/",
        ]
    ],
    (
        "app-executable",
        _cfg(**{"providers.codex_app_server.executable": " "}),
        ("providers.codex_app_server.executable", "required"),
    ),
    *[
        (
            f"app-{field}-{value}",
            _cfg(**{f"providers.codex_app_server.{field}": value}),
            (f"providers.codex_app_server.{field}", code),
        )
        for field, value, code in [
            ("max_outputs", 0, "out_of_range"),
            ("max_parallel_outputs", 0, "out_of_range"),
            ("rpc_max_message_bytes", 0, "out_of_range"),
            ("rpc_max_message_bytes", 1023, "out_of_range"),
            ("rpc_max_message_bytes", 64 * MiB + 1, "out_of_range"),
            ("rpc_max_notification_bytes", 0, "out_of_range"),
            ("rpc_max_notification_bytes", 1023, "out_of_range"),
            ("rpc_max_notification_bytes", 48 * MiB + 1, "out_of_range"),
            ("notification_capacity", 0, "out_of_range"),
            ("notification_capacity", 65, "out_of_range"),
            ("notification_capacity", 8, "inconsistent"),
            ("rpc_timeout_ms", 0, "out_of_range"),
            ("shutdown_timeout_ms", 0, "out_of_range"),
            ("restart_backoff_ms", 30_001, "out_of_range"),
        ]
    ],
    (
        "app-outputs-above-request",
        _cfg(**{"runtime.request.max_outputs": 4, "providers.codex_app_server.max_outputs": 5}),
        ("providers.codex_app_server.max_outputs", "out_of_range"),
    ),
    (
        "app-parallel-above-outputs",
        _cfg(
            **{
                "providers.codex_app_server.max_outputs": 4,
                "providers.codex_app_server.max_parallel_outputs": 5,
            }
        ),
        ("providers.codex_app_server.max_parallel_outputs", "out_of_range"),
    ),
    (
        "app-notification-above-message",
        _cfg(
            **{
                "providers.codex_app_server.rpc_max_message_bytes": MiB,
                "providers.codex_app_server.rpc_max_notification_bytes": 2 * MiB,
            }
        ),
        ("providers.codex_app_server.rpc_max_notification_bytes", "out_of_range"),
    ),
    *[
        (
            f"responses-endpoint-{url}",
            _cfg(**{"providers.codex_responses.endpoint": url}),
            ("providers.codex_responses.endpoint", "invalid_url"),
        )
        for url in [
            "http://chatgpt.com/backend-api/codex/responses",
            "https://u:p@chatgpt.com/backend-api/codex/responses",
            "https://chatgpt.com/backend-api/codex/responses#frag",
            "file:///etc/passwd",
            "chatgpt.com/responses",
            "http://10.0.0.1/responses",
        ]
    ],
    (
        "usage-endpoint",
        _cfg(**{"providers.codex_responses.usage_endpoint": "http://quota.example/usage"}),
        ("providers.codex_responses.usage_endpoint", "invalid_url"),
    ),
    *[
        (
            f"responses-{field}",
            _cfg(**{f"providers.codex_responses.{field}": value}),
            (f"providers.codex_responses.{field}", code),
        )
        for field, value, code in [
            ("responses_model", "", "required"),
            ("image_model", "  ", "required"),
            ("max_outputs", 0, "out_of_range"),
            ("max_parallel_outputs", 0, "out_of_range"),
            ("max_transient_attempts", 0, "out_of_range"),
            ("max_transient_attempts", 3, "out_of_range"),
            ("transient_retry_backoff_ms", 30_001, "out_of_range"),
            ("quota_cache_ms", 86_400_001, "out_of_range"),
            ("responses_model_fallbacks", [f"m{i}" for i in range(9)], "out_of_range"),
            ("responses_model_fallbacks", ["gpt-5.4", " "], "invalid"),
            ("responses_model_fallbacks", ["x" * 129], "invalid"),
        ]
    ],
    (
        "openai-url",
        _cfg(
            **{
                "providers.openai.enabled": True,
                "providers.openai.base_url": "http://api.example/v1",
            }
        ),
        ("providers.openai.base_url", "invalid_url"),
    ),
    *[
        (
            f"openai-{field}",
            _cfg(**{"providers.openai.enabled": True, f"providers.openai.{field}": "lower_case"}),
            (f"providers.openai.{field}", "invalid"),
        )
        for field in ["api_key_env", "organization_env", "project_env"]
    ],
    *[
        (
            f"mock-{field}-{value}",
            _cfg(**{f"providers.mock.{field}": value}),
            (f"providers.mock.{field}", code),
        )
        for field, value, code in [
            ("max_outputs", 0, "out_of_range"),
            ("max_parallel_outputs", 0, "out_of_range"),
            ("native_count", 0, "out_of_range"),
            ("latency_ms", 3_600_001, "out_of_range"),
            ("failure_rate", 1.5, "out_of_range"),
            ("failure_rate", -0.1, "out_of_range"),
            ("failure_rate", float("nan"), "out_of_range"),
            ("max_sessions", 0, "out_of_range"),
            ("max_sessions", 10_000_001, "out_of_range"),
            ("models", [], "required"),
            ("models", ["a", "a"], "invalid"),
            ("models", [""], "invalid"),
        ]
    ],
    (
        "mock-native-above-outputs",
        _cfg(**{"providers.mock.max_outputs": 2, "providers.mock.native_count": 3}),
        ("providers.mock.native_count", "out_of_range"),
    ),
    *[
        (
            f"images-{field}",
            _cfg(
                **{"providers.codex_images.enabled": True, f"providers.codex_images.{field}": value}
            ),
            (f"providers.codex_images.{field}", code),
        )
        for field, value, code in [
            ("base_url", "http://chatgpt.com/backend-api/codex", "invalid_url"),
            ("model", "", "required"),
            ("max_outputs", 0, "out_of_range"),
            ("max_parallel_outputs", 0, "out_of_range"),
        ]
    ],
    *[
        (f"bind-{bind}", _cfg(**{"server.bind": bind}), ("server.bind", "invalid"))
        for bind in [
            "localhost:8787",
            "127.0.0.1",
            "127.0.0.1:99999",
            "[::1]",
            ":8787",
            "::1:8787",
            "",
        ]
    ],
    *[
        (
            f"remote-bind-{bind}",
            _cfg(**{"server.bind": bind}),
            ("server.bearer_token_env", "required_for_remote_bind"),
        )
        for bind in ["0.0.0.0:8787", "[::]:8787", "192.0.2.1:8787"]
    ],
    (
        "bearer-name",
        _cfg(**{"server.bearer_token_env": "my-token"}),
        ("server.bearer_token_env", "invalid"),
    ),
    *[
        (f"server-{field}", _cfg(**{f"server.{field}": 0}), (f"server.{field}", "out_of_range"))
        for field in ["max_body_bytes", "max_header_bytes", "write_timeout_ms", "max_connections"]
    ],
    *[
        (f"malloc-{field}-{value}", _cfg(**{f"server.malloc.{field}": value}), issue)
        for field, value, issue in [
            ("mmap_threshold_bytes", 0, ("server.malloc.mmap_threshold_bytes", "out_of_range")),
            (
                "mmap_threshold_bytes",
                32 * 1024 * 1024 + 1,
                ("server.malloc.mmap_threshold_bytes", "out_of_range"),
            ),
            ("trim_threshold_bytes", 0, ("server.malloc.trim_threshold_bytes", "out_of_range")),
            ("trim_threshold_bytes", 2**31, ("server.malloc.trim_threshold_bytes", "out_of_range")),
        ]
    ],
    *[
        (
            f"jobs-{field}",
            _cfg(**{f"server.jobs.{field}": 0}),
            (f"server.jobs.{field}", "out_of_range"),
        )
        for field in [
            "max_pending",
            "max_running",
            "retention_secs",
            "max_retained",
            "max_retained_bytes",
            "max_database_bytes",
        ]
    ],
    (
        "jobs-retained-above-database",
        _cfg(**{"server.jobs.max_retained_bytes": 2 * MiB, "server.jobs.max_database_bytes": MiB}),
        ("server.jobs.max_retained_bytes", "inconsistent"),
    ),
]


@pytest.mark.parametrize(
    ("settings", "expected"), [case[1:] for case in RULES], ids=[case[0] for case in RULES]
)
def test_rule_reports_its_issue(settings: dict[str, Any], expected: tuple[str, str]) -> None:
    assert expected in _issues(settings)


@pytest.mark.parametrize(
    "settings",
    [
        _cfg(**{"server.bind": "[::1]:8787"}),
        _cfg(**{"server.bind": "127.0.0.2:0"}),
        _cfg(**{"server.bind": "0.0.0.0:8787", "server.bearer_token_env": "IMAGEGEN_BRIDGE_TOKEN"}),
        _cfg(**{"server.read_timeout_ms": 0}),
        _cfg(**{"runtime.global.max_queued": 0, "runtime.global.max_concurrent": 1}),
        _cfg(**{"providers.codex_responses.endpoint": "http://127.0.0.1:8080/responses"}),
        _cfg(**{"providers.codex_responses.endpoint": "http://[::1]:8080/responses"}),
        _cfg(**{"providers.codex_responses.endpoint": "http://localhost/responses?v=1"}),
        _cfg(**{"artifacts.public_base_url": "https://images.example/v1/"}),
        _cfg(**{"artifacts.public_base_url": "http://images.example"}),
        _cfg(**{"artifacts.image.max_edge": 100, "artifacts.image.max_pixels": 10_000}),
        _cfg(**{"artifacts.retention.max_artifacts": 1}),
        _cfg(**{"artifacts.retention.stale_temp_secs": 60}),
        _cfg(**{"artifacts.retention.stale_temp_secs": 365 * 24 * 3600}),
        _cfg(
            **{
                "runtime.circuit_breaker.enabled": False,
                "runtime.circuit_breaker.failure_threshold": 0,
            }
        ),
        _cfg(**{"server.jobs.enabled": False, "server.jobs.max_running": 0}),
        _cfg(
            **{
                "providers.codex_app_server.enabled": False,
                "providers.codex_app_server.max_outputs": 0,
            }
        ),
        _cfg(**{"providers.openai.api_key_env": "lower"}),  # not checked while disabled
        _cfg(**{"providers.mock.failure_rate": 1}),
        _cfg(
            **{
                "providers.codex_app_server.max_outputs": 4,
                "providers.codex_app_server.max_parallel_outputs": 2,
            }
        ),
        _cfg(
            **{
                "providers.codex_app_server.rpc_max_message_bytes": 1024,
                "providers.codex_app_server.rpc_max_notification_bytes": 1024,
            }
        ),
        {"runtime": {"providers": {"codex-responses": {"max_queued": 0}}}},
        {"runtime": {"circuit_breakers": {"codex-app-server": {"failure_threshold": 1}}}},
        _cfg(default_provider="mock"),
        _cfg(
            **{
                "server.tracing.otel.enabled": True,
                "server.tracing.otel.endpoint": "http://otel-collector:4318/",
                "server.tracing.otel.protocol": "grpc",
                "server.tracing.otel.sampler": "parentbased_traceidratio",
                "server.tracing.otel.sampler_arg": 0,
                "server.tracing.otel.headers_env": "OTLP_HEADERS",
                "server.tracing.otel.max_queue_size": 512,
                "server.tracing.otel.max_export_batch_size": 512,
            }
        ),
    ],
)
def test_valid_settings_report_nothing(settings: dict[str, Any]) -> None:
    assert _issues(settings) == set()


@pytest.mark.parametrize(
    ("message", "notification"),
    [(1023, 1023), (1024, 1023), (1023, 1024), (1024, 1024), (4096, 2048), (MiB, 2 * MiB)],
)
def test_rpc_bounds_pass_the_check_exactly_when_the_transport_accepts_them(
    message: int, notification: int
) -> None:
    """``config check`` catches every bound the codex app-server transport would refuse."""
    config = BridgeConfig.model_validate(
        _cfg(
            **{
                "providers.codex_app_server.rpc_max_message_bytes": message,
                "providers.codex_app_server.rpc_max_notification_bytes": notification,
            }
        )
    )
    reported = {issue.field for issue in check(config) if ".rpc_max_" in issue.field}
    try:
        app_server_options(config.providers.codex_app_server)
    except BridgeError:
        accepted = False
    else:
        accepted = True
    assert accepted == (not reported), reported


def test_issues_are_sorted_and_collected_together() -> None:
    config = BridgeConfig.model_validate(
        _cfg(
            **{
                "server.bind": "nonsense",
                "runtime.global.max_concurrent": 0,
                "providers.codex_responses.enabled": False,
                "version": 7,
            }
        )
    )
    issues = check(config)
    assert [(issue.field, issue.code) for issue in issues] == [
        ("default_provider", "disabled"),
        ("runtime.global.max_concurrent", "out_of_range"),
        ("server.bind", "invalid"),
        ("version", "unsupported"),
    ]
    assert issues == sorted(issues, key=lambda issue: (issue.field, issue.code))
    assert all(isinstance(issue, ConfigIssue) and issue.message for issue in issues)


def test_issue_messages_never_repeat_the_value() -> None:
    secret = "sk-live-SECRET-0123456789"
    config = BridgeConfig.model_validate(
        _cfg(
            **{
                "server.bearer_token_env": secret,
                "server.bind": secret,
                "artifacts.public_base_url": secret,
                "providers.codex_responses.endpoint": secret,
            }
        )
    )
    issues = check(config)
    assert len(issues) >= 4
    assert all(secret not in str(issue.to_dict()) for issue in issues)


def test_require_valid_raises_one_configuration_error_with_all_issues() -> None:
    require_valid(BridgeConfig())
    config = BridgeConfig.model_validate(_cfg(**{"server.bind": "0.0.0.0:1", "version": 3}))
    with pytest.raises(BridgeError) as caught:
        require_valid(config)
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.message == "configuration validation failed"
    assert caught.value.details["issues"] == [issue.to_dict() for issue in check(config)]
