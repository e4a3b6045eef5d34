"""The configuration document: the original's full TOML key tree, typed and strict.

Every table rejects unknown keys, so a typo is an error instead of a silently ignored
setting. Attribute names equal the TOML keys, except ``runtime.global`` which is a
Python keyword: its attribute is ``global_`` (aliased to ``global`` on input and
output). Secrets are never held here, only the *names* of environment variables
that contain them (``*_env`` fields). Semantic rules (ranges, relations between
fields, URLs) live in :mod:`imagebridge.config.validation`, so a loaded document can
be inspected and reported on even when it is not usable.

Keys added to the original's tree (all documented on their fields):
``[providers.mock]``, ``[providers.codex_images]``,
``providers.codex_responses.{usage_endpoint, quota_cache_ms}``,
``[providers.openai_compatible.<name>]`` (extra OpenAI-compatible upstreams),
``artifacts.backend`` and ``[artifacts.s3]`` (an S3-compatible object store for artifacts),
``providers.mock.call_log`` and the multi-instance keys of ``[server.jobs]``
(``instance_id``, ``lease_secs``, ``heartbeat_secs``, ``poll_interval_ms``, ``postgres_*``).
``[accounts]`` and ``[accounts.login]`` (the bridge's own ChatGPT logins: where they live,
which one the Codex HTTP transports use, refresh margin and the OAuth issuer);
``accounts.{policy, min_remaining_percent, refusal_cooldown_secs}`` and
``[accounts.pool.<name>]`` (several logins scheduled by image quota, docs/accounts.md).
``[server.tracing.otel]`` (OpenTelemetry traces over OTLP).
``server.jobs.database`` and ``providers.codex_app_server.session_database`` also accept a
``postgresql://`` URL (see :data:`~imagebridge.config._types.StoreLocation`).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from imagebridge.config._types import (
    I64,
    U8,
    U16,
    U32,
    U64,
    UNLIMITED,
    Bool,
    Capacity,
    ConfigPath,
    Parallelism,
    StoreLocation,
    Str,
    UnitFloat,
    capacity_value,
    parallelism_value,
)
from imagebridge.config.paths import default_data_dir
from imagebridge.contract.enums import DisconnectPolicy, RoutingPreference
from imagebridge.contract.webhooks import ALL_EVENT_TYPES

__all__ = [
    "ACCOUNT_POLICIES",
    "ARTIFACT_BACKENDS",
    "CONFIG_VERSION",
    "OTLP_PROTOCOLS",
    "PROVIDER_KEYS",
    "S3_ADDRESSING_STYLES",
    "TRACE_SAMPLERS",
    "UNKNOWN_MODEL_POLICIES",
    "AccountSettings",
    "ArtifactSettings",
    "BridgeConfig",
    "CircuitBreakerSettings",
    "CodexAppServerSettings",
    "CodexImagesSettings",
    "CodexResponsesSettings",
    "ConcurrencySettings",
    "IdempotencySettings",
    "ImageLimitSettings",
    "InputSettings",
    "JobSettings",
    "LoginIssuerSettings",
    "MetricsSettings",
    "MockProviderSettings",
    "OpenAIApiSettings",
    "OpenAICapabilityOverrides",
    "OpenAICompatibleSettings",
    "OpenAIModelRoute",
    "OpenAISettings",
    "OtelSettings",
    "PoolAccountSettings",
    "ProviderSettings",
    "RemoteFetchSettings",
    "RequestLimitSettings",
    "RetentionSettings",
    "RuntimeSettings",
    "S3ArtifactSettings",
    "ServerSettings",
    "SyncRequestSettings",
    "TracingSettings",
    "WebhookEndpointSettings",
    "WebhookSettings",
]

CONFIG_VERSION = 1
MiB = 1024 * 1024

PROVIDER_KEYS: dict[str, str] = {
    "codex_app_server": "codex-app-server",
    "codex_responses": "codex-responses",
    "openai": "openai",
    "mock": "mock",
    "codex_images": "codex-images",
}
"""``[providers.<key>]`` table → the provider's registered name."""


class _Section(BaseModel):
    """Strict table: unknown keys are rejected, output uses the TOML key names."""

    model_config = ConfigDict(
        extra="forbid",
        serialize_by_alias=True,
        validate_by_alias=True,
        validate_by_name=False,
        frozen=True,
    )


# -- runtime -------------------------------------------------------------------------


class ConcurrencySettings(_Section):
    """One admission gate: running calls plus a waiting room."""

    max_concurrent: Capacity = UNLIMITED
    """Calls running at once: a positive integer or ``"unlimited"``."""
    max_queued: Capacity = UNLIMITED
    """Calls waiting for a slot: an integer (0 = no waiting room) or ``"unlimited"``."""
    retry_after_ms: U64 = 1_000
    """What a rejection tells the client to wait (``Retry-After``, rounded up to seconds)."""

    @property
    def max_concurrent_value(self) -> int | None:
        """The concurrency bound, ``None`` when unlimited."""
        return capacity_value(self.max_concurrent)

    @property
    def max_queued_value(self) -> int | None:
        """The queue bound, ``None`` when unlimited."""
        return capacity_value(self.max_queued)


class CircuitBreakerSettings(_Section):
    """Per-provider breaker policy; slow successes never count as failures."""

    enabled: Bool = True
    failure_threshold: U32 = 5
    open_duration_ms: U64 = 180_000
    half_open_max_calls: U32 = 1
    success_threshold: U32 = 1


class RequestLimitSettings(_Section):
    """Intrinsic request bounds checked before any provider work."""

    max_prompt_bytes: U64 = 131_072
    max_negative_prompt_bytes: U64 = 65_536
    max_outputs: U8 = 255
    max_inputs: U64 = 16
    max_inline_encoded_bytes: U64 = 64 * MiB
    max_edge: U32 = 16_384
    max_timeout_ms: U64 = 1_800_000
    max_identifier_bytes: U64 = 256


class IdempotencySettings(_Section):
    """In-memory idempotent replay bounds."""

    max_entries: U64 = 10_000
    max_completed_bytes: U64 = 256 * MiB
    completed_ttl_secs: U64 = 86_400
    in_flight_ttl_secs: U64 = 1_860
    unknown_ttl_secs: U64 = 86_400


