"""Semantic checks of ``[providers.*]``: each built-in provider and every
``[providers.openai_compatible.<name>]`` instance, with its capability overrides.

Part of :func:`imagebridge.config.validation.check`: issues are reported, never raised.
"""

from __future__ import annotations

import math
from typing import Any

from imagebridge.config._net import (
    ENV_NAME_RULE,
    NO_QUERY_RULE,
    UPSTREAM_URL_RULE,
    is_env_name,
    is_provider_name,
    valid_upstream_url,
)
from imagebridge.config._types import parallelism_value
from imagebridge.config.model import (
    PROVIDER_KEYS,
    BridgeConfig,
    OpenAICapabilityOverrides,
    OpenAICompatibleSettings,
)
from imagebridge.config.store_checks import Report, check_store_location
from imagebridge.contract.enums import (
    Background,
    InputFidelity,
    Moderation,
    OutputFormat,
    Quality,
    SupportLevel,
)
from imagebridge.contract.request import parse_size

__all__ = ["check_providers"]

MiB = 1024 * 1024
_MAX_CARRIER_FALLBACKS = 8
_MAX_BACKOFF_MS = 30_000
_MAX_MOCK_LATENCY_MS = 60 * 60 * 1000
_MAX_MOCK_SESSIONS = 10_000_000
"""The mock keeps its sessions in memory: about 200 bytes each."""
_MAX_QUOTA_CACHE_MS = 24 * 60 * 60 * 1000
_MIN_RPC_BYTES = 1024
"""Smallest codex app-server message/notification bound the transport accepts."""


def _check_outputs(
    prefix: str, max_outputs: int, parallel: Any, request_max: int, report: Report
) -> None:
    if not 1 <= max_outputs <= request_max:
        report(
            f"{prefix}.max_outputs",
            "out_of_range",
            "max_outputs must be between 1 and runtime.request.max_outputs",
        )
    limit = parallelism_value(parallel)
    if limit is not None and not 1 <= limit <= max(max_outputs, 1):
        report(
            f"{prefix}.max_parallel_outputs",
            "out_of_range",
            'parallelism must be "auto" or an integer from 1 to max_outputs',
        )


