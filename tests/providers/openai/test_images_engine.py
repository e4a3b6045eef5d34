"""The OpenAI provider wired from configuration and driven through the engine."""

from __future__ import annotations

import base64
import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from imagebridge.application import Application, build_application
from imagebridge.artifacts.filesystem.store import AsyncArtifactStore
from imagebridge.config import load_config
from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.engine.provider import ProviderEventT
from imagebridge.engine.runtime import ExecutionContext
from tests.support.codex_backend import CodexBridge
from tests.support.images import png_b64
from tests.support.openai_server import (
    Behaviour,
    OpenAIImagesServer,
    openai_server_fixture,  # noqa: F401 - registers `openai_server`
    openai_server_session_fixture,  # noqa: F401 - registers `openai_server_session`
)

KEY = "sk-engine-test-key-0123456789"
BASE = [
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]


def configure(tmp_path: Path, *sets: str) -> BridgeConfig:
    loaded = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}, sets=[*BASE, *sets], cwd=tmp_path
    )
    loaded.require_valid()
    return loaded.config


def openai_sets(server: OpenAIImagesServer, default: str = "openai") -> list[str]:
    return [
        f'default_provider="{default}"',
        "providers.openai.enabled=true",
        f'providers.openai.base_url="{server.base_url}"',
    ]


def generate(**body: Any) -> ImageRequest:
    payload: dict[str, Any] = {"operation": "generate", "prompt": "a lighthouse"}
    payload.update(body)
    return ImageRequest.model_validate(payload)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_ORG_ID", raising=False)
    monkeypatch.delenv("OPENAI_PROJECT_ID", raising=False)


async def execute(app: Application, request: ImageRequest, **context: Any) -> Any:
    try:
        return await app.runtime.execute(request, ExecutionContext(**context))
    finally:
        await app.aclose()


