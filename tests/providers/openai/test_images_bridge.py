"""Bridge to bridge: an OpenAI-compatible instance pointed at another imagebridge.

The upstream is a real imagebridge HTTP server (uvicorn on 127.0.0.1, mock provider,
bearer authentication); the downstream talks to its ``/v1/images/generations`` and
``/v1/images/edits`` like any OpenAI client would, and its engine verifies the images.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from imagebridge.application import build_application
from imagebridge.config import load_config
from imagebridge.config.model import BridgeConfig
from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.providers.mock import render_image
from imagebridge.server import ServerOptions, create_app
from imagebridge.server.serve import uvicorn_config
from tests.support.images import png_b64
from tests.support.waiting import STARTUP_S

TOKEN = "upstream-bridge-token-0123456789"
MOCK_ONLY = [
    'default_provider="mock"',
    "providers.codex_responses.enabled=false",
    "providers.codex_app_server.enabled=false",
]


@dataclass
class Upstream:
    base_url: str
    server: uvicorn.Server
    thread: threading.Thread


def _config(data_dir: Path, sets: list[str], env: dict[str, str]) -> BridgeConfig:
    data_dir.mkdir(parents=True, exist_ok=True)
    environ = {"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir), **env}
    loaded = load_config(env=environ, sets=[*MOCK_ONLY, *sets], cwd=data_dir)
    loaded.require_valid()
    return loaded.config


@contextlib.contextmanager
def start_upstream(data_dir: Path, *sets: str) -> Iterator[Upstream]:
    """A real imagebridge server (mock provider, bearer auth) on a loopback port."""
    env = {"UPSTREAM_TOKEN": TOKEN}
    config = _config(
        data_dir,
        ['server.bearer_token_env="UPSTREAM_TOKEN"', "server.jobs.enabled=false", *sets],
        env,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    app = create_app(config, options=ServerOptions(listener=("127.0.0.1", port), env=env))
    server = uvicorn.Server(uvicorn_config(app, config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        assert server.started, "upstream bridge did not start"
        yield Upstream(f"http://127.0.0.1:{port}/v1", server, thread)
    finally:
        server.should_exit = True
        thread.join(timeout=20)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    with start_upstream(tmp_path / "upstream") as started:
        yield started


def downstream_config(tmp_path: Path, upstream: Upstream, *extra: str) -> BridgeConfig:
    prefix = "providers.openai_compatible.upstream"
    return _config(
        tmp_path / "downstream",
        [
            'default_provider="upstream"',
            f'{prefix}.base_url="{upstream.base_url}"',
            f'{prefix}.model="mock-image-1"',
            f'{prefix}.api_key_env="UPSTREAM_TOKEN"',
            *extra,
        ],
        {},
    )


async def test_generations_through_another_bridge_return_verified_images(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_TOKEN", TOKEN)
    app = build_application(downstream_config(tmp_path, upstream))
    try:
        response = await app.runtime.execute(
            ImageRequest.model_validate(
                {
                    "operation": "generate",
                    "prompt": "a blue kite",
                    "parameters": {"n": 3, "size": "64x48"},
                }
            )
        )
    finally:
        await app.aclose()
    assert (response.provider, response.model) == ("upstream", "mock-image-1")
    assert [item.index for item in response.data] == [0, 1, 2]
    expected = render_image("a blue kite", 0, 64, 48, OutputFormat.PNG)
    for item in response.data:
        assert (item.format, item.width, item.height) == (OutputFormat.PNG, 64, 48)
        assert item.b64_json is not None
        data = base64.b64decode(item.b64_json)
        assert (
            hashlib.sha256(data).hexdigest() == item.sha256 == hashlib.sha256(expected).hexdigest()
        )
    assert "emulated_multi_image_fanout" in response.warnings  # one image per upstream call


async def test_edits_with_a_mask_go_through_the_upstream_multipart_route(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_TOKEN", TOKEN)
    app = build_application(downstream_config(tmp_path, upstream))
    try:
        response = await app.runtime.execute(
            ImageRequest.model_validate(
                {
                    "operation": "edit",
                    "prompt": "make it autumn",
                    "images": [{"type": "base64", "data": png_b64(40, 40, (10, 120, 30))}],
                    "mask": {"type": "base64", "data": png_b64(40, 40, (10, 120, 30), mode="RGBA")},
                    "parameters": {"size": "40x40"},
                }
            )
        )
    finally:
        await app.aclose()
    [item] = response.data
    assert (item.width, item.height) == (40, 40)


async def test_a_wrong_upstream_token_is_an_authentication_error(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_TOKEN", "not-the-token")
    app = build_application(downstream_config(tmp_path, upstream))
    try:
        with pytest.raises(BridgeError) as caught:
            await app.runtime.execute(
                ImageRequest.model_validate({"operation": "generate", "prompt": "x"})
            )
    finally:
        await app.aclose()
    assert caught.value.code is ErrorCode.AUTHENTICATION
    assert "not-the-token" not in str(caught.value.to_dict())


async def test_upstream_validation_errors_keep_their_meaning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_TOKEN", TOKEN)
    # an upstream bridge that refuses model names it does not serve (by default it serves
    # them with its default model, as OpenAI clients expect)
    with start_upstream(
        tmp_path / "strict-upstream", 'server.openai.unknown_models="refuse"'
    ) as strict:
        app = build_application(
            downstream_config(
                tmp_path, strict, 'providers.openai_compatible.upstream.model="not-a-mock-model"'
            )
        )
        try:
            with pytest.raises(BridgeError) as caught:
                await app.runtime.execute(
                    ImageRequest.model_validate({"operation": "generate", "prompt": "x"})
                )
        finally:
            await app.aclose()
    # the upstream bridge answers 400 unsupported_capability for a model it does not serve
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert caught.value.details["http_status"] == 400


async def test_an_unknown_outcome_upstream_stays_unknown_downstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_TOKEN", TOKEN)
    with start_upstream(tmp_path / "slow-upstream", "runtime.default_timeout_ms=200") as slow:
        app = build_application(downstream_config(tmp_path, slow))
        try:
            with pytest.raises(BridgeError) as caught:
                await app.runtime.execute(
                    ImageRequest.model_validate(
                        {
                            "operation": "generate",
                            "prompt": "[mock:latency=3000] a slow kite",
                            "routing": {
                                "fallbacks": [{"provider": "mock"}],
                                "fallback_policy": "on_error",
                            },
                        }
                    )
                )
        finally:
            await app.aclose()
    error = caught.value
    assert error.code is ErrorCode.TIMEOUT
    assert error.outcome_unknown and not error.retryable
    assert error.details["http_status"] == 504
    assert [attempt["provider"] for attempt in error.details["attempts"]] == ["upstream"]
