"""Configuration → engine wiring."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from imagebridge.application import build_application, build_providers, request_limits
from imagebridge.artifacts.filesystem.store import AsyncArtifactStore
from imagebridge.config import load_config
from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.errors import retry_after_seconds
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.fanout import FanoutProvider

MOCK_ONLY = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]


def config(tmp_path: Path, *sets: str) -> object:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    return load_config(env=env, sets=[*MOCK_ONLY, *sets], cwd=tmp_path).config


async def test_mock_application_serves_artifacts_under_the_data_dir(tmp_path: Path) -> None:
    app = build_application(config(tmp_path))  # type: ignore[arg-type]
    try:
        assert isinstance(app.providers[0], FanoutProvider)
        response = await app.runtime.execute(
            ImageRequest.model_validate(
                {
                    "operation": "generate",
                    "prompt": "fox",
                    "parameters": {"n": 2, "size": "16x16"},
                    "output": {"response_format": "artifact", "filename_prefix": "Fox Run"},
                }
            )
        )
        assert [item.type for item in response.data] == ["artifact", "artifact"]
        assert isinstance(app.artifacts, AsyncArtifactStore)  # artifacts.backend's default
        for item in response.data:
            assert item.name is not None and item.name.startswith("fox-run-")
            assert (app.artifacts.root / item.name).is_file()
        assert app.artifacts.root.is_relative_to(tmp_path.resolve())
    finally:
        await app.aclose()


async def test_limits_and_breakers_come_from_configuration(tmp_path: Path) -> None:
    app = build_application(
        config(
            tmp_path,
            "runtime.global.max_concurrent=2",
            "runtime.global.max_queued=0",
            "runtime.providers.mock.max_concurrent=1",
            "runtime.circuit_breakers.mock.failure_threshold=9",
            "runtime.request.max_outputs=4",
        )  # type: ignore[arg-type]
    )
    try:
        runtime = app.runtime
        assert (runtime.global_gate.max_concurrent, runtime.global_gate.max_queued) == (2, 0)
        assert runtime.provider_gates["mock"].max_concurrent == 1
        assert runtime.breakers["mock"].config.failure_threshold == 9
        with pytest.raises(BridgeError) as caught:
            await runtime.execute(
                ImageRequest.model_validate(
                    {"operation": "generate", "prompt": "x", "parameters": {"n": 5}}
                )
            )
        assert caught.value.details["issues"][0]["field"] == "parameters.n"
    finally:
        await app.aclose()


async def test_an_admission_rejection_carries_the_configured_retry_hint(tmp_path: Path) -> None:
    app = build_application(
        config(
            tmp_path,
            "runtime.providers.mock.max_concurrent=1",
            "runtime.providers.mock.max_queued=0",
            "runtime.providers.mock.retry_after_ms=2500",
        )  # type: ignore[arg-type]
    )

    def request(prompt: str) -> ImageRequest:
        return ImageRequest.model_validate(
            {"operation": "generate", "prompt": prompt, "parameters": {"size": "16x16"}}
        )

    try:
        assert app.runtime.provider_gates["mock"].retry_after_ms == 2500
        assert app.runtime.global_gate.retry_after_ms == 1000
        slow = asyncio.create_task(app.runtime.execute(request("[mock:latency=400] slow")))
        for _ in range(400):  # bounded: the slow call takes its permit within a few ms
            if app.runtime.provider_gates["mock"].active:
                break
            await asyncio.sleep(0.005)
        assert app.runtime.provider_gates["mock"].active == 1
        with pytest.raises(BridgeError) as caught:
            await app.runtime.execute(request("second"))
        assert caught.value.code is ErrorCode.OVERLOADED
        assert caught.value.details["retry_after_ms"] == 2500
        assert retry_after_seconds(caught.value) == 3
        assert len((await slow).data) == 1
    finally:
        await app.aclose()


def test_a_retry_hint_over_an_hour_is_rejected_by_name(tmp_path: Path) -> None:
    loaded = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)},
        sets=[*MOCK_ONLY, "runtime.global.retry_after_ms=3600001"],
        cwd=tmp_path,
    )
    assert [(issue.field, issue.code) for issue in loaded.issues] == [
        ("runtime.global.retry_after_ms", "out_of_range")
    ]


def test_unknown_default_provider_is_a_configuration_error(tmp_path: Path) -> None:
    loaded = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)},
        sets=[
            "providers.codex_app_server.enabled=false",
            "providers.codex_responses.enabled=false",
        ],
        cwd=tmp_path,
    )
    with pytest.raises(BridgeError) as caught:
        build_application(loaded.config)
    assert caught.value.code is ErrorCode.CONFIGURATION


async def test_an_unwrapped_provider_is_held_to_the_prompt_limit_after_the_merge(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "calls.log"  # a line per provider call

    def merged(prompt: str) -> ImageRequest:
        body = {"operation": "generate", "prompt": prompt, "negative_prompt": "blurry hands"}
        return ImageRequest.model_validate({**body, "parameters": {"size": "16x16"}})

    app = build_application(
        config(
            tmp_path,
            "providers.mock.native_count=4",
            "providers.mock.max_outputs=4",
            "runtime.request.max_prompt_bytes=96",
            f"providers.mock.call_log={str(calls)!r}",
        )  # type: ignore[arg-type]
    )
    try:
        assert not isinstance(app.providers[0], FanoutProvider)  # native count suffices
        with pytest.raises(BridgeError) as caught:
            await app.runtime.execute(merged("f" * 60))
        assert caught.value.code is ErrorCode.INVALID_REQUEST
        assert [issue["field"] for issue in caught.value.details["issues"]] == ["prompt"]
        assert not calls.exists()
        await app.runtime.execute(merged("fox"))  # within the limit once merged
        assert len(calls.read_text().splitlines()) == 1
    finally:
        await app.aclose()


def test_every_transport_is_fan_out_wrapped_from_its_own_table(tmp_path: Path) -> None:
    upstream = 'base_url="http://127.0.0.1:9/v1"'  # never called: building connects nowhere
    loaded = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)},
        sets=[
            'default_provider="mock"',
            "providers.codex_responses.max_outputs=5",
            "providers.codex_responses.max_parallel_outputs=2",
            "providers.codex_images.enabled=true",
            "providers.codex_images.max_outputs=7",
            "providers.codex_app_server.max_outputs=3",
            f"providers.openai_compatible.wide.{upstream}",
            'providers.openai_compatible.wide.model="sd"',
            "providers.openai_compatible.wide.native_max_outputs=2",
            "providers.openai_compatible.wide.max_outputs=6",
            "providers.openai_compatible.wide.max_parallel_outputs=4",
            f"providers.openai_compatible.whole.{upstream}",
            'providers.openai_compatible.whole.model="sd"',
            "providers.openai_compatible.whole.native_max_outputs=4",
            "providers.openai_compatible.whole.max_outputs=4",
            "runtime.request.max_prompt_bytes=1000",
        ],
        cwd=tmp_path,
    )
    assert loaded.issues == []
    providers = {provider.name: provider for provider in build_providers(loaded.config)}
    wrapped = {
        name: (provider.max_outputs, provider.max_parallel_outputs)
        for name, provider in providers.items()
        if isinstance(provider, FanoutProvider)
    }
    assert wrapped == {
        "codex-responses": (5, 2),
        "codex-images": (7, 7),  # parallelism "auto" is the output limit
        "codex-app-server": (3, 3),
        "wide": (6, 4),
        "mock": (255, 255),
    }
    assert providers["whole"].name == "whole" and "whole" not in wrapped  # native 4 suffices
    for provider in providers.values():
        if isinstance(provider, FanoutProvider):
            assert provider.limits == request_limits(loaded.config)