def check_providers(config: BridgeConfig, report: Report) -> None:
    """Every enabled provider's keys (a disabled one is not checked)."""
    providers = config.providers
    request_max = config.runtime.request.max_outputs

    app = providers.codex_app_server
    if app.enabled:
        prefix = "providers.codex_app_server"
        if not app.executable.strip():
            report(f"{prefix}.executable", "required", "the codex executable must not be empty")
        check_store_location(f"{prefix}.session_database", app.session_database, report)
        _check_outputs(prefix, app.max_outputs, app.max_parallel_outputs, request_max, report)
        # The transport refuses bounds below 1 KiB (AppServerOptions): report them here,
        # with the other issues, instead of failing when the provider is built.
        if not _MIN_RPC_BYTES <= app.rpc_max_message_bytes <= 64 * MiB:
            report(
                f"{prefix}.rpc_max_message_bytes",
                "out_of_range",
                "message bound must be between 1 KiB and 64 MiB",
            )
        notification_max = min(app.rpc_max_message_bytes, 48 * MiB)
        if not _MIN_RPC_BYTES <= app.rpc_max_notification_bytes <= notification_max:
            report(
                f"{prefix}.rpc_max_notification_bytes",
                "out_of_range",
                "notification bound must be at least 1 KiB, "
                "at most rpc_max_message_bytes and 48 MiB",
            )
        if not 1 <= app.notification_capacity <= 64:
            report(
                f"{prefix}.notification_capacity",
                "out_of_range",
                "notification capacity must be between 1 and 64",
            )
        elif app.rpc_max_notification_bytes * _next_power_of_two(app.notification_capacity) > (
            256 * MiB
        ):
            report(
                f"{prefix}.notification_capacity",
                "inconsistent",
                "buffered notifications (bytes × capacity rounded up to a power of two) "
                "must stay within 256 MiB",
            )
        for field in ("rpc_timeout_ms", "shutdown_timeout_ms"):
            if getattr(app, field) == 0:
                report(f"{prefix}.{field}", "out_of_range", "timeout must be greater than zero")
        if app.restart_backoff_ms > _MAX_BACKOFF_MS:
            report(
                f"{prefix}.restart_backoff_ms",
                "out_of_range",
                "restart backoff must not exceed 30000 milliseconds",
            )

    responses = providers.codex_responses
    if responses.enabled:
        prefix = "providers.codex_responses"
        if not valid_upstream_url(responses.endpoint):
            report(f"{prefix}.endpoint", "invalid_url", UPSTREAM_URL_RULE)
        if responses.usage_endpoint is not None and not valid_upstream_url(
            responses.usage_endpoint
        ):
            report(f"{prefix}.usage_endpoint", "invalid_url", UPSTREAM_URL_RULE)
        for field in ("responses_model", "image_model"):
            if not getattr(responses, field).strip():
                report(f"{prefix}.{field}", "required", "model name must not be empty")
        fallbacks = responses.responses_model_fallbacks
        if len(fallbacks) > _MAX_CARRIER_FALLBACKS:
            report(
                f"{prefix}.responses_model_fallbacks",
                "out_of_range",
                f"at most {_MAX_CARRIER_FALLBACKS} fallback carrier models",
            )
        if any(not name.strip() or len(name) > 128 for name in fallbacks):
            report(
                f"{prefix}.responses_model_fallbacks",
                "invalid",
                "carrier model names must be 1-128 characters",
            )
        _check_outputs(
            prefix, responses.max_outputs, responses.max_parallel_outputs, request_max, report
        )
        if not 1 <= responses.max_transient_attempts <= 2:
            report(
                f"{prefix}.max_transient_attempts",
                "out_of_range",
                "transient attempt limit must be 1 or 2",
            )
        if responses.transient_retry_backoff_ms > _MAX_BACKOFF_MS:
            report(
                f"{prefix}.transient_retry_backoff_ms",
                "out_of_range",
                "transient retry backoff must not exceed 30000 milliseconds",
            )
        if responses.quota_cache_ms > _MAX_QUOTA_CACHE_MS:
            report(
                f"{prefix}.quota_cache_ms",
                "out_of_range",
                "quota cache lifetime must not exceed one day",
            )

    openai = providers.openai
    if openai.enabled:
        prefix = "providers.openai"
        if not valid_upstream_url(openai.base_url):
            report(f"{prefix}.base_url", "invalid_url", UPSTREAM_URL_RULE)
        elif "?" in openai.base_url:
            report(f"{prefix}.base_url", "invalid_url", NO_QUERY_RULE)
        for field in ("api_key_env", "organization_env", "project_env"):
            name = getattr(openai, field)
            if name is not None and not is_env_name(name):
                report(f"{prefix}.{field}", "invalid", ENV_NAME_RULE)
        if openai.model is not None and not openai.model.strip():
            report(f"{prefix}.model", "required", "model name must not be empty")

    for name, instance in providers.openai_compatible.items():
        _check_openai_compatible(name, instance, request_max, report)

    mock = providers.mock
    if mock.enabled:
        prefix = "providers.mock"
        _check_outputs(prefix, mock.max_outputs, mock.max_parallel_outputs, request_max, report)
        if not 1 <= mock.native_count <= max(mock.max_outputs, 1):
            report(
                f"{prefix}.native_count",
                "out_of_range",
                "native count must be between 1 and max_outputs",
            )
        if mock.latency_ms + mock.latency_jitter_ms > _MAX_MOCK_LATENCY_MS:
            report(
                f"{prefix}.latency_ms",
                "out_of_range",
                "latency plus jitter must not exceed one hour",
            )
        if math.isnan(mock.failure_rate) or not 0.0 <= mock.failure_rate <= 1.0:
            report(f"{prefix}.failure_rate", "out_of_range", "failure rate must be within 0..1")
        if not 1 <= mock.max_sessions <= _MAX_MOCK_SESSIONS:
            report(
                f"{prefix}.max_sessions",
                "out_of_range",
                f"max sessions must be between 1 and {_MAX_MOCK_SESSIONS}",
            )
        if not mock.models:
            report(f"{prefix}.models", "required", "at least one model name is required")
        elif any(not model.strip() for model in mock.models) or len(set(mock.models)) != len(
            mock.models
        ):
            report(f"{prefix}.models", "invalid", "model names must be non-empty and unique")

    images = providers.codex_images
    if images.enabled:
        prefix = "providers.codex_images"
        if not valid_upstream_url(images.base_url):
            report(f"{prefix}.base_url", "invalid_url", UPSTREAM_URL_RULE)
        if not images.model.strip():
            report(f"{prefix}.model", "required", "model name must not be empty")
        _check_outputs(prefix, images.max_outputs, images.max_parallel_outputs, request_max, report)


