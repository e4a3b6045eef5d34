"""Semantic checks of a loaded configuration.

:func:`check` never raises and never creates files: it returns every problem at once,
sorted by (field, code), so ``config check``, ``doctor`` and the diagnostics page can
show the whole list. Messages say what is wrong with a field without repeating its
value. :func:`require_valid` turns a non-empty list into one ``configuration`` error
for the commands that cannot run with a broken configuration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from imagebridge.config._net import (
    is_env_name,
    is_provider_name,
    parse_socket_address,
    valid_public_base_url,
    valid_upstream_url,
)
from imagebridge.config._types import parallelism_value
from imagebridge.config.model import (
    ACCOUNT_POLICIES,
    CONFIG_VERSION,
    PROVIDER_KEYS,
    BridgeConfig,
    CircuitBreakerSettings,
    ConcurrencySettings,
    OpenAICapabilityOverrides,
    OpenAICompatibleSettings,
    RemoteFetchSettings,
)
from imagebridge.config.store_checks import check_shared_jobs, check_store_location
from imagebridge.contract.accounts import ACCOUNT_NAME_RULE, is_account_name
from imagebridge.contract.enums import (
    Background,
    InputFidelity,
    Moderation,
    OutputFormat,
    Quality,
    SupportLevel,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import parse_size

__all__ = [
    "LISTENER_ONLY_ISSUES",
    "ConfigIssue",
    "check",
    "raise_for_issues",
    "require_valid",
]

LISTENER_ONLY_ISSUES = frozenset({"required_for_remote_bind"})
"""Issue codes that only matter to a process that listens (a public bind without a bearer
token): local generation, presets, sessions and the MCP server run despite them."""

MiB = 1024 * 1024
_MAX_CANCELLATION_GRACE_MS = 30_000
_MAX_SHUTDOWN_GRACE_MS = 5 * 60 * 1000
_MAX_OPEN_DURATION_MS = 24 * 60 * 60 * 1000
_MAX_CARRIER_FALLBACKS = 8
_MAX_BACKOFF_MS = 30_000
_MAX_MOCK_LATENCY_MS = 60 * 60 * 1000
_MAX_QUOTA_CACHE_MS = 24 * 60 * 60 * 1000
# A younger temp file may belong to a live writer (the store refuses less as well).
MIN_STALE_TEMP_SECS = 60
MAX_STALE_TEMP_SECS = 365 * 24 * 60 * 60
_MIN_RPC_BYTES = 1024
"""Smallest codex app-server message/notification bound the transport accepts."""


@dataclass(frozen=True, slots=True, order=True)
class ConfigIssue:
    """One problem: the dotted field, a stable code and a message without the value."""

    field: str
    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "code": self.code, "message": self.message}


Report = Callable[[str, str, str], None]


def check(config: BridgeConfig) -> list[ConfigIssue]:
    """Every semantic problem of ``config``, sorted by field then code."""
    issues: list[ConfigIssue] = []

    def report(field: str, code: str, message: str) -> None:
        issues.append(ConfigIssue(field, code, message))

    _check_root(config, report)
    _check_runtime(config, report)
    _check_inputs_and_artifacts(config, report)
    _check_providers(config, report)
    _check_server(config, report)
    _check_accounts(config, report)
    return sorted(set(issues), key=lambda issue: (issue.field, issue.code, issue.message))


def require_valid(config: BridgeConfig) -> None:
    """Raise ``configuration`` "configuration validation failed" with ``details.issues``."""
    raise_for_issues(check(config))


def raise_for_issues(issues: Sequence[ConfigIssue], *, listener: bool = True) -> None:
    """Raise ``configuration`` for ``issues``; ``listener=False`` ignores the issues in
    :data:`LISTENER_ONLY_ISSUES`, for commands that never listen."""
    blocking = [issue for issue in issues if listener or issue.code not in LISTENER_ONLY_ISSUES]
    if blocking:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "configuration validation failed",
            details={"issues": [issue.to_dict() for issue in blocking]},
        )


# -- sections ----------------------------------------------------------------------------


def _check_root(config: BridgeConfig, report: Report) -> None:
    if config.version != CONFIG_VERSION:
        report("version", "unsupported", "configuration version is unsupported (use 1)")
    if not is_provider_name(config.default_provider):
        report(
            "default_provider",
            "invalid",
            "default provider name is not a lowercase ASCII identifier",
        )
    enabled = config.enabled_providers()
    if not enabled:
        report("providers", "required", "at least one provider must be enabled")
    if config.default_provider not in enabled:
        report("default_provider", "disabled", "default provider is not an enabled provider")


def _check_runtime(config: BridgeConfig, report: Report) -> None:
    runtime = config.runtime
    request = runtime.request
    if runtime.default_timeout_ms == 0 or runtime.default_timeout_ms > request.max_timeout_ms:
        report(
            "runtime.default_timeout_ms",
            "out_of_range",
            "default timeout must be positive and at most runtime.request.max_timeout_ms",
        )
    if not 1 <= runtime.cancellation_grace_ms <= _MAX_CANCELLATION_GRACE_MS:
        report(
            "runtime.cancellation_grace_ms",
            "out_of_range",
            "cancellation grace must be between 1 and 30000 milliseconds",
        )
    if not 1 <= runtime.shutdown_grace_ms <= _MAX_SHUTDOWN_GRACE_MS:
        report(
            "runtime.shutdown_grace_ms",
            "out_of_range",
            "shutdown grace must be between 1 millisecond and five minutes",
        )

    _check_gate("runtime.global", runtime.global_, report)
    _check_gate("runtime.provider_default", runtime.provider_default, report)
    known = set(PROVIDER_KEYS.values()) | set(config.providers.openai_compatible)
    for name, gate in runtime.providers.items():
        prefix = _map_entry("runtime.providers", name, report, known)
        _check_gate(prefix, gate, report)

    _check_breaker("runtime.circuit_breaker", runtime.circuit_breaker, report)
    for name, breaker in runtime.circuit_breakers.items():
        prefix = _map_entry("runtime.circuit_breakers", name, report, known)
        _check_breaker(prefix, breaker, report)

    for field, value in request.model_dump().items():
        if value == 0:
            report(
                f"runtime.request.{field}",
                "out_of_range",
                "request limit must be greater than zero",
            )
    for field, value in runtime.idempotency.model_dump().items():
        if value == 0:
            report(
                f"runtime.idempotency.{field}",
                "out_of_range",
                "idempotency capacity and lifetimes must be greater than zero",
            )


def _map_entry(map_field: str, name: str, report: Report, known: set[str]) -> str:
    """Check a per-provider map key; return the prefix to report its fields under."""
    if not is_provider_name(name):
        report(
            map_field,
            "invalid_key",
            "keys must be provider names such as codex-responses (lowercase, '-' not '_')",
        )
        return f"{map_field}.*"
    if name not in known:
        report(
            f"{map_field}.{name}",
            "unknown_provider",
            "no built-in or configured provider has this name (" + ", ".join(sorted(known)) + ")",
        )
    return f"{map_field}.{name}"


def _check_gate(prefix: str, gate: ConcurrencySettings, report: Report) -> None:
    if gate.max_concurrent == 0:
        report(
            f"{prefix}.max_concurrent",
            "out_of_range",
            'maximum concurrency must be a positive integer or "unlimited"',
        )
    if gate.retry_after_ms > 3_600_000:
        report(
            f"{prefix}.retry_after_ms",
            "out_of_range",
            "the retry hint must be at most 3600000 ms (one hour)",
        )


def _check_breaker(prefix: str, breaker: CircuitBreakerSettings, report: Report) -> None:
    if not breaker.enabled:
        return
    bounds = {
        "failure_threshold": (breaker.failure_threshold, 1, 10_000),
        "open_duration_ms": (breaker.open_duration_ms, 1, _MAX_OPEN_DURATION_MS),
        "half_open_max_calls": (breaker.half_open_max_calls, 1, 100),
        "success_threshold": (breaker.success_threshold, 1, 100),
    }
    for field, (value, low, high) in bounds.items():
        if not low <= value <= high:
            report(
                f"{prefix}.{field}",
                "out_of_range",
                f"enabled circuit-breaker {field} must be between {low} and {high}",
            )


def _check_inputs_and_artifacts(config: BridgeConfig, report: Report) -> None:
    if not config.inputs.local_roots:
        report("inputs.local_roots", "required", "at least one local input root is required")
    _check_remote("inputs.remote", config.inputs.remote, report)

    artifacts = config.artifacts
    _check_remote("artifacts.remote_output", artifacts.remote_output, report)
    for field in ("max_base64_chars", "max_response_bytes"):
        if getattr(artifacts, field) == 0:
            report(f"artifacts.{field}", "out_of_range", "limit must be greater than zero")
    image = artifacts.image
    for field, value in image.model_dump().items():
        if value == 0:
            report(
                f"artifacts.image.{field}",
                "out_of_range",
                "image limits must be greater than zero",
            )
    if image.max_pixels > image.max_edge * image.max_edge:
        report(
            "artifacts.image.max_pixels",
            "inconsistent",
            "maximum pixels cannot exceed the square of artifacts.image.max_edge",
        )
    retention = artifacts.retention
    for field in ("max_age_secs", "max_artifacts", "max_scan_entries"):
        if getattr(retention, field) == 0:
            report(
                f"artifacts.retention.{field}",
                "out_of_range",
                "retention bounds must be greater than zero",
            )
    if not MIN_STALE_TEMP_SECS <= retention.stale_temp_secs <= MAX_STALE_TEMP_SECS:
        report(
            "artifacts.retention.stale_temp_secs",
            "out_of_range",
            "stale temp file grace must be between 60 seconds and 365 days",
        )
    if artifacts.public_base_url is not None and not valid_public_base_url(
        artifacts.public_base_url
    ):
        report(
            "artifacts.public_base_url",
            "invalid_url",
            "public artifact base must be credential-free http(s) without query or "
            "fragment, ending in '/'",
        )


def _check_remote(prefix: str, remote: RemoteFetchSettings, report: Report) -> None:
    if remote.max_redirects > 10:
        report(f"{prefix}.max_redirects", "out_of_range", "at most 10 redirects are allowed")
    for field in ("timeout_ms", "max_url_bytes"):
        if getattr(remote, field) == 0:
            report(f"{prefix}.{field}", "out_of_range", "limit must be greater than zero")
    if 0 in remote.allowed_ports:
        report(f"{prefix}.allowed_ports", "out_of_range", "port 0 is not a valid port")
    if remote.enabled and not remote.allowed_ports:
        report(
            f"{prefix}.allowed_ports",
            "required",
            "remote fetching needs at least one allowed port",
        )
    if any(
        not host or host != host.lower() or any(ch.isspace() for ch in host)
        for host in remote.allowed_hosts
    ):
        report(
            f"{prefix}.allowed_hosts",
            "invalid_host",
            "allowed hosts must be non-empty lowercase names without whitespace",
        )


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


def _check_providers(config: BridgeConfig, report: Report) -> None:
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
            report(f"{prefix}.endpoint", "invalid_url", _UPSTREAM_URL_RULE)
        if responses.usage_endpoint is not None and not valid_upstream_url(
            responses.usage_endpoint
        ):
            report(f"{prefix}.usage_endpoint", "invalid_url", _UPSTREAM_URL_RULE)
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
            report(f"{prefix}.base_url", "invalid_url", _UPSTREAM_URL_RULE)
        elif "?" in openai.base_url:
            report(f"{prefix}.base_url", "invalid_url", _NO_QUERY_RULE)
        for field in ("api_key_env", "organization_env", "project_env"):
            name = getattr(openai, field)
            if name is not None and not is_env_name(name):
                report(f"{prefix}.{field}", "invalid", _ENV_NAME_RULE)
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
            report(f"{prefix}.base_url", "invalid_url", _UPSTREAM_URL_RULE)
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
            _UPSTREAM_URL_RULE + " (allow_insecure_http permits http to other hosts)",
        )
    elif "?" in instance.base_url:
        report(f"{prefix}.base_url", "invalid_url", _NO_QUERY_RULE)
    for field in ("api_key_env", "organization_env", "project_env"):
        value = getattr(instance, field)
        if value is not None and not is_env_name(value):
            report(f"{prefix}.{field}", "invalid", _ENV_NAME_RULE)
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


def _check_server(config: BridgeConfig, report: Report) -> None:
    server = config.server
    if server.bearer_token_env is not None and not is_env_name(server.bearer_token_env):
        report("server.bearer_token_env", "invalid", _ENV_NAME_RULE)
    try:
        address, _port = parse_socket_address(server.bind)
    except ValueError:
        report(
            "server.bind",
            "invalid",
            "bind must be a numeric socket address such as 127.0.0.1:8787 or [::1]:8787",
        )
    else:
        if not address.is_loopback and server.bearer_token_env is None:
            report(
                "server.bearer_token_env",
                "required_for_remote_bind",
                "a non-loopback bind requires bearer authentication: name the variable "
                "that holds the token",
            )
    for field in ("max_body_bytes", "max_header_bytes", "write_timeout_ms"):
        if getattr(server, field) == 0:
            report(f"server.{field}", "out_of_range", "limit must be greater than zero")
    if server.max_connections == 0:
        report(
            "server.max_connections",
            "out_of_range",
            'connection limit must be a positive integer or "unlimited"',
        )

    jobs = server.jobs
    if jobs.enabled:
        for field in (
            "max_pending",
            "max_running",
            "retention_secs",
            "max_retained",
            "max_retained_bytes",
            "max_database_bytes",
        ):
            if getattr(jobs, field) == 0:
                report(
                    f"server.jobs.{field}",
                    "out_of_range",
                    "enabled job limits must be greater than zero",
                )
        if jobs.max_retained_bytes > jobs.max_database_bytes:
            report(
                "server.jobs.max_retained_bytes",
                "inconsistent",
                "retained bytes cannot exceed server.jobs.max_database_bytes",
            )
        check_store_location("server.jobs.database", jobs.database, report)
        check_shared_jobs(jobs, report)


_UPSTREAM_URL_RULE = (
    "URL must be https (or http to a loopback host) without credentials or fragment"
)
_NO_QUERY_RULE = "the API root must not carry a query: routes are appended to its path"
_ENV_NAME_RULE = "must be an environment variable name matching [A-Z][A-Z0-9_]{0,127}"


def _next_power_of_two(value: int) -> int:
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


def _check_accounts(config: BridgeConfig, report: Report) -> None:
    accounts = config.accounts
    if accounts.active is not None and not is_account_name(accounts.active):
        report("accounts.active", "invalid", ACCOUNT_NAME_RULE)
    login = accounts.login
    for key in ("issuer", "token_url"):
        value = getattr(login, key)
        if not valid_upstream_url(value) or "?" in value:
            report(f"accounts.login.{key}", "invalid_url", _UPSTREAM_URL_RULE)
    if not login.client_id.strip() or not login.client_id.isascii():
        report("accounts.login.client_id", "required", "the OAuth client id must not be empty")
    if login.http_timeout_ms == 0:
        report("accounts.login.http_timeout_ms", "out_of_range", "must be at least 1 ms")
    if login.device_code_timeout_secs == 0:
        report("accounts.login.device_code_timeout_secs", "out_of_range", "must be at least 1 s")
    _check_pool(config, report)


_MAX_POOL_ACCOUNTS = 64
_MAX_ACCOUNT_WEIGHT = 1000
_MAX_REFUSAL_COOLDOWN_SECS = 7 * 24 * 60 * 60


def _check_pool(config: BridgeConfig, report: Report) -> None:
    """``accounts.policy`` … and each ``[accounts.pool.<name>]`` table."""
    accounts = config.accounts
    if accounts.policy not in ACCOUNT_POLICIES:
        report("accounts.policy", "invalid", "must be one of: " + ", ".join(ACCOUNT_POLICIES))
    if accounts.min_remaining_percent > 100:
        report("accounts.min_remaining_percent", "out_of_range", "must be from 0 to 100")
    if not 1 <= accounts.refusal_cooldown_secs <= _MAX_REFUSAL_COOLDOWN_SECS:
        report(
            "accounts.refusal_cooldown_secs",
            "out_of_range",
            f"must be from 1 to {_MAX_REFUSAL_COOLDOWN_SECS} seconds",
        )
    if not accounts.pool:
        return
    if len(accounts.pool) > _MAX_POOL_ACCOUNTS:
        report("accounts.pool", "out_of_range", f"at most {_MAX_POOL_ACCOUNTS} accounts")
    if not accounts.pool_accounts():
        report("accounts.pool", "required", "at least one pool account must be enabled")
    if accounts.active is not None:
        report(
            "accounts.active",
            "conflict",
            "accounts.active picks the one login when there is no pool; "
            "with [accounts.pool.*] tables, name the login in a pool account instead",
        )
    homes: dict[str, str] = {}
    for name, account in accounts.pool.items():
        if not is_account_name(name):
            report("accounts.pool", "invalid_key", f"account names: {ACCOUNT_NAME_RULE}")
            continue
        prefix = f"accounts.pool.{name}"
        if account.login is not None and account.codex_home is not None:
            report(
                f"{prefix}.codex_home",
                "conflict",
                "an account has one login: set login or codex_home, not both",
            )
        if account.login is not None and not is_account_name(account.login):
            report(f"{prefix}.login", "invalid", ACCOUNT_NAME_RULE)
        if not 1 <= account.weight <= _MAX_ACCOUNT_WEIGHT:
            report(f"{prefix}.weight", "out_of_range", f"must be from 1 to {_MAX_ACCOUNT_WEIGHT}")
        if account.max_concurrent == 0:
            report(
                f"{prefix}.max_concurrent",
                "out_of_range",
                'maximum concurrency must be a positive integer or "unlimited"',
            )
        home = (
            f"home:{account.codex_home}"
            if account.codex_home is not None
            else f"login:{account.login or name}"
        )
        if account.enabled and home in homes:
            report(
                f"{prefix}",
                "duplicate",
                f"uses the same login as account '{homes[home]}' (one login, one account)",
            )
        elif account.enabled:
            homes[home] = name