class ImagesAsAskedSettings(_Section):
    """``[runtime.images]``: how the bridge holds transports to what was asked (issue 32)."""

    feather_px: U32 = 8
    """Width of the soft seam inside an emulated mask's area (0 = a hard edge; at most 256)."""
    size_match_window: U32 = 50
    """How many recent calls per provider, model and size tier the size-match rate covers
    (1 to 10 000)."""
    prefer: RoutingPreference = RoutingPreference.DEFAULT
    """``routing.prefer`` for requests that do not say: ``honour_size`` sends an explicit
    size above 1536 px to the transport measured to deliver it best."""


class RuntimeSettings(_Section):
    """Deadlines, admission, breakers, request limits and idempotency."""

    default_timeout_ms: U64 = 300_000
    cancellation_grace_ms: U64 = 1_000
    shutdown_grace_ms: U64 = 10_000
    global_: ConcurrencySettings = Field(default_factory=ConcurrencySettings, alias="global")
    provider_default: ConcurrencySettings = Field(default_factory=ConcurrencySettings)
    providers: dict[str, ConcurrencySettings] = Field(default_factory=dict)
    """Per-provider gates keyed by provider name (``codex-responses`` …)."""
    circuit_breaker: CircuitBreakerSettings = Field(default_factory=CircuitBreakerSettings)
    circuit_breakers: dict[str, CircuitBreakerSettings] = Field(default_factory=dict)
    """Per-provider breaker policies keyed by provider name."""
    request: RequestLimitSettings = Field(default_factory=RequestLimitSettings)
    idempotency: IdempotencySettings = Field(default_factory=IdempotencySettings)
    images: ImagesAsAskedSettings = Field(default_factory=ImagesAsAskedSettings)

    def gate_for(self, provider: str) -> ConcurrencySettings:
        """The provider's own gate, or ``provider_default``."""
        return self.providers.get(provider, self.provider_default)

    def circuit_breaker_for(self, provider: str) -> CircuitBreakerSettings:
        """The provider's own breaker policy, or ``circuit_breaker``."""
        return self.circuit_breakers.get(provider, self.circuit_breaker)


# -- inputs and artifacts --------------------------------------------------------------


class RemoteFetchSettings(_Section):
    """SSRF and size policy for fetching images by URL (inputs or provider outputs)."""

    enabled: Bool = False
    allowed_hosts: list[Str] = Field(default_factory=list)
    """Exact lower-case host names; empty means any public host."""
    allowed_ports: list[U16] = Field(default_factory=lambda: [80, 443])
    allow_private_networks: Bool = False
    max_redirects: U8 = 3
    timeout_ms: U64 = 20_000
    """Per hop."""
    max_url_bytes: U64 = 8_192


class InputSettings(_Section):
    """Where local and remote input images may come from."""

    local_roots: list[ConfigPath] = Field(default_factory=lambda: [Path(".")])
    """Allowlist for CLI and embedded local inputs; HTTP clients never send server paths."""
    remote: RemoteFetchSettings = Field(default_factory=RemoteFetchSettings)


class ImageLimitSettings(_Section):
    """Encoded and decoded image bounds."""

    max_encoded_bytes: U64 = 32 * MiB
    max_edge: U32 = 16_384
    max_pixels: U64 = 64 * MiB
    max_decode_alloc: U64 = 256 * MiB


class RetentionSettings(_Section):
    """Artifact cleanup policy."""

    max_age_secs: U64 = 604_800
    max_artifacts: U64 | None = None
    """Newest artifacts to keep; unset keeps any number (within ``max_age_secs``)."""
    max_scan_entries: U64 = 100_000
    stale_temp_secs: U64 = 3_600
    """Age after which a hidden temp file left by a crashed writer is removed by cleanup
    (at least 60 s: a younger one may belong to a live writer)."""
    repair_interval_secs: U64 = 3_600
    """How often the server repairs what a crash left half-done (temp files past
    ``stale_temp_secs``, markers whose file is missing, references to missing sidecars); it
    also runs once at start. ``0`` turns both off (``artifacts repair --force`` remains)."""


def _default_artifact_root() -> Path:
    return default_data_dir() / "artifacts"


def _default_jobs_database() -> Path:
    return default_data_dir() / "jobs.sqlite3"


def _default_session_database() -> Path:
    return default_data_dir() / "state.sqlite3"


ARTIFACT_BACKENDS = ("filesystem", "s3")
ARTIFACT_URL_MODES = ("signed", "presigned")
S3_ADDRESSING_STYLES = ("auto", "path", "virtual")
S3_SERVE_MODES = ("proxy", "redirect")


class S3ArtifactSettings(_Section):
    """Added: the S3-compatible object store of ``artifacts.backend = "s3"``.

    Credentials are never held here: the ``*_env`` keys name variables holding static
    keys; with all three unset the standard AWS chain applies (environment, shared
    config and credentials files, SSO, web identity, container and instance metadata)."""

    endpoint: Str | None = None
    """http(s) URL of an S3-compatible store (Ceph RGW, MinIO, R2 …); unset: AWS S3."""
    region: Str = "us-east-1"
    bucket: Str | None = None
    """Required with ``artifacts.backend = "s3"``; it must exist."""
    key_prefix: Str = ""
    """Prepended to every object key (``"imagebridge/"``); several deployments can share
    one bucket under different prefixes."""
    addressing_style: Str = "auto"
    """``auto``, ``path`` (``endpoint/bucket/key``: IP endpoints, most self-hosted stores)
    or ``virtual`` (``bucket.endpoint/key``)."""
    access_key_id_env: Str | None = None
    secret_access_key_env: Str | None = None
    session_token_env: Str | None = None
    part_size_bytes: U64 = 8 * MiB
    """Objects larger than this go up as a multipart upload of parts this size (5 MiB to
    5 GiB, S3's bounds)."""
    connect_timeout_ms: U64 = 5_000
    read_timeout_ms: U64 = 30_000
    max_attempts: U8 = 3
    """Attempts per call, the first included, on transient failures (1 to 10)."""
    stale_upload_secs: U64 = 86_400
    """Incomplete multipart uploads older than this are aborted by the recovery sweep (a
    younger one may belong to a live writer on another instance, and aborting it fails that
    publication); 1 minute to 30 days: keep it well above the longest upload of one image."""
    serve: Str = "proxy"
    """How ``GET /v1/artifacts/{id}`` delivers an image on this backend: ``proxy`` (read,
    verified and streamed by the bridge) or ``redirect`` (verified, then a 307 to a
    presigned URL of the object valid for 5 minutes)."""


