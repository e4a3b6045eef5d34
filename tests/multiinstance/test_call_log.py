"""``providers.mock.call_log``: one line per provider call, from any number of processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagebridge.application import CallLogProvider, build_application
from imagebridge.config import load_config
from imagebridge.contract import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.providers.mock import MockProvider

MOCK_ONLY = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]


def request(prompt: str) -> ImageRequest:
    return ImageRequest.model_validate(
        {"operation": "generate", "prompt": prompt, "parameters": {"size": "8x8"}}
    )


async def test_each_call_appends_one_line_before_it_runs(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    config = load_config(
        env=env, sets=[*MOCK_ONLY, f'providers.mock.call_log="{log}"'], cwd=tmp_path
    ).config
    app = build_application(config)
    try:
        decorated = app.providers[0]
        assert isinstance(decorated, FanoutProvider)
        assert isinstance(decorated.inner, CallLogProvider)
        assert isinstance(decorated.inner.inner, MockProvider)
        assert decorated.name == "mock"
        for n, prompt in enumerate(["fox secret-prompt", "[mock:fail=upstream] owl"]):
            context = ExecutionContext(
                request_id=f"req-{n}", idempotency_scope="s", owner="anonymous-local"
            )
            if n == 0:
                await app.runtime.execute(request(prompt), context)
            else:
                with pytest.raises(BridgeError):
                    await app.runtime.execute(request(prompt), context)
    finally:
        await app.aclose()
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    assert [line.split(" ", 1)[0] for line in lines] == [str(os.getpid())] * 2
    assert ["req-0" in lines[0], "req-1" in lines[1]] == [True, True]
    assert "secret-prompt" not in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o600


async def test_without_a_call_log_the_mock_is_not_wrapped(tmp_path: Path) -> None:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    app = build_application(load_config(env=env, sets=MOCK_ONLY, cwd=tmp_path).config)
    try:
        decorated = app.providers[0]
        assert isinstance(decorated, FanoutProvider)
        assert isinstance(decorated.inner, MockProvider)
    finally:
        await app.aclose()
