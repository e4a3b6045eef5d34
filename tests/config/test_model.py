"""The typed key tree: defaults, strict types and accessors."""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.config import BridgeConfig, show
from imagebridge.config._tree import format_path, iter_leaves
from imagebridge.config.model import derive_usage_endpoint

from .conftest import World

MiB = 1024 * 1024

# Every leaf of the key tree with its default (the original's keys plus our added keys).
# Paths marked DATA are relative to the data directory.
DATA = object()
DEFAULTS: dict[str, Any] = {
    "version": 1,
    "default_provider": "codex-responses",
    "runtime.default_timeout_ms": 300_000,
    "runtime.cancellation_grace_ms": 1_000,
    "runtime.shutdown_grace_ms": 10_000,
    "runtime.global.max_concurrent": "unlimited",
    "runtime.global.max_queued": "unlimited",
    "runtime.global.retry_after_ms": 1_000,
    "runtime.provider_default.max_concurrent": "unlimited",
    "runtime.provider_default.max_queued": "unlimited",
    "runtime.provider_default.retry_after_ms": 1_000,
    "runtime.circuit_breaker.enabled": True,
    "runtime.circuit_breaker.failure_threshold": 5,
    "runtime.circuit_breaker.open_duration_ms": 180_000,
    "runtime.circuit_breaker.half_open_max_calls": 1,
    "runtime.circuit_breaker.success_threshold": 1,
    "runtime.request.max_prompt_bytes": 131_072,
    "runtime.request.max_negative_prompt_bytes": 65_536,
    "runtime.request.max_outputs": 255,
    "runtime.request.max_inputs": 16,
    "runtime.request.max_inline_encoded_bytes": 67_108_864,
    "runtime.request.max_edge": 16_384,
    "runtime.request.max_timeout_ms": 1_800_000,
    "runtime.request.max_identifier_bytes": 256,
    "runtime.idempotency.max_entries": 10_000,
    "runtime.idempotency.max_completed_bytes": 268_435_456,
    "runtime.idempotency.completed_ttl_secs": 86_400,
    "runtime.idempotency.in_flight_ttl_secs": 1_860,
    "runtime.idempotency.unknown_ttl_secs": 86_400,
    "runtime.images.feather_px": 8,
    "runtime.images.size_match_window": 50,
    "runtime.images.prefer": "default",
    "inputs.local_roots": ["."],
    **{
        f"{section}.{key}": value
        for section in ("inputs.remote", "artifacts.remote_output")
        for key, value in {
            "enabled": False,
            "allowed_hosts": [],
            "allowed_ports": [80, 443],
            "allow_private_networks": False,
            "max_redirects": 3,
            "timeout_ms": 20_000,
            "max_url_bytes": 8_192,
        }.items()
    },
    "artifacts.root": (DATA, "artifacts"),
    "artifacts.public_base_url": None,
    "artifacts.url_ttl_secs": 3_600,
    "artifacts.url_signing_key_env": None,
    "artifacts.max_base64_chars": 134_217_728,
    "artifacts.max_response_bytes": 268_435_456,
    "artifacts.image.max_encoded_bytes": 33_554_432,
    "artifacts.image.max_edge": 16_384,
    "artifacts.image.max_pixels": 67_108_864,
    "artifacts.image.max_decode_alloc": 268_435_456,
    "artifacts.retention.max_age_secs": 604_800,
    "artifacts.retention.max_artifacts": None,
    "artifacts.retention.max_scan_entries": 100_000,
    "artifacts.retention.stale_temp_secs": 3_600,
    "artifacts.retention.repair_interval_secs": 3_600,
    "artifacts.backend": "filesystem",
    "artifacts.s3.endpoint": None,
    "artifacts.s3.region": "us-east-1",
    "artifacts.s3.bucket": None,
    "artifacts.s3.key_prefix": "",
    "artifacts.s3.addressing_style": "auto",
    "artifacts.s3.access_key_id_env": None,
    "artifacts.s3.secret_access_key_env": None,
    "artifacts.s3.session_token_env": None,
    "artifacts.s3.part_size_bytes": 8_388_608,
    "artifacts.s3.connect_timeout_ms": 5_000,
    "artifacts.s3.read_timeout_ms": 30_000,
    "artifacts.s3.max_attempts": 3,
    "artifacts.s3.stale_upload_secs": 86_400,
    "artifacts.s3.serve": "proxy",
    "artifacts.url_mode": "signed",
    "providers.codex_app_server.enabled": True,
    "providers.codex_app_server.executable": "codex",
    "providers.codex_app_server.args": [],
    "providers.codex_app_server.cwd": None,
    "providers.codex_app_server.codex_model": None,
    "providers.codex_app_server.max_outputs": 255,
    "providers.codex_app_server.max_parallel_outputs": "auto",
    "providers.codex_app_server.session_database": (DATA, "state.sqlite3"),
    "providers.codex_app_server.rpc_max_message_bytes": 64 * MiB,
    "providers.codex_app_server.rpc_max_notification_bytes": 48 * MiB,
    "providers.codex_app_server.rpc_timeout_ms": 60_000,
    "providers.codex_app_server.notification_capacity": 4,
    "providers.codex_app_server.shutdown_timeout_ms": 5_000,
    "providers.codex_app_server.restart_backoff_ms": 250,
    "providers.codex_responses.enabled": True,
    "providers.codex_responses.endpoint": "https://chatgpt.com/backend-api/codex/responses",
    "providers.codex_responses.responses_model": "gpt-5.5",
    "providers.codex_responses.responses_model_fallbacks": ["gpt-5.4-mini", "gpt-5.4"],
    "providers.codex_responses.image_model": "gpt-image-2",
    "providers.codex_responses.max_outputs": 255,
    "providers.codex_responses.max_parallel_outputs": "auto",
    "providers.codex_responses.max_transient_attempts": 2,
    "providers.codex_responses.transient_retry_backoff_ms": 750,
    "providers.codex_responses.usage_endpoint": None,
    "providers.codex_responses.quota_cache_ms": 30_000,
    "providers.openai.enabled": False,
    "providers.openai.base_url": "https://api.openai.com/v1",
    "providers.openai.api_key_env": "OPENAI_API_KEY",
    "providers.openai.model": None,
    "providers.openai.organization_env": "OPENAI_ORG_ID",
    "providers.openai.project_env": "OPENAI_PROJECT_ID",
    "providers.mock.enabled": True,
    "providers.mock.native_count": 1,
    "providers.mock.max_outputs": 255,
    "providers.mock.max_parallel_outputs": "auto",
    "providers.mock.latency_ms": 0,
    "providers.mock.latency_jitter_ms": 0,
    "providers.mock.failure_rate": 0.0,
    "providers.mock.seed": None,
    "providers.mock.models": ["mock-image-1"],
    "providers.mock.max_sessions": 10_000,
    "providers.mock.call_log": None,
    "providers.codex_images.enabled": False,
    "providers.codex_images.base_url": "https://chatgpt.com/backend-api/codex",
    "providers.codex_images.model": "gpt-image-2",
    "providers.codex_images.max_outputs": 255,
    "providers.codex_images.max_parallel_outputs": "auto",
    "server.bind": "127.0.0.1:8787",
    "server.bearer_token_env": None,
    "server.activation_lock": None,
    "server.max_body_bytes": 83_886_080,
    "server.max_header_bytes": 32_768,
    "server.max_connections": "unlimited",
    "server.read_timeout_ms": 0,
    "server.write_timeout_ms": 30_000,
    "server.shutdown_grace_ms": None,
    "server.shutdown_settle_ms": 10_000,
    "server.stream_heartbeat_ms": 15_000,
    "server.sync.on_disconnect": "keep",
    "server.sync.retry_join_window_secs": 900,
    "server.sync.join_poll_ms": 250,
    "server.metrics.enabled": False,
    "server.metrics.max_key_labels": 100,
    "server.metrics.max_model_labels": 50,
    "server.metrics.scrape_cache_ms": 10_000,
    "server.metrics.scrape_timeout_ms": 2_000,
    "server.tracing.enabled": True,
    "server.tracing.otel.enabled": None,
    "server.tracing.otel.endpoint": None,
    "server.tracing.otel.protocol": None,
    "server.tracing.otel.service_name": None,
    "server.tracing.otel.sampler": None,
    "server.tracing.otel.sampler_arg": None,
    "server.tracing.otel.headers_env": None,
    "server.tracing.otel.export_timeout_ms": None,
    "server.tracing.otel.schedule_delay_ms": None,
    "server.tracing.otel.max_queue_size": None,
    "server.tracing.otel.max_export_batch_size": None,
    "server.malloc.enabled": True,
    "server.openai.unknown_models": "default_route",
    "server.openai.responses.max_item_references": 16,
    "server.openai.responses.retrieve_wait_ms": 5_000,
    "server.openai.responses.stream_poll_ms": 500,
    "server.openai.responses.max_stream_follow_secs": 3_600,
    "server.malloc.mmap_threshold_bytes": 16 * MiB,
    "server.malloc.trim_threshold_bytes": 256 * MiB,
    "server.jobs.enabled": True,
    "server.jobs.database": (DATA, "jobs.sqlite3"),
    "server.jobs.max_pending": 1_000,
    "server.jobs.max_running": 4,
    "server.jobs.retention_secs": 604_800,
    "server.jobs.max_retained": 10_000,
    "server.jobs.max_retained_bytes": 268_435_456,
    "server.jobs.max_database_bytes": 1_073_741_824,
    "server.jobs.instance_id": None,
    "server.jobs.lease_secs": 30,
    "server.jobs.heartbeat_secs": 10,
    "server.jobs.poll_interval_ms": 500,
    "server.jobs.postgres_schema": "imagebridge",
    "server.jobs.postgres_password_env": None,
    "server.jobs.postgres_pool_min_size": 1,
    "server.jobs.postgres_pool_max_size": 5,
    "server.jobs.postgres_connect_timeout_ms": 10_000,
    "server.jobs.postgres_startup_wait_ms": 30_000,
    "server.keys.enabled": False,
    "server.keys.time_zone": "UTC",
    "server.keys.max_keys": 1_000,
    "server.keys.auth_failure_limit": 20,
    "server.keys.auth_failure_window_secs": 60,
    "server.keys.auth_failure_max_clients": 10_000,
    "server.keys.slot_lease_secs": 30,
    "server.keys.slot_poll_max_ms": 500,
    "server.webhooks.enabled": False,
    "server.webhooks.allow_private_networks": False,
    "server.webhooks.allowed_ports": [80, 443],
    "server.webhooks.timeout_ms": 10_000,
    "server.webhooks.retry_period_secs": 86_400,
    "server.webhooks.retry_initial_ms": 5_000,
    "server.webhooks.retry_max_interval_ms": 3_600_000,
    "server.webhooks.lease_secs": 60,
    "server.webhooks.max_concurrent": 8,
    "server.webhooks.poll_interval_ms": 1_000,
    "server.webhooks.max_payload_bytes": 65_536,
    "server.webhooks.max_pending": 100_000,
    "server.webhooks.max_endpoints": 100,
    "server.webhooks.max_response_bytes": 65_536,
    "server.webhooks.retention_secs": 604_800,
    "server.webhooks.max_retained": 100_000,
    "accounts.directory": (DATA, "accounts"),
    "accounts.active": None,
    "accounts.refresh_margin_secs": 300,
    "accounts.lock_timeout_ms": 30_000,
    "accounts.policy": "quota",
    "accounts.min_remaining_percent": 0,
    "accounts.refusal_cooldown_secs": 300,
    "accounts.login.issuer": "https://auth.openai.com",
    "accounts.login.token_url": "https://auth.openai.com/oauth/token",
    "accounts.login.client_id": "app_EMoamEEZ73f0CkXaXp7hrann",
    "accounts.login.callback_port": 1455,
    "accounts.login.http_timeout_ms": 30_000,
    "accounts.login.device_code_timeout_secs": 900,
}