async def test_the_configured_provider_generates_verified_artifacts(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    app = build_application(configure(tmp_path, *openai_sets(openai_server)))
    assert [p.name for p in app.providers] == ["mock", "openai"]
    response = await execute(
        app,
        generate(parameters={"size": "1024x1536"}, output={"response_format": "artifact"}),
    )
    assert response.provider == "openai" and response.model == "gpt-image-1.5"
    [item] = response.data
    assert (item.type, item.width, item.height) == ("artifact", 1024, 1536)
    assert item.name is not None
    assert isinstance(app.artifacts, AsyncArtifactStore)
    with Image.open(app.artifacts.root / item.name) as image:
        assert image.size == (1024, 1536)
    assert openai_server.requests[0].sent_secret("authorization", KEY)


async def test_credentials_come_from_the_variables_the_configuration_names(
    tmp_path: Path, openai_server: OpenAIImagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_IMAGE_KEY", "sk-team-key-0123456789")
    monkeypatch.setenv("TEAM_ORG", "org-team")
    monkeypatch.setenv("TEAM_PROJECT", "proj-team")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-default-ignored")
    app = build_application(
        configure(
            tmp_path,
            *openai_sets(openai_server),
            'providers.openai.api_key_env="TEAM_IMAGE_KEY"',
            'providers.openai.organization_env="TEAM_ORG"',
            'providers.openai.project_env="TEAM_PROJECT"',
        )
    )
    await execute(app, generate())
    [sent] = openai_server.requests
    assert sent.sent_secret("authorization", "sk-team-key-0123456789")
    assert sent.sent_secret("openai-organization", "org-team")
    assert sent.sent_secret("openai-project", "proj-team")
    assert not sent.sent_secret("authorization", KEY)  # OPENAI_API_KEY is not the named one


async def test_counts_beyond_the_native_limit_fan_out(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    app = build_application(configure(tmp_path, *openai_sets(openai_server)))
    openai = next(p for p in app.providers if p.name == "openai")
    assert isinstance(openai, FanoutProvider)
    caps = await app.runtime.registry.capabilities("openai", "gpt-image-1")
    assert (caps.count.max, caps.batching.mode.value, caps.batching.native_count.max) == (
        255,
        "fan_out",
        10,
    )
    response = await execute(
        app, generate(parameters={"n": 12, "size": "1024x1024"}, routing={"model": "gpt-image-1"})
    )
    assert sorted(r.json["n"] for r in openai_server.requests if r.json) == [2, 10]
    assert [item.index for item in response.data] == list(range(12))
    assert "emulated_multi_image_fanout" in response.warnings
    assert response.usage.provider["images"] == 12


async def test_dall_e_3_asks_for_one_image_per_call(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    app = build_application(configure(tmp_path, *openai_sets(openai_server)))
    response = await execute(app, generate(parameters={"n": 3}, routing={"model": "dall-e-3"}))
    assert openai_server.calls() == 3
    assert all(r.json is not None and r.json["n"] == 1 for r in openai_server.requests)
    assert len(response.data) == 3


async def test_partial_images_stream_through_the_runtime(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    events: list[ProviderEventT] = []

    async def sink(event: ProviderEventT) -> None:
        events.append(event)

    app = build_application(configure(tmp_path, *openai_sets(openai_server)))
    response = await execute(app, generate(parameters={"n": 2, "partial_images": 1}), events=sink)
    partials = [e for e in events if isinstance(e, PartialImageEvent)]
    assert [(p.index, p.partial_index) for p in partials] == [(0, 0), (1, 0)]
    assert len(response.data) == 2


async def test_a_failing_primary_falls_back_to_the_openai_provider(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    app = build_application(configure(tmp_path, *openai_sets(openai_server, default="mock")))
    response = await execute(
        app,
        generate(
            prompt="[mock:fail=rate_limited] a lighthouse",
            routing={"fallbacks": [{"provider": "openai"}]},
        ),
    )
    assert response.provider == "openai"
    assert "provider_fallback_used" in response.warnings
    assert [(a.provider, a.outcome.value) for a in response.attempts] == [
        ("mock", "failed"),
        ("openai", "succeeded"),
    ]
    assert openai_server.calls() == 1


async def test_an_unknown_outcome_is_never_rerouted(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    openai_server.script(Behaviour(disconnect_after=10))
    app = build_application(configure(tmp_path, *openai_sets(openai_server)))
    with pytest.raises(BridgeError) as caught:
        await execute(
            app,
            generate(routing={"fallbacks": [{"provider": "mock"}], "fallback_policy": "on_error"}),
        )
    error = caught.value
    assert error.outcome_unknown and not error.retryable
    assert [a["provider"] for a in error.details["attempts"]] == ["openai"]
    assert openai_server.calls() == 1


async def test_a_missing_key_shows_in_readiness_and_falls_back(
    tmp_path: Path, openai_server: OpenAIImagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    app = build_application(configure(tmp_path, *openai_sets(openai_server)))
    readiness = {r.provider: r for r in await app.runtime.registry.readiness(timeout=5)}
    assert readiness["mock"].ready and not readiness["openai"].ready
    assert readiness["openai"].error is not None
    assert readiness["openai"].error.code is ErrorCode.AUTHENTICATION
    response = await execute(
        app,
        generate(parameters={"size": "1024x1024"}, routing={"fallbacks": [{"provider": "mock"}]}),
    )
    assert response.provider == "mock" and openai_server.calls() == 0
    assert [(a.provider, a.error_code) for a in response.attempts] == [
        ("openai", ErrorCode.AUTHENTICATION),
        ("mock", None),
    ]


def instance_sets(server: OpenAIImagesServer, name: str, model: str) -> list[str]:
    prefix = f"providers.openai_compatible.{name}"
    return [
        f'{prefix}.base_url="{server.base_url}"',
        f'{prefix}.model="{model}"',
        f'{prefix}.capabilities.sizes=["auto", "64x64"]',
    ]


async def test_named_instances_coexist_with_independent_breakers_and_gates(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    config = configure(
        tmp_path,
        'default_provider="alpha"',
        *instance_sets(openai_server, "alpha", "alpha-sd"),
        *instance_sets(openai_server, "beta", "beta-sd"),
        "providers.openai_compatible.beta.native_max_outputs=2",
        "runtime.circuit_breakers.alpha.failure_threshold=1",
        "runtime.providers.beta.max_concurrent=1",
    )
    app = build_application(config)
    try:
        runtime = app.runtime
        assert runtime.registry.names == ["alpha", "beta", "mock"]
        assert runtime.provider_gates["beta"].max_concurrent == 1
        openai_server.script(Behaviour.fail(500, None, type="server_error"))
        with pytest.raises(BridgeError) as caught:
            await runtime.execute(generate(routing={"provider": "alpha"}))
        assert caught.value.code is ErrorCode.UPSTREAM
        with pytest.raises(BridgeError) as caught:
            await runtime.execute(generate(routing={"provider": "alpha"}))
        assert caught.value.code is ErrorCode.OVERLOADED  # alpha's breaker is open
        assert openai_server.calls() == 1
        response = await runtime.execute(
            generate(routing={"provider": "beta"}, parameters={"n": 3})
        )
        assert (response.provider, response.model) == ("beta", "beta-sd")
        assert sorted(r.json["n"] for r in openai_server.requests[1:] if r.json) == [1, 2]
        assert {r.json["model"] for r in openai_server.requests[1:] if r.json} == {"beta-sd"}
        snapshot = runtime.breaker_snapshot()
        assert (snapshot["alpha"]["state"], snapshot["beta"]["state"]) == ("open", "closed")
        descriptors = {d.name: d for d in runtime.registry.descriptors()}
        assert descriptors["beta"].models == ["beta-sd"]
    finally:
        await app.aclose()


async def test_instance_overrides_are_negotiated_before_any_call(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    app = build_application(
        configure(
            tmp_path,
            'default_provider="local"',
            *instance_sets(openai_server, "local", "sd-1.5"),
        )
    )
    with pytest.raises(BridgeError) as caught:
        await execute(app, generate(parameters={"size": "1024x1024"}))
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert caught.value.details["field"] == "parameters.size"
    assert openai_server.calls() == 0
    app = build_application(
        configure(
            tmp_path,
            'default_provider="local"',
            *instance_sets(openai_server, "local", "sd-1.5"),
        )
    )
    response = await execute(
        app,
        generate(parameters={"size": "1024x1024"}, policies={"compatibility": "normalize"}),
    )
    assert response.effective.size == "auto"
    assert openai_server.requests[0].json == {
        "model": "sd-1.5",
        "prompt": "a lighthouse",
        "n": 1,
        "response_format": "b64_json",
    }


async def test_edits_through_the_engine_carry_the_mask(
    tmp_path: Path, openai_server: OpenAIImagesServer
) -> None:
    def png(alpha: bool) -> str:
        mode = "RGBA" if alpha else "RGB"
        return png_b64(32, 32, (0, 0, 0, 0) if alpha else (0, 0, 0), mode=mode)

    app = build_application(configure(tmp_path, *openai_sets(openai_server)))
    response = await execute(
        app,
        ImageRequest.model_validate(
            {
                "operation": "edit",
                "prompt": "paint the door red",
                "images": [{"type": "base64", "data": png(False)}],
                "mask": {"type": "base64", "data": png(True)},
                "parameters": {"size": "1024x1024"},
            }
        ),
    )
    [sent] = openai_server.requests
    assert [part.name for part in sent.files] == ["image[]", "mask"]
    assert response.data[0].width == 1024


@pytest.mark.parametrize(
    ("fault", "policy", "code"),
    [
        ("http_429", "on_unavailable", "rate_limited"),  # falls back under either policy
        ("http_503", "on_error", "upstream"),  # a known upstream failure, with on_error
    ],
)
async def test_a_failing_codex_provider_falls_back_to_the_openai_provider(
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
    openai_server: OpenAIImagesServer,
    fault: str,
    policy: str,
    code: str,
) -> None:
    bridge = await codex_bridge_factory(
        "providers.openai.enabled=true", f'providers.openai.base_url="{openai_server.base_url}"'
    )
    bridge.backend.set_default(fault)
    response = await bridge.run(
        parameters={"size": "1024x1024"},
        routing={
            "provider": "codex-responses",
            "fallbacks": [{"provider": "openai"}],
            "fallback_policy": policy,
        },
    )
    assert response.provider == "openai"
    assert "provider_fallback_used" in response.warnings
    assert [(a.provider, a.outcome.value, a.error_code) for a in response.attempts] == [
        ("codex-responses", "failed", ErrorCode(code)),
        ("openai", "succeeded", None),
    ]
    assert bridge.backend.calls("responses") >= 1
    assert openai_server.calls() == 1
    [item] = response.data
    assert (item.width, item.height) == (1024, 1024)
    with Image.open(io.BytesIO(base64.b64decode(item.b64_json or ""))) as image:
        assert image.size == (1024, 1024)


async def test_a_codex_failure_with_an_unknown_outcome_never_reaches_the_openai_provider(
    codex_bridge_factory: Callable[..., Awaitable[CodexBridge]],
    openai_server: OpenAIImagesServer,
) -> None:
    bridge = await codex_bridge_factory(
        "providers.openai.enabled=true", f'providers.openai.base_url="{openai_server.base_url}"'
    )
    bridge.backend.set_default("disconnect_mid_stream")
    error = await bridge.fail(
        routing={
            "provider": "codex-responses",
            "fallbacks": [{"provider": "openai"}],
            "fallback_policy": "on_error",
        }
    )
    assert error.outcome_unknown
    assert [a["provider"] for a in error.details["attempts"]] == ["codex-responses"]
    assert openai_server.calls() == 0