def _check_openai_compatible(
    name: str, instance: OpenAICompatibleSettings, request_max: int, report: Report
) -> None:
    table = "providers.openai_compatible"
    if not is_provider_name(name):
        report(
            table,
            "invalid_key",
            "instance names must be provider names (lowercase letters, digits and '-', "
            "starting with a letter)",
        )
        return
    prefix = f"{table}.{name}"
    if name in PROVIDER_KEYS.values():
        report(prefix, "reserved_name", "the name of a built-in provider cannot be reused")
    if not instance.enabled:
        return
    if not valid_upstream_url(instance.base_url) and not (
        instance.allow_insecure_http and _valid_insecure_url(instance.base_url)
    ):
        report(
            f"{prefix}.base_url",
            "invalid_url",
            UPSTREAM_URL_RULE + " (allow_insecure_http permits http to other hosts)",
        )
    elif "?" in instance.base_url:
        report(f"{prefix}.base_url", "invalid_url", NO_QUERY_RULE)
    for field in ("api_key_env", "organization_env", "project_env"):
        value = getattr(instance, field)
        if value is not None and not is_env_name(value):
            report(f"{prefix}.{field}", "invalid", ENV_NAME_RULE)
    models = instance.served_models()
    if not models:
        report(f"{prefix}.models", "required", "name the served model in model or models")
    elif any(not model.strip() for model in models) or len(set(instance.models)) != len(
        instance.models
    ):
        report(f"{prefix}.models", "invalid", "model names must be non-empty and unique")
    _check_outputs(prefix, instance.max_outputs, instance.max_parallel_outputs, request_max, report)
    native = instance.native_max_outputs
    if native is not None and not 1 <= native <= max(instance.max_outputs, 1):
        report(
            f"{prefix}.native_max_outputs",
            "out_of_range",
            "native count must be between 1 and max_outputs",
        )
    if instance.timeout_ms == 0:
        report(f"{prefix}.timeout_ms", "out_of_range", "timeout must be greater than zero")
    _check_capability_overrides(f"{prefix}.capabilities", instance.capabilities, report)


_OVERRIDE_SETS: dict[str, frozenset[str]] = {
    "qualities": frozenset(Quality),
    "output_formats": frozenset(OutputFormat),
    "backgrounds": frozenset(Background),
    "moderation": frozenset(Moderation),
    "input_fidelities": frozenset(InputFidelity),
}


def _check_capability_overrides(
    prefix: str, overrides: OpenAICapabilityOverrides, report: Report
) -> None:
    if overrides.sizes is not None:
        if not overrides.sizes:
            report(f"{prefix}.sizes", "required", "list at least one size")
        for size in overrides.sizes:
            try:
                parse_size(size)
            except ValueError:
                report(f"{prefix}.sizes", "invalid", 'sizes must be "auto" or WxH values')
                break
    for field, allowed in _OVERRIDE_SETS.items():
        values = getattr(overrides, field)
        if values is None:
            continue
        if any(value not in allowed for value in values):
            report(
                f"{prefix}.{field}",
                "invalid",
                "values must be among " + ", ".join(sorted(allowed)),
            )
        elif field != "input_fidelities" and not values:
            report(f"{prefix}.{field}", "required", "list at least one value")
    transparency = overrides.transparent_background
    if transparency is not None and transparency not in set(SupportLevel):
        report(
            f"{prefix}.transparent_background",
            "invalid",
            "must be native, emulated or unsupported",
        )
    elif (
        transparency is not None
        and overrides.backgrounds is not None
        and (transparency == SupportLevel.NATIVE)
        != (Background.TRANSPARENT in overrides.backgrounds)
    ):
        report(
            f"{prefix}.transparent_background",
            "inconsistent",
            "native transparency and a transparent background must be listed together",
        )


def _valid_insecure_url(value: str) -> bool:
    """Plain http to any host, still without credentials or a fragment."""
    return valid_upstream_url(value.replace("http://", "https://", 1)) and value.startswith(
        "http://"
    )


def _next_power_of_two(value: int) -> int:
    return 1 if value <= 1 else 1 << (value - 1).bit_length()