def _leaves(config: BridgeConfig) -> dict[str, Any]:
    return {format_path(path): value for path, value in iter_leaves(show(config))}


def test_defaults_cover_exactly_the_documented_key_tree(world: World) -> None:
    leaves = _leaves(world.load().config)
    assert sorted(leaves) == sorted(DEFAULTS)
    # The per-provider maps start empty.
    config = world.load().config
    assert config.runtime.providers == {}
    assert config.runtime.circuit_breakers == {}


@pytest.mark.parametrize("field", sorted(DEFAULTS))
def test_each_default_value(world: World, field: str) -> None:
    expected = DEFAULTS[field]
    if isinstance(expected, tuple) and expected[0] is DATA:
        expected = str(world.data_dir / expected[1])
    assert _leaves(world.load().config)[field] == expected


def test_defaults_pass_the_semantic_check(world: World) -> None:
    assert world.load().issues == []


def test_direct_construction_uses_the_data_dir_from_the_environment(world: World) -> None:
    config = BridgeConfig()
    assert config.artifacts.root == world.data_dir / "artifacts"
    assert config.server.jobs.database == world.data_dir / "jobs.sqlite3"
    assert config.providers.codex_app_server.session_database == world.data_dir / "state.sqlite3"


def test_loading_creates_no_files(world: World) -> None:
    world.load()
    assert not world.data_dir.exists()
    assert list(world.cwd.iterdir()) == []


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"version": "1"}, "version"),
        ({"runtime": {"default_timeout_ms": True}}, "runtime.default_timeout_ms"),
        ({"runtime": {"default_timeout_ms": -1}}, "runtime.default_timeout_ms"),
        ({"runtime": {"request": {"max_outputs": 256}}}, "runtime.request.max_outputs"),
        ({"inputs": {"remote": {"allowed_ports": [65_536]}}}, "inputs.remote.allowed_ports.0"),
        ({"runtime": {"global": {"max_queued": "many"}}}, "runtime.global.max_queued"),
        ({"runtime": {"global": {"max_queued": -1}}}, "runtime.global.max_queued"),
        ({"providers": {"mock": {"max_parallel_outputs": "fast"}}}, None),
        ({"server": {"metrics": {"enabled": 1}}}, "server.metrics.enabled"),
        ({"server": {"tracing": {"otel": {"enabled": "yes"}}}}, "server.tracing.otel.enabled"),
        ({"server": {"tracing": {"otel": {"max_queue_size": -1}}}}, None),
        ({"server": {"tracing": {"otel": {"headers": "a=b"}}}}, "server.tracing.otel.headers"),
        ({"artifacts": {"root": ""}}, "artifacts.root"),
        ({"artifacts": {"root": 5}}, "artifacts.root"),
        ({"server": {"max_connections": 1.5}}, "server.max_connections"),
    ],
)
def test_types_are_strict(data: dict[str, Any], field: str | None) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        BridgeConfig.model_validate(data)
    if field is not None:
        locations = {
            ".".join(str(part) for part in error["loc"]) for error in caught.value.errors()
        }
        assert field in locations


