"""Configuration → OpenAI provider instances (used only by :mod:`imagebridge.application`).

``[providers.openai]`` builds the official provider under the name ``openai``;
each ``[providers.openai_compatible.<name>]`` table builds one more instance under its
own name. Image URLs in answers are fetched only under ``artifacts.remote_output``, and
every size bound comes from ``artifacts``; input images reach the provider loaded by the
engine (:mod:`.inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.application.inputs import image_limits, remote_fetch_policy
from imagebridge.artifacts.inputs.remote import RemoteImageFetcher
from imagebridge.config.model import BridgeConfig, OpenAICapabilityOverrides
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.openai.images import (
    OPENAI_PROVIDER,
    OpenAIImagesProvider,
    OpenAIImagesSettings,
)
from imagebridge.providers.openai.models import (
    DEFAULT_OPENAI_MODEL,
    KNOWN_OPENAI_MODELS,
    CapabilityOverrides,
)

__all__ = ["OpenAIBuild", "build_openai_provider", "is_openai_provider"]


@dataclass(frozen=True, slots=True)
class OpenAIBuild:
    """A built provider plus what the fan-out decorator needs to wrap it."""

    provider: OpenAIImagesProvider
    native_count: int
    """The smallest per-call count among the served models."""
    max_outputs: int
    max_parallel_outputs: int


def is_openai_provider(config: BridgeConfig, name: str) -> bool:
    """Whether ``name`` is built by this module (``openai`` or a configured instance)."""
    return name == OPENAI_PROVIDER or name in config.providers.openai_compatible


def _tuple(values: list[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def _overrides(table: OpenAICapabilityOverrides) -> CapabilityOverrides | None:
    overrides = CapabilityOverrides(
        generation=table.generation,
        edits=table.edits,
        sizes=_tuple(table.sizes),
        qualities=_tuple(table.qualities),
        output_formats=_tuple(table.output_formats),
        backgrounds=_tuple(table.backgrounds),
        transparent_background=table.transparent_background,
        moderation=_tuple(table.moderation),
        input_fidelities=_tuple(table.input_fidelities),
        masks=table.masks,
        max_edit_images=table.max_edit_images,
        max_reference_images=table.max_reference_images,
        partial_images=table.partial_images,
        user=table.user,
    )
    return None if overrides == CapabilityOverrides() else overrides


def build_openai_provider(config: BridgeConfig, name: str) -> OpenAIBuild:
    """Build the provider registered as ``name`` (configuration errors if unknown)."""
    limits = image_limits(config)
    artifacts = config.artifacts
    request_max = config.runtime.request.max_outputs
    if name == OPENAI_PROVIDER:
        table = config.providers.openai
        default = table.model or DEFAULT_OPENAI_MODEL
        settings = OpenAIImagesSettings(
            name=OPENAI_PROVIDER,
            base_url=table.base_url,
            api_key_env=table.api_key_env,
            organization_env=table.organization_env,
            project_env=table.project_env,
            models=tuple(dict.fromkeys([default, *KNOWN_OPENAI_MODELS])),
            max_outputs=request_max,
            max_response_bytes=artifacts.max_response_bytes,
            max_base64_chars=artifacts.max_base64_chars,
            image_limits=limits,
        )
        max_outputs = parallel = request_max
    else:
        instance = config.providers.openai_compatible.get(name)
        if instance is None:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "no OpenAI-compatible instance has this name",
                details={"provider": name},
            )
        settings = OpenAIImagesSettings(
            name=name,
            display_name=f"OpenAI-compatible ({name})",
            base_url=instance.base_url,
            api_key_env=instance.api_key_env,
            organization_env=instance.organization_env,
            project_env=instance.project_env,
            models=tuple(instance.served_models()),
            native_max_outputs=instance.native_max_outputs,
            max_outputs=instance.max_outputs,
            overrides=_overrides(instance.capabilities),
            timeout_ms=instance.timeout_ms,
            max_response_bytes=artifacts.max_response_bytes,
            max_base64_chars=artifacts.max_base64_chars,
            image_limits=limits,
        )
        max_outputs = instance.max_outputs
        parallel = instance.max_parallel_outputs_value
    output_fetcher = None
    if artifacts.remote_output.enabled:
        output_fetcher = RemoteImageFetcher(
            remote_fetch_policy(artifacts.remote_output, max_bytes=limits.max_encoded_bytes),
            limits,
        )
    provider = OpenAIImagesProvider(settings, output_fetcher=output_fetcher)
    return OpenAIBuild(
        provider=provider,
        native_count=min(provider.native_counts().values()),
        max_outputs=max_outputs,
        max_parallel_outputs=parallel,
    )
