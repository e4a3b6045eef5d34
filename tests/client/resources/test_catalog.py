"""``client.providers``, ``client.presets`` and ``client.sessions`` against a real bridge."""

from __future__ import annotations

import uuid

import pytest

from imagebridge.client import BridgeAPIError, ErrorCode
from imagebridge.contract.capabilities import ProviderCapabilities, ProviderDescriptor
from imagebridge.contract.presets import ImagePreset, ImagePresetTemplate
from tests.client.conftest import Client, collect, resolve


async def test_providers_list_iter_and_capabilities(api: Client) -> None:
    page = await resolve(api.providers.list(limit=1))
    assert [item.name for item in page.items] == ["mock"]
    providers = await collect(api.providers.iter())
    assert all(isinstance(item, ProviderDescriptor) for item in providers)
    assert providers[0].models == ["mock-image-1"]
    capabilities = await resolve(api.providers.capabilities("mock"))
    assert isinstance(capabilities, ProviderCapabilities)
    assert capabilities.persistent_sessions is True
    assert capabilities.batching.mode.value in ("native", "fan_out")


async def test_unknown_provider_and_model(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.providers.capabilities("nope"))
    assert caught.value.status_code == 404  # docs/api-decisions.md: not the original's 500
    assert caught.value.message == "requested provider is not registered"
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.providers.capabilities("mock", model="other-model"))
    assert caught.value.status_code == 400
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY


async def test_bad_page_limit_is_the_bridges_422(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.providers.list(limit=101))
    assert caught.value.status_code == 422


async def test_preset_lifecycle(api: Client) -> None:
    name = f"portrait-{uuid.uuid4().hex[:8]}"
    created = await resolve(
        api.presets.create(
            name, {"parameters": {"quality": "high"}}, description="Editorial portrait"
        )
    )
    assert isinstance(created, ImagePreset)
    assert created.template.parameters.quality.value == "high"
    assert created.created == created.updated
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.presets.create(name, {}))
    assert caught.value.status_code == 409
    assert caught.value.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert caught.value.param == "name"
    fetched = await resolve(api.presets.get(name))
    assert fetched == created
    replaced = await resolve(
        api.presets.replace(name, ImagePresetTemplate(prompt="a portrait"), description="Updated")
    )
    assert replaced.description == "Updated"
    assert replaced.template.prompt == "a portrait"
    assert replaced.created == created.created
    names = [preset.name for preset in await collect(api.presets.iter(page_size=1))]
    assert name in names
    await resolve(api.presets.delete(name))
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.presets.get(name))
    assert caught.value.status_code == 404


async def test_preset_templates_are_checked_locally_and_by_the_bridge(api: Client) -> None:
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.presets.create("bad-template", {"images": []}))
    assert caught.value.status_code is None  # the contract model refused it here
    assert caught.value.details["fields"] == ["images"]
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.presets.create("-x", {}))
    assert caught.value.status_code == 422
    assert caught.value.param == "name"


async def test_sessions_get_and_delete(api: Client) -> None:
    key = f"gallery-{uuid.uuid4().hex[:8]}"
    with pytest.raises(BridgeAPIError) as caught:
        await resolve(api.sessions.get(key, provider="mock"))
    assert caught.value.status_code == 404
    assert caught.value.code is ErrorCode.SESSION
    await resolve(
        api.images.generate(
            {
                "prompt": "a fox",
                "parameters": {"size": "16x16"},
                "session": {"mode": "persistent", "key": key},
            }
        )
    )
    session = await resolve(api.sessions.get(key, provider="mock"))
    assert session.key == key and session.reused is True
    assert await resolve(api.sessions.delete(key)) is None
    with pytest.raises(BridgeAPIError):
        await resolve(api.sessions.get(key))
