"""Configuration: the typed key tree, its loader (file < env < overrides) and checks.

Surfaces (CLI, server) call :func:`load_config` once and hand plain values from
:class:`BridgeConfig` to the engine; the engine never reads files or the environment.
"""

from imagebridge.config.loader import (
    ConfigOrigin,
    ConfigSource,
    LoadedConfig,
    load_config,
    parse_config,
)
from imagebridge.config.model import (
    CONFIG_VERSION,
    PROVIDER_KEYS,
    ArtifactSettings,
    BridgeConfig,
    CircuitBreakerSettings,
    CodexAppServerSettings,
    CodexImagesSettings,
    CodexResponsesSettings,
    ConcurrencySettings,
    IdempotencySettings,
    ImageLimitSettings,
    InputSettings,
    JobSettings,
    MetricsSettings,
    MockProviderSettings,
    OpenAISettings,
    ProviderSettings,
    RemoteFetchSettings,
    RequestLimitSettings,
    RetentionSettings,
    RuntimeSettings,
    ServerSettings,
    TracingSettings,
)
from imagebridge.config.paths import default_data_dir, user_config_file
from imagebridge.config.render import origins, show, to_toml
from imagebridge.config.validation import ConfigIssue, check, require_valid

__all__ = [
    "CONFIG_VERSION",
    "PROVIDER_KEYS",
    "ArtifactSettings",
    "BridgeConfig",
    "CircuitBreakerSettings",
    "CodexAppServerSettings",
    "CodexImagesSettings",
    "CodexResponsesSettings",
    "ConcurrencySettings",
    "ConfigIssue",
    "ConfigOrigin",
    "ConfigSource",
    "IdempotencySettings",
    "ImageLimitSettings",
    "InputSettings",
    "JobSettings",
    "LoadedConfig",
    "MetricsSettings",
    "MockProviderSettings",
    "OpenAISettings",
    "ProviderSettings",
    "RemoteFetchSettings",
    "RequestLimitSettings",
    "RetentionSettings",
    "RuntimeSettings",
    "ServerSettings",
    "TracingSettings",
    "check",
    "default_data_dir",
    "load_config",
    "origins",
    "parse_config",
    "require_valid",
    "show",
    "to_toml",
    "user_config_file",
]
