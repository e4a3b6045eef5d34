"""Configuration → engine wiring."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebridge.application import build_application
from imagebridge.config import load_config
from imagebridge.contract import BridgeError, ErrorCode
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