def test_runtime_global_is_read_and_written_under_its_toml_name() -> None:
    config = BridgeConfig.model_validate({"runtime": {"global": {"max_concurrent": 3}}})
    assert config.runtime.global_.max_concurrent == 3
    assert show(config)["runtime"]["global"]["max_concurrent"] == 3
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        BridgeConfig.model_validate({"runtime": {"global_": {"max_concurrent": 3}}})


def test_capacity_accessors_map_unlimited_to_none() -> None:
    config = BridgeConfig.model_validate(
        {
            "runtime": {"global": {"max_concurrent": 8, "max_queued": 0}},
            "server": {"max_connections": 64},
        }
    )
    assert config.runtime.global_.max_concurrent_value == 8
    assert config.runtime.global_.max_queued_value == 0
    assert config.runtime.provider_default.max_concurrent_value is None
    assert config.runtime.provider_default.max_queued_value is None
    assert config.server.max_connections_value == 64
    assert BridgeConfig().server.max_connections_value is None


def test_parallelism_accessors_resolve_auto_to_max_outputs() -> None:
    config = BridgeConfig.model_validate(
        {
            "providers": {
                "codex_responses": {"max_outputs": 8},
                "mock": {"max_outputs": 10, "max_parallel_outputs": 3},
            }
        }
    )
    assert config.providers.codex_responses.max_parallel_outputs_value == 8
    assert config.providers.mock.max_parallel_outputs_value == 3
    assert config.providers.codex_app_server.max_parallel_outputs_value == 255
    assert config.providers.codex_images.max_parallel_outputs_value == 255