class ArtifactSettings(_Section):
    """Artifact storage, public URLs, materialisation and retention."""

    root: ConfigPath = Field(default_factory=_default_artifact_root)
    """Defaults to ``<data dir>/artifacts`` (the original: ``./data/artifacts``)."""
    public_base_url: Str | None = None
    """Credential-free http(s) base ending in ``/``, without query or fragment.

    Changed: the external address of the bridge itself (a reverse proxy's), the prefix of
    the signed links ``url`` outputs are; unset, links use the address the caller used."""
    url_ttl_secs: U64 = 3_600
    """Added: how long the signed link of a ``url`` output can be fetched (1 s to 7 days)."""
    url_signing_key_env: Str | None = None
    """Added: a variable holding the link-signing key (at least 32 characters); unset, the
    key is the file ``.imagegen-bridge-link-key`` under ``root``, made on first use."""
    max_base64_chars: U64 = 128 * MiB
    max_response_bytes: U64 = 256 * MiB
    image: ImageLimitSettings = Field(default_factory=ImageLimitSettings)
    remote_output: RemoteFetchSettings = Field(default_factory=RemoteFetchSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    backend: Str = "filesystem"
    """Added: where artifacts live: ``filesystem`` (under ``root``) or ``s3``
    (``[artifacts.s3]``: a bucket every instance shares)."""
    s3: S3ArtifactSettings = Field(default_factory=S3ArtifactSettings)
    url_mode: Str = "signed"
    """Added: what a ``url`` output is: ``signed`` (the bridge's own signed link) or
    ``presigned`` (a presigned URL of the object store; needs ``backend = "s3"``)."""


# -- providers -------------------------------------------------------------------------


class CodexAppServerSettings(_Section):
    """The ``codex app-server`` child process (JSON-RPC over stdio)."""

    enabled: Bool = True
    executable: Str = "codex"
    """Command name or path of the ``codex`` CLI."""
    args: list[Str] = Field(default_factory=list)
    cwd: ConfigPath | None = None
    codex_model: Str | None = None
    max_outputs: U8 = 255
    max_parallel_outputs: Parallelism = "auto"
    session_database: StoreLocation = Field(default_factory=_default_session_database)
    """Defaults to ``<data dir>/state.sqlite3`` (the original: ``./data/state.sqlite3``).

    Added: a ``postgresql://`` URL keeps session bindings in PostgreSQL (schema, pool and
    password from the ``server.jobs.postgres_*`` keys), shared by every bridge instance."""
    rpc_max_message_bytes: U64 = 64 * MiB
    rpc_max_notification_bytes: U64 = 48 * MiB
    rpc_timeout_ms: U64 = 60_000
    notification_capacity: U64 = 4
    shutdown_timeout_ms: U64 = 5_000
    restart_backoff_ms: U64 = 250

    @property
    def max_parallel_outputs_value(self) -> int:
        """The effective parallelism: ``"auto"`` resolves to ``max_outputs``."""
        value = parallelism_value(self.max_parallel_outputs)
        return self.max_outputs if value is None else value


class CodexResponsesSettings(_Section):
    """The Codex Responses transport (HTTP + SSE with the user's ChatGPT login)."""

    enabled: Bool = True
    endpoint: Str = "https://chatgpt.com/backend-api/codex/responses"
    responses_model: Str = "gpt-5.5"
    responses_model_fallbacks: list[Str] = Field(
        default_factory=lambda: ["gpt-5.4-mini", "gpt-5.4"]
    )
    """Added key: carrier models tried in order after ``responses_model`` when the plan
    refuses it (HTTP 400 "model is not supported when using Codex with a ChatGPT
    account"); the accepted one is remembered per login. ``[]`` turns this off."""
    image_model: Str = "gpt-image-2"
    max_outputs: U8 = 255
    max_parallel_outputs: Parallelism = "auto"
    max_transient_attempts: U8 = 2
    transient_retry_backoff_ms: U64 = 750
    usage_endpoint: Str | None = None
    """Added key: the quota endpoint. Unset derives ``<backend>/wham/usage`` from
    ``endpoint`` (see :attr:`usage_endpoint_value`); same URL rules as ``endpoint``."""
    quota_cache_ms: U64 = 30_000
    """Added key: how long a quota reading is reused (0 = ask every time)."""

    @property
    def max_parallel_outputs_value(self) -> int:
        """The effective parallelism: ``"auto"`` resolves to ``max_outputs``."""
        value = parallelism_value(self.max_parallel_outputs)
        return self.max_outputs if value is None else value

    @property
    def usage_endpoint_value(self) -> str:
        """``usage_endpoint`` or the one derived from ``endpoint``.

        ``https://chatgpt.com/backend-api/codex/responses`` → ``…/backend-api/wham/usage``:
        a trailing ``/codex/responses`` (or ``/responses``) names the backend's root.
        """
        if self.usage_endpoint is not None:
            return self.usage_endpoint
        return derive_usage_endpoint(self.endpoint)


def derive_usage_endpoint(endpoint: str) -> str:
    """The ``wham/usage`` URL on the same backend as a Responses ``endpoint``."""
    try:
        parts = urlsplit(endpoint)
    except ValueError:
        parts = urlsplit("")
    path = parts.path.rstrip("/")
    for suffix in ("/codex/responses", "/responses"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return urlunsplit((parts.scheme, parts.netloc, f"{path}/wham/usage", "", ""))


class OpenAISettings(_Section):
    """The official OpenAI Images API with an API key (``openai``; off by default).

    The original reserved this table without registering a provider; here enabling it
    registers ``openai``. The served models are the documented OpenAI image models
    (``gpt-image-1``, ``gpt-image-1-mini``, ``gpt-image-1.5``, ``gpt-image-2``,
    ``dall-e-3``, ``dall-e-2`` …); ``model`` picks the default (unset: ``gpt-image-1.5``).
    Each model's native ``n`` is used per call and larger counts fan out, up to
    ``runtime.request.max_outputs``. Further upstreams go in ``[providers.openai_compatible]``.
    """

    enabled: Bool = False
    base_url: Str = "https://api.openai.com/v1"
    api_key_env: Str = "OPENAI_API_KEY"
    """Name of the variable holding the key, never the key."""
    model: Str | None = None
    organization_env: Str | None = "OPENAI_ORG_ID"
    project_env: Str | None = "OPENAI_PROJECT_ID"


class OpenAICapabilityOverrides(_Section):
    """Added table: what an OpenAI-compatible server really accepts.

    Every key is optional; a set key replaces the value the model's profile would
    advertise, so a server that serves only a subset (LocalAI, an SD front-end) is
    described exactly and negotiation can refuse or normalise before any call.
    """

    generation: Bool | None = None
    """Whether ``/images/generations`` is served."""
    edits: Bool | None = None
    """Whether ``/images/edits`` is served."""
    sizes: list[Str] | None = None
    """Accepted sizes: ``"auto"`` and/or explicit ``"WxH"`` values (no other size passes)."""
    qualities: list[Str] | None = None
    """Subset of ``auto``, ``low``, ``medium``, ``high``."""
    output_formats: list[Str] | None = None
    """Subset of ``png``, ``jpeg``, ``webp``: the formats the server really returns."""
    backgrounds: list[Str] | None = None
    """Subset of ``auto``, ``opaque``, ``transparent``."""
    transparent_background: Str | None = None
    """``native``, ``emulated`` (the bridge keys out a flat background) or ``unsupported``.
    ``native`` requires ``transparent`` among the backgrounds; the others remove it."""
    moderation: list[Str] | None = None
    """Subset of ``auto``, ``low``."""
    input_fidelities: list[Str] | None = None
    """Subset of ``low``, ``high`` (empty: the parameter is not accepted)."""
    masks: Bool | None = None
    """Whether an edit may carry an inpainting mask (one PNG)."""
    max_edit_images: U16 | None = None
    """Most source images per edit (0: edits are refused)."""
    max_reference_images: U16 | None = None
    """Most reference images per request (0: none)."""
    partial_images: U8 | None = None
    """Most streamed partial images per output (0: the server does not stream)."""
    user: Bool | None = None
    """Whether the ``user`` attribution field is accepted."""


class OpenAICompatibleSettings(_Section):
    """Added table ``[providers.openai_compatible.<name>]``: one more OpenAI-style upstream.

    The table key is the provider's registered name (the provider-name rule:
    ``[a-z][a-z0-9-]{0,63}``, not a built-in name), so each instance has its own
    breaker and admission limits (``runtime.providers.<name>``,
    ``runtime.circuit_breakers.<name>``). Models with an OpenAI name use that model's
    documented profile; any other name gets a plain profile (PNG, ``auto`` or any size
    in multiples of 8 up to 4096, one image per call, one source image, a mask, no
    streaming) that ``capabilities`` can adjust.
    """

    enabled: Bool = True
    base_url: Str
    """The API root that ``/images/generations`` is appended to (e.g.
    ``http://127.0.0.1:8080/v1``): https, or http to a loopback host unless
    ``allow_insecure_http``; no credentials or fragment."""
    allow_insecure_http: Bool = False
    """Allow plain http to a non-loopback host (a LAN box); the key travels unencrypted."""
    api_key_env: Str | None = None
    """Name of the variable holding the bearer key; unset sends no ``Authorization``."""
    organization_env: Str | None = None
    project_env: Str | None = None
    model: Str | None = None
    """Default model; unset uses the first of ``models``."""
    models: list[Str] = Field(default_factory=list)
    """Models this upstream serves (``model`` is added when missing)."""
    native_max_outputs: U8 | None = None
    """Images one call may ask for (``n``); unset uses the model profile (1 for unknown
    models). Known OpenAI models never go above their documented limit."""
    max_outputs: U8 = 255
    """Most images per request; counts above the native one fan out."""
    max_parallel_outputs: Parallelism = "auto"
    timeout_ms: U64 | None = None
    """Upper bound for one upstream call; unset leaves only the request deadline."""
    capabilities: OpenAICapabilityOverrides = Field(default_factory=OpenAICapabilityOverrides)

    @property
    def max_parallel_outputs_value(self) -> int:
        """The effective parallelism: ``"auto"`` resolves to ``max_outputs``."""
        value = parallelism_value(self.max_parallel_outputs)
        return self.max_outputs if value is None else value

    def served_models(self) -> list[str]:
        """``model`` first (when set), then ``models`` without duplicates."""
        names = [self.model] if self.model is not None else []
        return list(dict.fromkeys([*names, *self.models]))


class MockProviderSettings(_Section):
    """Added table: the offline test-double provider.

    On by default so a fresh install can try every route without a login; it draws
    images locally and never touches the network.
    """

    enabled: Bool = True
    native_count: U8 = 1
    """Outputs one call produces; larger ``n`` goes through the fan-out decorator."""
    max_outputs: U8 = 255
    max_parallel_outputs: Parallelism = "auto"
    latency_ms: U64 = 0
    """Simulated time per call."""
    latency_jitter_ms: U64 = 0
    """Up to this much extra simulated time, uniformly drawn."""
    failure_rate: UnitFloat = 0.0
    """Share of calls (0..1) that fail with a retryable upstream error."""
    seed: I64 | None = None
    """Seed for latency jitter, failures and pixels; unset draws a fresh seed."""
    models: list[Str] = Field(default_factory=lambda: ["mock-image-1"])
    """Model names the mock advertises; the first is its default."""
    max_sessions: U32 = 10_000
    """Persistent sessions the mock keeps (in memory; the least recently used is forgotten
    first): every kept Responses request on the mock opens one."""
    call_log: ConfigPath | None = None
    """For tests and benchmarks: append one line per generation call to this file, so
    calls can be counted across processes (the line holds the call's request id only)."""

    @property
    def max_parallel_outputs_value(self) -> int:
        """The effective parallelism: ``"auto"`` resolves to ``max_outputs``."""
        value = parallelism_value(self.max_parallel_outputs)
        return self.max_outputs if value is None else value


class CodexImagesSettings(_Section):
    """Added table: the Codex images transport (direct image endpoint, same login)."""

    enabled: Bool = False
    base_url: Str = "https://chatgpt.com/backend-api/codex"
    """https, or http on loopback; no credentials or fragment."""
    model: Str = "gpt-image-2"
    max_outputs: U8 = 255
    max_parallel_outputs: Parallelism = "auto"

    @property
    def max_parallel_outputs_value(self) -> int:
        """The effective parallelism: ``"auto"`` resolves to ``max_outputs``."""
        value = parallelism_value(self.max_parallel_outputs)
        return self.max_outputs if value is None else value


class ProviderSettings(_Section):
    """One table per built-in provider; ``enabled`` decides whether it is registered."""

    codex_app_server: CodexAppServerSettings = Field(default_factory=CodexAppServerSettings)
    codex_responses: CodexResponsesSettings = Field(default_factory=CodexResponsesSettings)
    openai: OpenAISettings = Field(default_factory=OpenAISettings)
    mock: MockProviderSettings = Field(default_factory=MockProviderSettings)
    codex_images: CodexImagesSettings = Field(default_factory=CodexImagesSettings)
    openai_compatible: dict[str, OpenAICompatibleSettings] = Field(default_factory=dict)
    """Added: extra OpenAI-compatible upstreams keyed by their registered provider name."""

    def enabled_names(self) -> list[str]:
        """Registered names of the enabled providers (built-in and instances), sorted."""
        builtin = [name for key, name in PROVIDER_KEYS.items() if getattr(self, key).enabled]
        instances = [name for name, item in self.openai_compatible.items() if item.enabled]
        return sorted([*builtin, *instances])


# -- server ----------------------------------------------------------------------------


class MetricsSettings(_Section):
    enabled: Bool = False
    """Serve bearer-protected ``GET /metrics``."""
    max_key_labels: U32 = 100
    """Added: API key names with series of their own (the first seen, or in creation
    order at a scrape); later names share ``key="(other)"``."""
    max_model_labels: U32 = 50
    """Added: model names with series of their own; later ones share ``(other)``."""
    scrape_cache_ms: U64 = 10_000
    """Added: gauges read from the stores (key quotas, jobs, pool accounts) are read at
    most this often, however many scrapers there are."""
    scrape_timeout_ms: U64 = 2_000
    """Added: how long a scrape waits for each such source; a late one keeps its last
    reading (``imagegen_bridge_scrape_source_up`` 0)."""


OTLP_PROTOCOLS = ("http/protobuf", "grpc")
"""``server.tracing.otel.protocol`` values (and ``OTEL_EXPORTER_OTLP_PROTOCOL``'s)."""
TRACE_SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)
"""``server.tracing.otel.sampler`` values: OpenTelemetry's ``OTEL_TRACES_SAMPLER`` names."""


class OtelSettings(_Section):
    """Added: OpenTelemetry traces exported over OTLP (the ``otel`` extra), off by default.

    Each key left unset falls back to the standard ``OTEL_*`` variable named on it, then to
    the OpenTelemetry default; a key that is set (in the file, ``IMAGEGEN_BRIDGE__…`` or
    ``--set``) wins over the variable (docs/operations.md §4, Traces).
    """

    enabled: Bool | None = None
    """``true`` or ``false`` decide. Unset: on when an OTLP endpoint is given (``endpoint``,
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``), unless
    ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``."""
    endpoint: Str | None = None
    """The collector's base URL, e.g. ``http://collector:4318`` (``/v1/traces`` is appended
    for ``http/protobuf``). Unset: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used as it is),
    ``OTEL_EXPORTER_OTLP_ENDPOINT``, then ``http://localhost:4318`` (``:4317`` for gRPC)."""
    protocol: Str | None = None
    """``http/protobuf`` or ``grpc``. Unset: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``,
    ``OTEL_EXPORTER_OTLP_PROTOCOL``, then ``http/protobuf``."""
    service_name: Str | None = None
    """Unset: ``OTEL_SERVICE_NAME``, then ``imagegen-bridge``."""
    sampler: Str | None = None
    """One of OpenTelemetry's sampler names. Unset: ``OTEL_TRACES_SAMPLER``, then
    ``parentbased_always_on`` (a caller's ``traceparent`` decides whether it is sampled)."""
    sampler_arg: UnitFloat | None = None
    """The ratio (0..1) of the ``*traceidratio`` samplers. Unset: ``OTEL_TRACES_SAMPLER_ARG``,
    then 1."""
    headers_env: Str | None = None
    """Name of the variable holding the export's headers (``key=value,…``, e.g. a collector
    token). Unset: ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, then ``OTEL_EXPORTER_OTLP_HEADERS``."""
    export_timeout_ms: U64 | None = None
    """How long one export may take. Unset: ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``,
    ``OTEL_EXPORTER_OTLP_TIMEOUT``, then 10000."""
    schedule_delay_ms: U64 | None = None
    """Longest time a finished span waits to be exported. Unset: ``OTEL_BSP_SCHEDULE_DELAY``,
    then 5000."""
    max_queue_size: U64 | None = None
    """Finished spans held for export; beyond it new ones are dropped (never waited for).
    Unset: ``OTEL_BSP_MAX_QUEUE_SIZE``, then 2048."""
    max_export_batch_size: U64 | None = None
    """Spans sent in one export (at most ``max_queue_size``). Unset:
    ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, then 512."""


class TracingSettings(_Section):
    enabled: Bool = True
    """Structured INFO logs on stderr, never with prompts, paths or bodies."""
    otel: OtelSettings = Field(default_factory=OtelSettings)
    """Added: OpenTelemetry traces (``[server.tracing.otel]``)."""


MAX_MMAP_THRESHOLD_BYTES = 32 * MiB
"""glibc's own ceiling for its dynamic threshold: blocks the size of a large image's
pixels keep mappings of their own, returned to the system as soon as they are freed."""


MAX_TRIM_THRESHOLD_BYTES = 2**31 - 1
"""``mallopt`` takes an ``int``."""


class MallocSettings(_Section):
    """How the server process's C allocator (glibc ``malloc``) keeps freed memory.

    glibc returns the top of its heap to the system whenever more than a threshold is free
    there, and by default that threshold follows the largest block freed so far: with a
    few MB of image per request the heap can be grown and shrunk on every request, each
    regrowth costing a page fault per 4 KiB (docs/operations.md). Fixed thresholds keep
    blocks below ``mmap_threshold_bytes`` in the heap and release its top only beyond
    ``trim_threshold_bytes``. Other C libraries ignore this section.
    """

    enabled: Bool = True
    mmap_threshold_bytes: U64 = 16 * MiB
    """Blocks at least this large get their own mapping, returned when freed (at most
    32 MiB)."""
    trim_threshold_bytes: U64 = 256 * MiB
    """Free memory at the top of the heap kept for reuse before it is returned (below
    2 GiB): more than one 16-image fan-out of 1024² images frees (~190 MB)."""


class JobSettings(_Section):
    """Durable jobs; enabling them also enables presets and the dashboard.

    ``database`` picks the backend: a path (or ``sqlite:///path``) is SQLite, for one bridge
    instance; a ``postgresql://`` URL is PostgreSQL, which any number of instances share as
    one queue and one history ("shared mode"). The keys after ``max_database_bytes`` are
    additions for shared mode; SQLite ignores them.
    """

    enabled: Bool = True
    database: StoreLocation = Field(default_factory=_default_jobs_database)
    """Defaults to ``<data dir>/jobs.sqlite3`` (the original: ``./data/jobs.sqlite3``).
    A ``postgresql://`` URL must not hold a password (see ``postgres_password_env``)."""
    max_pending: U64 = 1_000
    max_running: U64 = 4
    retention_secs: U64 = 604_800
    max_retained: U64 = 10_000
    max_retained_bytes: U64 = 256 * MiB
    max_database_bytes: U64 = 1024 * MiB
    instance_id: Str | None = None
    """This bridge's name in the shared queue (leases, diagnostics). Unset: a fresh
    ``<hostname>-<pid>-<random>`` per process. Two live instances must never share one."""
    lease_secs: U64 = 30
    """How long a claimed job stays this instance's without a heartbeat; after that another
    instance records it ``interrupted`` (never re-runs it)."""
    heartbeat_secs: U64 = 10
    """How often running jobs' leases are renewed (and cancellations noticed without a
    notification); at most half of ``lease_secs``."""
    poll_interval_ms: U64 = 500
    """How often an idle instance looks for queued work when no notification woke it."""
    postgres_schema: Str = "imagebridge"
    """The PostgreSQL schema holding jobs, presets and session bindings."""
    postgres_password_env: Str | None = None
    """Name of the variable holding the PostgreSQL password (libpq's ``PGPASSWORD`` and
    ``~/.pgpass`` work too)."""
    postgres_pool_min_size: U64 = 1
    """Connections each PostgreSQL store keeps open."""
    postgres_pool_max_size: U64 = 5
    """Most connections each PostgreSQL store opens (jobs, presets and sessions each have
    a pool; shared mode also holds one listening connection)."""
    postgres_connect_timeout_ms: U64 = 10_000
    """How long connecting, or waiting for a pooled connection, may take."""
    postgres_startup_wait_ms: U64 = 30_000
    """Added: how long a starting bridge waits, retrying with backoff, for an unreachable
    PostgreSQL database before it exits non-zero (0: do not wait)."""


UNKNOWN_MODEL_POLICIES = ("default_route", "refuse")


class OpenAIModelRoute(_Section):
    """Where one OpenAI model name is served: a provider and, optionally, its model."""

    provider: Str
    model: Str | None = None
    """The provider's model; unset = the provider's default model."""


class OpenAIResponsesSettings(_Section):
    """Added: OpenAI's Responses API (``POST /v1/responses``, docs/api-decisions.md "Responses")."""

    models: dict[str, OpenAIModelRoute] = Field(default_factory=dict)
    """A Responses ``model`` (the model an agent names, e.g. ``"gpt-5.5"``) → the route its
    image work runs on, e.g. ``"gpt-5.5" = {provider = "codex-responses"}``. The image
    tool's own ``model`` is routed like the Images API's (``server.openai.models``) and wins."""
    max_item_references: U32 = 16
    """``item_reference`` items one request may name (each is a read of a kept response)."""
    retrieve_wait_ms: U64 = 5_000
    """How long ``GET /v1/responses/{id}`` waits for a synchronous response whose answer
    was given but whose record is still being written (then it answers ``in_progress``)."""
    stream_poll_ms: U64 = 500
    """How often ``GET /v1/responses/{id}?stream=true`` reads a running response's record
    for its next events (previews, the end)."""
    max_stream_follow_secs: U64 = 3_600
    """How long one resumed stream follows a response before it ends (the client resumes
    again with ``starting_after``)."""


class OpenAIApiSettings(_Section):
    """Added: the OpenAI-compatible routes (``/v1/images/generations``, ``/edits``, ``/models``,
    ``/v1/responses``)."""

    unknown_models: Str = "default_route"
    """A ``model`` neither in ``models`` nor served by the chosen provider:
    ``default_route`` (the chosen provider's default model, with a normalization) or
    ``refuse`` (400 naming ``model``)."""
    models: dict[str, OpenAIModelRoute] = Field(default_factory=dict)
    """OpenAI model name → route, e.g. ``"gpt-image-2" = {provider = "codex-responses"}``."""
    responses: OpenAIResponsesSettings = Field(default_factory=OpenAIResponsesSettings)


class SyncRequestSettings(_Section):
    """Added ``[server.sync]``: synchronous image requests (``POST /v1/images``,
    ``/v1/images/stream``, the OpenAI-compatible image routes). Each leaves a record in the
    job history; what a caller that goes away does to it, and how a retry joins the work it
    repeats, are set here (docs/api-decisions.md, "Paid work is kept, retries join it")."""

    on_disconnect: DisconnectPolicy = DisconnectPolicy.KEEP
    """``policies.on_disconnect`` for requests that do not say (the OpenAI-compatible routes
    always use it): ``keep`` finishes a request whose caller left after a provider call
    began, and keeps its images; ``cancel`` stops it (the original's rule). Before any
    provider call a caller leaving always cancels."""
    retry_join_window_secs: U64 = 900
    """How old a record may be (from its start) for a retry marked by OpenAI's SDKs
    (``x-stainless-retry-count`` of 1 or more, no ``Idempotency-Key``) to join it instead
    of generating again; 0 never joins marked retries."""
    join_poll_ms: U64 = 250
    """How often a retry waiting for a record that runs on another instance reads it."""


class KeySettings(_Section):
    """Named API keys with image quotas (docs/keys.md). Added; the original has none.

    The keys live in the jobs database (``server.jobs.database``), which is opened for
    them even when ``server.jobs.enabled`` is false (only the key tables are then used).
    With keys enabled every protected route needs a key or the admin token
    (``server.bearer_token_env``); without that token there is no HTTP admin (the CLI
    administers keys directly in the database).
    """

    enabled: Bool = False
    time_zone: Str = "UTC"
    """The IANA zone of the calendar quota windows (day from midnight, week from Monday,
    month from the 1st) and of the days usage is counted under."""
    max_keys: U64 = 1_000
    """Most keys the store holds."""
    auth_failure_limit: U64 = 20
    """Failed authentications one client address may make per window; after that its
    requests are refused (429 ``rate_limited``, ``Retry-After``) until the window ends."""
    auth_failure_window_secs: U64 = 60
    auth_failure_max_clients: U64 = 10_000
    """Client addresses whose failures are tracked at once (the oldest is forgotten)."""
    slot_lease_secs: U64 = 30
    """How long a request's ``max_concurrent`` slot (held in the database, shared by every
    instance) outlives its instance: a running instance renews its slots every third of
    this; a killed one's come back to the key this long after its last renewal."""
    slot_poll_max_ms: U64 = 500
    """Longest pause between two tries of a request waiting for a ``max_concurrent`` slot
    held on another instance (tries back off from 20 ms to this, within the deadline)."""


class WebhookEndpointSettings(_Section):
    """Added table ``[server.webhooks.endpoints.<name>]``: one receiver declared in the file.

    The name (1–64 letters, digits, ``.``, ``_``, ``-``) is its id (``whcfg_<name>``); the
    admin API lists it but cannot change it.
    """

    url: Str
    """``http(s)://host[:port]/path``, under the address rules of ``[server.webhooks]``."""
    secret_env: Str
    """Name of the variable holding its signing secret (``whsec_`` and base64)."""
    events: list[Str] = Field(default_factory=lambda: list(ALL_EVENT_TYPES))
    """The event types it receives (default: every one)."""
    key: Str | None = None
    """An API key's name or id: it then receives only that key's events."""


class WebhookSettings(_Section):
    """Added: signed webhooks (docs/webhooks.md), delivered from an outbox in the jobs
    database (``server.jobs.database``, opened for it even with jobs off)."""

    enabled: Bool = False
    allow_private_networks: Bool = False
    """Let endpoints resolve to private, loopback or link-local addresses (refused otherwise,
    as remote inputs are)."""
    allowed_ports: list[U16] = Field(default_factory=lambda: [80, 443])
    timeout_ms: U64 = 10_000
    """One attempt, from the DNS lookup to the receiver's answer."""
    retry_period_secs: U64 = 86_400
    """How long a delivery is retried; then it is marked ``failed`` (and kept)."""
    retry_initial_ms: U64 = 5_000
    """The first retry's pause; each next one doubles, with jitter."""
    retry_max_interval_ms: U64 = 3_600_000
    lease_secs: U64 = 60
    """How long a delivery being attempted stays this instance's (more than ``timeout_ms``):
    after it (a killed instance), any instance retries it."""
    max_concurrent: U64 = 8
    """Attempts in flight at once, per instance."""
    poll_interval_ms: U64 = 1_000
    """How often the outbox is looked at for due deliveries."""
    max_payload_bytes: U64 = 65_536
    max_pending: U64 = 100_000
    """Undelivered deliveries the outbox holds; beyond it new ones are recorded ``failed``
    (``webhook_outbox_full``)."""
    max_endpoints: U64 = 100
    max_response_bytes: U64 = 65_536
    """How much of a receiver's answer is read (and discarded)."""
    retention_secs: U64 = 604_800
    """How long delivered and failed deliveries stay listed."""
    max_retained: U64 = 100_000
    endpoints: dict[str, WebhookEndpointSettings] = Field(default_factory=dict)


class ServerSettings(_Section):
    """The HTTP listener."""

    bind: Str = "127.0.0.1:8787"
    """A numeric socket address (``host:port``, ``[v6]:port``)."""
    bearer_token_env: Str | None = None
    """Name of the variable holding the bearer token; required for a non-loopback bind."""
    activation_lock: ConfigPath | None = None
    max_body_bytes: U64 = 80 * MiB
    max_header_bytes: U64 = 32_768
    max_connections: Capacity = UNLIMITED
    read_timeout_ms: U64 = 0
    """Read-stall timeout; 0 disables it (a synchronous generation can be slow)."""
    write_timeout_ms: U64 = 30_000
    shutdown_grace_ms: U64 | None = None
    """Added: after SIGTERM, how long requests, streams and running jobs in flight get to
    finish while new requests are refused (503). Unset: ``runtime.shutdown_grace_ms``."""
    shutdown_settle_ms: U64 = 10_000
    """Added: after that grace, how long interrupted jobs get to be recorded, the stores
    to close and the providers to shut down before the process exits anyway (exit 1)."""
    stream_heartbeat_ms: U64 = 15_000
    """Added: idle time after which an event stream (``/v1/images/stream``, ``stream: true``)
    sends a ``: heartbeat`` comment. Keep it below every proxy's read timeout in front of
    the bridge (docs/deployment.md, "Behind a reverse proxy")."""
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    malloc: MallocSettings = Field(default_factory=MallocSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    openai: OpenAIApiSettings = Field(default_factory=OpenAIApiSettings)
    keys: KeySettings = Field(default_factory=KeySettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    sync: SyncRequestSettings = Field(default_factory=SyncRequestSettings)

    @property
    def max_connections_value(self) -> int | None:
        """The connection bound, ``None`` when unlimited."""
        return capacity_value(self.max_connections)


# -- own logins ------------------------------------------------------------------------


class LoginIssuerSettings(_Section):
    """Added table ``[accounts.login]``: the OAuth issuer codex signs in with.

    The defaults are the values the codex CLI uses; tests point them at a local mock.
    """

    issuer: Str = "https://auth.openai.com"
    """Base URL of the issuer: ``/oauth/authorize``, ``/api/accounts/deviceauth/*`` and
    the device page ``/codex/device`` live under it. https, or http on loopback."""
    token_url: Str = "https://auth.openai.com/oauth/token"  # noqa: S105 - a URL, not a secret
    """The token endpoint (code exchange and refresh). https, or http on loopback."""
    client_id: Str = "app_EMoamEEZ73f0CkXaXp7hrann"
    """The public OAuth client id of the codex CLI (no secret exists)."""
    callback_port: U16 = 1455
    """Loopback port of the browser flow's callback (codex's registered redirect uses 1455;
    0 picks a free port, which the real issuer refuses)."""
    http_timeout_ms: U64 = 30_000
    """Timeout of each call to the issuer."""
    device_code_timeout_secs: U64 = 900
    """How long a device-code (or browser) sign-in may wait for the person."""


def _default_accounts_directory() -> Path:
    return default_data_dir() / "accounts"


ACCOUNT_POLICIES = ("quota", "round_robin", "primary_first")
"""How the account pool picks an account for each upstream call (docs/accounts.md)."""


class PoolAccountSettings(_Section):
    """Added table ``[accounts.pool.<name>]``: one account of the Codex account pool.

    Its login is ``login`` (an own login, refreshed by the bridge) or ``codex_home`` (a
    codex home, borrowed: codex refreshes it, the bridge only reads it); with neither, the
    own login named like the table. The name is the account's label in diagnostics,
    metrics and errors.
    """

    enabled: Bool = True
    login: Str | None = None
    """An own login (``imagegen-bridge login --account <login>``)."""
    codex_home: ConfigPath | None = None
    """A codex home holding ``auth.json`` (``CODEX_HOME=<dir> codex login``); never written."""
    weight: U32 = 1
    """Share of calls under ``round_robin``; order under ``primary_first`` (highest first);
    the last tie-breaker under ``quota``."""
    max_concurrent: Capacity = UNLIMITED
    """Upstream calls this account runs at once, across every Codex transport; a call that
    finds every ready account full waits for a slot (within its deadline)."""

    @property
    def max_concurrent_value(self) -> int | None:
        """The concurrency bound, ``None`` when unlimited."""
        return capacity_value(self.max_concurrent)


class AccountSettings(_Section):
    """Added table ``[accounts]``: the bridge's own logins (``imagegen-bridge login``).

    Each login is ``<directory>/<name>/auth.json`` in codex's shape, so that directory can
    serve a codex child as ``CODEX_HOME``. The bridge refreshes its own logins; a borrowed
    ``$CODEX_HOME`` is only ever read. ``[accounts.pool.<name>]`` tables make an account
    pool that every Codex transport draws from; without them there is one account, as
    before (``active`` or ``$CODEX_HOME``).
    """

    directory: ConfigPath = Field(default_factory=_default_accounts_directory)
    """Where own logins live (default ``<data dir>/accounts``)."""
    active: Str | None = None
    """Name of the own login the Codex HTTP transports use; unset: the borrowed
    ``$CODEX_HOME`` (``~/.codex``), as before."""
    refresh_margin_secs: U64 = 300
    """Refresh an own login this long before its access token expires."""
    lock_timeout_ms: U64 = 30_000
    """Most time spent waiting for another process's refresh of the same login."""
    policy: Str = "quota"
    """Pool scheduling: ``quota`` (most remaining image quota), ``round_robin`` (by
    weight) or ``primary_first`` (highest weight while it is ready)."""
    min_remaining_percent: U8 = 0
    """Skip a pool account whose image window has less than this percentage left."""
    refusal_cooldown_secs: U64 = 300
    """How long a pool account refused for its login or plan (or out of quota with no
    reset time given) is skipped before it is tried again."""
    login: LoginIssuerSettings = Field(default_factory=LoginIssuerSettings)
    pool: dict[str, PoolAccountSettings] = Field(default_factory=dict)
    """The account pool, keyed by account name (empty: one account, as before)."""

    def pool_accounts(self) -> dict[str, PoolAccountSettings]:
        """The enabled pool accounts, in the order they were configured."""
        return {name: account for name, account in self.pool.items() if account.enabled}


# -- root ------------------------------------------------------------------------------


class BridgeConfig(_Section):
    """The whole effective configuration."""

    version: U32 = CONFIG_VERSION
    default_provider: Str = "codex-responses"
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    inputs: InputSettings = Field(default_factory=InputSettings)
    artifacts: ArtifactSettings = Field(default_factory=ArtifactSettings)
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    accounts: AccountSettings = Field(default_factory=AccountSettings)
    """Added: the bridge's own ChatGPT logins."""

    def enabled_providers(self) -> list[str]:
        """Registered names of the enabled providers, sorted."""
        return self.providers.enabled_names()


def builtin_defaults(data_dir: Path) -> BridgeConfig:
    """The default document with its data paths under ``data_dir``."""
    return BridgeConfig.model_validate(
        {
            "artifacts": {"root": data_dir / "artifacts"},
            "accounts": {"directory": data_dir / "accounts"},
            "providers": {"codex_app_server": {"session_database": data_dir / "state.sqlite3"}},
            "server": {"jobs": {"database": data_dir / "jobs.sqlite3"}},
        }
    )
