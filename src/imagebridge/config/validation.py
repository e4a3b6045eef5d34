"""Semantic checks of a loaded configuration.

:func:`check` never raises and never creates files: it returns every problem at once,
sorted by (field, code), so ``config check``, ``doctor`` and the diagnostics page can
show the whole list. Messages say what is wrong with a field without repeating its
value. :func:`require_valid` turns a non-empty list into one ``configuration`` error
for the commands that cannot run with a broken configuration.

The checks are grouped by subject: this module holds the root, ``[runtime]``, inputs and
artifacts and ``[server]``; :mod:`.object_store_checks` ``artifacts.backend`` and
``[artifacts.s3]``, :mod:`.provider_checks` the providers, :mod:`.account_checks` the
accounts, :mod:`.store_checks` store locations and shared mode, :mod:`.tracing_checks`
``[server.tracing.otel]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from imagebridge.config._net import (
    ENV_NAME_RULE,
    is_env_name,
    is_provider_name,
    parse_socket_address,
    valid_public_base_url,
)
from imagebridge.config.account_checks import check_accounts
from imagebridge.config.key_checks import check_keys
from imagebridge.config.model import (
    CONFIG_VERSION,
    MAX_MMAP_THRESHOLD_BYTES,
    MAX_TRIM_THRESHOLD_BYTES,
    PROVIDER_KEYS,
    UNKNOWN_MODEL_POLICIES,
    BridgeConfig,
    CircuitBreakerSettings,
    ConcurrencySettings,
    RemoteFetchSettings,
)
from imagebridge.config.object_store_checks import check_object_store
from imagebridge.config.provider_checks import check_providers
from imagebridge.config.store_checks import Report, check_shared_jobs, check_store_location
from imagebridge.config.tracing_checks import check_tracing
from imagebridge.config.webhook_checks import check_webhooks
from imagebridge.contract.errors import BridgeError, ErrorCode

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

_MAX_CANCELLATION_GRACE_MS = 30_000
_MAX_SHUTDOWN_GRACE_MS = 5 * 60 * 1000
_MAX_SERVER_SHUTDOWN_GRACE_MS = 60 * 60 * 1000
_MAX_SHUTDOWN_SETTLE_MS = 60_000
_MIN_HEARTBEAT_MS = 100
_MAX_HEARTBEAT_MS = 300_000
_RESPONSES_BOUNDS: tuple[tuple[str, int, int, str], ...] = (
    ("max_item_references", 0, 1_000, "item references"),
    ("retrieve_wait_ms", 0, 60_000, "milliseconds"),
    ("stream_poll_ms", 10, 60_000, "milliseconds"),
    ("max_stream_follow_secs", 1, 86_400, "seconds"),
)
"""``[server.openai.responses]`` bounds: (key, lowest, highest, unit)."""
_MAX_JOIN_WINDOW_SECS = 7 * 24 * 3600
_MIN_JOIN_POLL_MS = 10
_MAX_JOIN_POLL_MS = 60_000
_MAX_OPEN_DURATION_MS = 24 * 60 * 60 * 1000
_MAX_FEATHER_PX = 256  # imaging.masks.MAX_FEATHER_PX (config builds on the contract alone)
_MAX_SIZE_MATCH_WINDOW = 10_000
# A younger temp file may belong to a live writer (the store refuses less as well).
MIN_STALE_TEMP_SECS = 60
MAX_STALE_TEMP_SECS = 365 * 24 * 60 * 60
MAX_URL_TTL_SECS = 7 * 24 * 60 * 60


@dataclass(frozen=True, slots=True, order=True)
class ConfigIssue:
    """One problem: the dotted field, a stable code and a message without the value."""

    field: str
    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "code": self.code, "message": self.message}


def check(config: BridgeConfig) -> list[ConfigIssue]:
    """Every semantic problem of ``config``, sorted by field then code."""
    issues: list[ConfigIssue] = []

    def report(field: str, code: str, message: str) -> None:
        issues.append(ConfigIssue(field, code, message))

    _check_root(config, report)
    _check_runtime(config, report)
    _check_inputs_and_artifacts(config, report)
    check_object_store(config, report)
    check_providers(config, report)
    _check_server(config, report)
    check_tracing(config, report)
    _check_openai_api(config, report)
    check_keys(config, report)
    check_webhooks(config, report)
    check_accounts(config, report)
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

    images = runtime.images
    if images.feather_px > _MAX_FEATHER_PX:
        report(
            "runtime.images.feather_px",
            "out_of_range",
            f"mask feather must be at most {_MAX_FEATHER_PX} pixels",
        )
    if not 1 <= images.size_match_window <= _MAX_SIZE_MATCH_WINDOW:
        report(
            "runtime.images.size_match_window",
            "out_of_range",
            f"size-match window must be between 1 and {_MAX_SIZE_MATCH_WINDOW} calls",
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
    interval = retention.repair_interval_secs
    if interval != 0 and not MIN_STALE_TEMP_SECS <= interval <= MAX_STALE_TEMP_SECS:
        report(
            "artifacts.retention.repair_interval_secs",
            "out_of_range",
            "repair interval must be 0 (off) or between 60 seconds and 365 days",
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
    if not 1 <= artifacts.url_ttl_secs <= MAX_URL_TTL_SECS:
        report(
            "artifacts.url_ttl_secs",
            "out_of_range",
            "artifact link lifetime must be between 1 second and 7 days",
        )
    if artifacts.url_signing_key_env is not None and not is_env_name(artifacts.url_signing_key_env):
        report("artifacts.url_signing_key_env", "invalid", ENV_NAME_RULE)


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


def _check_openai_api(config: BridgeConfig, report: Report) -> None:
    settings = config.server.openai
    if settings.unknown_models not in UNKNOWN_MODEL_POLICIES:
        report(
            "server.openai.unknown_models",
            "invalid",
            "unknown_models must be one of: " + ", ".join(UNKNOWN_MODEL_POLICIES),
        )
    enabled = config.enabled_providers()
    tables = (
        ("server.openai.models", settings.models),
        ("server.openai.responses.models", settings.responses.models),
    )
    for prefix, table in tables:
        for name, route in sorted(table.items()):
            if route.provider not in enabled:
                report(
                    f"{prefix}.{name}.provider",
                    "disabled",
                    "the model route names a provider that is not enabled",
                )


_MAX_SCRAPE_CACHE_MS = 3_600_000
_MAX_SCRAPE_TIMEOUT_MS = 60_000


def _check_server(config: BridgeConfig, report: Report) -> None:
    server = config.server
    if server.bearer_token_env is not None and not is_env_name(server.bearer_token_env):
        report("server.bearer_token_env", "invalid", ENV_NAME_RULE)
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
    grace = server.shutdown_grace_ms
    if grace is not None and not 1 <= grace <= _MAX_SERVER_SHUTDOWN_GRACE_MS:
        report(
            "server.shutdown_grace_ms",
            "out_of_range",
            "shutdown grace must be between 1 millisecond and one hour",
        )
    if not 1 <= server.shutdown_settle_ms <= _MAX_SHUTDOWN_SETTLE_MS:
        report(
            "server.shutdown_settle_ms",
            "out_of_range",
            "shutdown settle time must be between 1 and 60000 milliseconds",
        )
    if not _MIN_HEARTBEAT_MS <= server.stream_heartbeat_ms <= _MAX_HEARTBEAT_MS:
        report(
            "server.stream_heartbeat_ms",
            "out_of_range",
            "stream heartbeat must be between 100 and 300000 milliseconds",
        )
    responses = server.openai.responses
    for key, lowest, highest, unit in _RESPONSES_BOUNDS:
        if not lowest <= getattr(responses, key) <= highest:
            report(
                f"server.openai.responses.{key}",
                "out_of_range",
                f"{key} must be between {lowest} and {highest} {unit}",
            )
    sync = server.sync
    if sync.retry_join_window_secs > _MAX_JOIN_WINDOW_SECS:
        report(
            "server.sync.retry_join_window_secs",
            "out_of_range",
            "retry join window must be at most 7 days (604800 seconds)",
        )
    if not _MIN_JOIN_POLL_MS <= sync.join_poll_ms <= _MAX_JOIN_POLL_MS:
        report(
            "server.sync.join_poll_ms",
            "out_of_range",
            "join poll interval must be between 10 and 60000 milliseconds",
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
    metrics = server.metrics
    if metrics.scrape_cache_ms > _MAX_SCRAPE_CACHE_MS:
        report("server.metrics.scrape_cache_ms", "out_of_range", "must be at most 3600000 (1 h)")
    if not 1 <= metrics.scrape_timeout_ms <= _MAX_SCRAPE_TIMEOUT_MS:
        report("server.metrics.scrape_timeout_ms", "out_of_range", "must be 1 to 60000 (1 min)")
    malloc = server.malloc
    if malloc.enabled:
        if not 0 < malloc.mmap_threshold_bytes <= MAX_MMAP_THRESHOLD_BYTES:
            report(
                "server.malloc.mmap_threshold_bytes",
                "out_of_range",
                "mmap threshold must be between 1 byte and 32 MiB",
            )
        if not 0 < malloc.trim_threshold_bytes <= MAX_TRIM_THRESHOLD_BYTES:
            report(
                "server.malloc.trim_threshold_bytes",
                "out_of_range",
                "trim threshold must be between 1 byte and 2 GiB - 1",
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
