"""Configuration of the ``openai`` provider and ``[providers.openai_compatible.<name>]``."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebridge.application import build_application
from imagebridge.config import load_config, show, to_toml
from imagebridge.config.loader import LoadedConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.providers.openai.images import OpenAIImagesProvider

BASE = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]
LOCAL = [
    'providers.openai_compatible.localai.base_url="http://127.0.0.1:8080/v1"',
    'providers.openai_compatible.localai.model="stablediffusion"',
]


def load(tmp_path: Path, *sets: str) -> LoadedConfig:
    return load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}, sets=[*BASE, *sets], cwd=tmp_path
    )


def issues(loaded: LoadedConfig) -> set[tuple[str, str]]:
    return {(issue.field, issue.code) for issue in loaded.issues}


def test_instances_are_enabled_providers_under_their_own_names(tmp_path: Path) -> None:
    loaded = load(tmp_path, *LOCAL, "runtime.providers.localai.max_concurrent=2")
    assert loaded.issues == []
    assert loaded.config.enabled_providers() == ["localai", "mock"]
    disabled = load(tmp_path, *LOCAL, "providers.openai_compatible.localai.enabled=false")
    assert disabled.config.enabled_providers() == ["mock"]


def test_no_instances_add_nothing_to_the_rendered_configuration(tmp_path: Path) -> None:
    rendered = show(load(tmp_path).config)
    assert rendered["providers"]["openai_compatible"] == {}


def test_an_instance_round_trips_through_toml(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        *LOCAL,
        'providers.openai_compatible.localai.capabilities.sizes=["512x512"]',
        'providers.openai_compatible.localai.capabilities.transparent_background="emulated"',
    )
    path = tmp_path / "round.toml"
    path.write_text(to_toml(show(loaded.config)))
    again = load_config(config_path=path, env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)})
    assert again.config == loaded.config


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (
            ['providers.openai_compatible.Local.base_url="https://x.example/v1"'],
            ("providers.openai_compatible", "invalid_key"),
        ),
        (
            [
                'providers.openai_compatible.mock.base_url="https://x.example/v1"',
                'providers.openai_compatible.mock.model="m"',
            ],
            ("providers.openai_compatible.mock", "reserved_name"),
        ),
        (
            [
                'providers.openai_compatible.lan.base_url="http://192.168.1.20:8080/v1"',
                'providers.openai_compatible.lan.model="m"',
            ],
            ("providers.openai_compatible.lan.base_url", "invalid_url"),
        ),
        (
            ['providers.openai_compatible.lan.base_url="https://x.example/v1"'],
            ("providers.openai_compatible.lan.models", "required"),
        ),
        (
            [*LOCAL, 'providers.openai_compatible.localai.api_key_env="lower"'],
            ("providers.openai_compatible.localai.api_key_env", "invalid"),
        ),
        (
            [*LOCAL, "providers.openai_compatible.localai.native_max_outputs=0"],
            ("providers.openai_compatible.localai.native_max_outputs", "out_of_range"),
        ),
        (
            [*LOCAL, "providers.openai_compatible.localai.timeout_ms=0"],
            ("providers.openai_compatible.localai.timeout_ms", "out_of_range"),
        ),
        (
            [*LOCAL, 'providers.openai_compatible.localai.capabilities.sizes=["big"]'],
            ("providers.openai_compatible.localai.capabilities.sizes", "invalid"),
        ),
        (
            [*LOCAL, 'providers.openai_compatible.localai.capabilities.qualities=["ultra"]'],
            ("providers.openai_compatible.localai.capabilities.qualities", "invalid"),
        ),
        (
            [
                *LOCAL,
                'providers.openai_compatible.localai.capabilities.transparent_background="yes"',
            ],
            ("providers.openai_compatible.localai.capabilities.transparent_background", "invalid"),
        ),
        (
            [
                *LOCAL,
                'providers.openai_compatible.localai.capabilities.transparent_background="native"',
                'providers.openai_compatible.localai.capabilities.backgrounds=["auto"]',
            ],
            (
                "providers.openai_compatible.localai.capabilities.transparent_background",
                "inconsistent",
            ),
        ),
        (
            [
                'providers.openai_compatible.q.base_url="https://x.example/v1?key=1"',
                'providers.openai_compatible.q.model="m"',
            ],
            ("providers.openai_compatible.q.base_url", "invalid_url"),
        ),
        (
            ["providers.openai.enabled=true", 'providers.openai.base_url="https://x.example/?a"'],
            ("providers.openai.base_url", "invalid_url"),
        ),
        (
            ["runtime.providers.nowhere.max_concurrent=1"],
            ("runtime.providers.nowhere", "unknown_provider"),
        ),
        (
            ["providers.openai.enabled=true", 'providers.openai.model=""'],
            ("providers.openai.model", "required"),
        ),
    ],
)
def test_instance_settings_are_checked(
    tmp_path: Path, sets: list[str], expected: tuple[str, str]
) -> None:
    assert expected in issues(load(tmp_path, *sets))


def test_insecure_http_to_a_lan_host_needs_an_explicit_opt_in(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        'providers.openai_compatible.lan.base_url="http://192.168.1.20:8080/v1"',
        'providers.openai_compatible.lan.model="m"',
        "providers.openai_compatible.lan.allow_insecure_http=true",
    )
    assert loaded.issues == []


def test_unknown_instance_keys_are_schema_errors(tmp_path: Path) -> None:
    with pytest.raises(BridgeError) as caught:
        load(tmp_path, *LOCAL, "providers.openai_compatible.localai.colour=1")
    assert caught.value.details["field"] == "providers.openai_compatible.localai.colour"


def test_the_file_form_accepts_names_with_dashes(tmp_path: Path) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text(
        'default_provider = "local-sd"\n'
        "[providers.codex_responses]\nenabled = false\n"
        "[providers.codex_app_server]\nenabled = false\n"
        '[providers.openai_compatible.local-sd]\nbase_url = "http://localhost:7860/v1"\n'
        'models = ["sdxl", "sd-1.5"]\n'
        '[providers.openai_compatible.local-sd.capabilities]\noutput_formats = ["png"]\n'
        "masks = false\n"
        "[runtime.circuit_breakers.local-sd]\nfailure_threshold = 2\n"
    )
    loaded = load_config(config_path=path, env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)})
    assert loaded.issues == []
    assert loaded.config.enabled_providers() == ["local-sd", "mock"]


async def test_the_application_builds_each_instance_with_its_limits(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        *LOCAL,
        "providers.openai_compatible.localai.max_outputs=8",
        "providers.openai_compatible.localai.max_parallel_outputs=2",
        'providers.openai_compatible.fast.base_url="https://gpu.example/v1"',
        'providers.openai_compatible.fast.model="gpt-image-1"',
        "providers.openai_compatible.fast.max_outputs=4",
        "providers.openai.enabled=true",
    ).config
    app = build_application(config)
    try:
        providers = {p.name: p for p in app.providers}
        assert sorted(providers) == ["fast", "localai", "mock", "openai"]
        local = providers["localai"]
        assert isinstance(local, FanoutProvider)
        assert (local.max_outputs, local.max_parallel_outputs) == (8, 2)
        caps = await local.capabilities(None)
        assert (caps.count.max, caps.batching.native_count.max) == (8, 1)
        fast = providers["fast"]
        assert isinstance(fast, OpenAIImagesProvider)  # native 4 covers max_outputs 4
        assert (await fast.capabilities(None)).count.max == 4
        official = providers["openai"]
        assert isinstance(official, FanoutProvider)
        assert official.descriptor.models[0] == "gpt-image-1.5"
        assert (await official.capabilities("dall-e-2")).count.max == 255
    finally:
        await app.aclose()


def test_an_unbuildable_override_is_a_configuration_error(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        *LOCAL,
        'providers.openai_compatible.localai.capabilities.transparent_background="emulated"',
        'providers.openai_compatible.localai.capabilities.output_formats=["jpeg"]',
    ).config
    with pytest.raises(BridgeError) as caught:
        build_application(config)
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details["provider"] == "localai"
