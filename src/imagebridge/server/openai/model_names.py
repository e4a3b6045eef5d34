"""OpenAI model names on the compatible routes: which provider and model serve a name.

OpenAI clients send the names they know (``gpt-image-2``, ``dall-e-3`` …) whatever the
bridge runs. A name resolves, in order: through the ``[server.openai.models]`` config table
(a configured route), to itself when the chosen provider serves it, to the first other
registered provider serving it when the request names no provider (so a name picked from
``GET /v1/models`` reaches the provider listed for it), and otherwise to the chosen
provider's default model with a ``model`` normalization saying so, or, under
``server.openai.unknown_models = "refuse"``, to a 400 naming ``model``. The chosen provider
is the request's ``imagegen_bridge.provider`` (``provider`` in an edit form) or the default.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import Normalization
from imagebridge.engine.registry import ProviderRegistry

__all__ = ["ModelRoute", "ServedModel", "resolve_model", "served_models"]

ROUTED = "openai_model_route"
DEFAULTED = "model_not_served_by_provider_used_default"


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """The request to run, and the normalization to report when the model changed."""

    request: ImageRequest
    normalization: Normalization | None = None


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One ``GET /v1/models`` entry: a name a client may send, and who serves it."""

    id: str
    provider: str


def _with_routing(request: ImageRequest, provider: str | None, model: str | None) -> ImageRequest:
    routing = request.routing.model_copy(update={"provider": provider, "model": model})
    return request.model_copy(update={"routing": routing})


def resolve_model(
    request: ImageRequest, config: BridgeConfig, registry: ProviderRegistry
) -> ModelRoute:
    """Route ``request.routing.model`` (an OpenAI client's ``model``) as described above."""
    requested = request.routing.model
    if requested is None:
        return ModelRoute(request)
    explicit = request.routing.provider
    settings = config.server.openai
    route = settings.models.get(requested)
    if route is not None and explicit in (None, route.provider):
        served = route.model or _default_model(registry, route.provider)
        normalization = None
        if served != requested:
            normalization = Normalization(
                field="model", requested=requested, effective=served, reason=ROUTED
            )
        return ModelRoute(_with_routing(request, route.provider, route.model), normalization)
    chosen = explicit or registry.default
    if chosen not in registry.names:
        return ModelRoute(request)  # the engine answers the unknown provider with its 404
    provider = registry.resolve(chosen)
    models = provider.descriptor.models
    if requested in models:
        return ModelRoute(request)
    if explicit is None:
        for other in registry.providers():
            if requested in other.descriptor.models:
                return ModelRoute(_with_routing(request, other.name, requested))
    if settings.unknown_models == "refuse":
        raise BridgeError(
            ErrorCode.UNSUPPORTED_CAPABILITY,
            "the model is not served by this bridge",
            provider=chosen,
            details={"field": "model", "served_models": _names(config, registry)},
        )
    default = models[0] if models else None
    normalization = Normalization(
        field="model", requested=requested, effective=default, reason=DEFAULTED
    )
    return ModelRoute(_with_routing(request, explicit, None), normalization)


def _default_model(registry: ProviderRegistry, name: str) -> str | None:
    if name not in registry.names:
        return None
    models = registry.resolve(name).descriptor.models
    return models[0] if models else None


def served_models(config: BridgeConfig, registry: ProviderRegistry) -> list[ServedModel]:
    """Every name a client may pick: configured routes first, then each provider's models."""
    entries: dict[str, ServedModel] = {}
    for name, route in sorted(config.server.openai.models.items()):
        if route.provider in registry.names:
            entries[name] = ServedModel(name, route.provider)
    for provider in registry.providers():
        for model in provider.descriptor.models:
            entries.setdefault(model, ServedModel(model, provider.name))
    return list(entries.values())


def _names(config: BridgeConfig, registry: ProviderRegistry) -> list[str]:
    return [entry.id for entry in served_models(config, registry)]