def test_per_provider_gate_and_breaker_fall_back_to_the_defaults() -> None:
    config = BridgeConfig.model_validate(
        {
            "runtime": {
                "providers": {"mock": {"max_concurrent": 2}},
                "circuit_breakers": {"mock": {"failure_threshold": 9}},
            }
        }
    )
    assert config.runtime.gate_for("mock").max_concurrent == 2
    assert config.runtime.gate_for("mock").max_queued == "unlimited"
    assert config.runtime.gate_for("codex-responses") == config.runtime.provider_default
    assert config.runtime.circuit_breaker_for("mock").failure_threshold == 9
    assert config.runtime.circuit_breaker_for("openai") == config.runtime.circuit_breaker


def test_enabled_providers_are_listed_by_registered_name() -> None:
    assert BridgeConfig().enabled_providers() == ["codex-app-server", "codex-responses", "mock"]
    config = BridgeConfig.model_validate(
        {
            "providers": {
                "codex_app_server": {"enabled": False},
                "codex_images": {"enabled": True},
                "openai": {"enabled": True},
            }
        }
    )
    assert config.enabled_providers() == ["codex-images", "codex-responses", "mock", "openai"]


@pytest.mark.parametrize(
    ("endpoint", "usage"),
    [
        (
            "https://chatgpt.com/backend-api/codex/responses",
            "https://chatgpt.com/backend-api/wham/usage",
        ),
        (
            "http://127.0.0.1:9000/backend-api/codex/responses/",
            "http://127.0.0.1:9000/backend-api/wham/usage",
        ),
        ("http://localhost:9000/responses?x=1", "http://localhost:9000/wham/usage"),
        ("https://example.test/api", "https://example.test/api/wham/usage"),
    ],
)
def test_usage_endpoint_is_derived_from_the_responses_endpoint(endpoint: str, usage: str) -> None:
    assert derive_usage_endpoint(endpoint) == usage
    config = BridgeConfig.model_validate({"providers": {"codex_responses": {"endpoint": endpoint}}})
    assert config.providers.codex_responses.usage_endpoint_value == usage


def test_explicit_usage_endpoint_wins() -> None:
    config = BridgeConfig.model_validate(
        {"providers": {"codex_responses": {"usage_endpoint": "https://quota.example/usage"}}}
    )
    assert config.providers.codex_responses.usage_endpoint_value == "https://quota.example/usage"


def test_configuration_is_immutable() -> None:
    from pydantic import ValidationError

    config = BridgeConfig()
    with pytest.raises(ValidationError):
        config.version = 2  # type: ignore[misc]


def test_json_schema_can_be_exported() -> None:
    schema = BridgeConfig.model_json_schema()
    assert schema["additionalProperties"] is False
    assert "global" in schema["$defs"]["RuntimeSettings"]["properties"]
