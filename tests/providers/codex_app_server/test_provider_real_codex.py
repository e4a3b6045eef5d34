"""The whole bridge (engine + codex-app-server) against the REAL codex, 0.169.0 and 0.171.0.

codex runs behind :mod:`tests.support.real_codex` — a loopback HTTPS mock of the Codex
backend, inside ``scripts/loopback-only`` when this machine allows it — so nothing
leaves 127.0.0.1. Skipped only when node is absent;
with node present, a missing codex CLI fails the tests (install-test-deps installs it).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from imagebridge.application import Application, build_application
from imagebridge.config import BridgeConfig, load_config
from imagebridge.contract.errors import BridgeError, ErrorCode
from tests.support.real_codex import (
    MOCK_PNG,
    MOCK_PROMPT,
    RealCodexHarness,
    loopback_only_available,
    require_codex_binary,
    skip_reason,
)

from .bridge import PROVIDER, BridgeHarness, decoded, image_request
from .support import assert_reaped

_SKIP = skip_reason()
pytestmark = [
    pytest.mark.codex,
    pytest.mark.timeout(120),
    pytest.mark.skipif(_SKIP is not None, reason=_SKIP or ""),
]


@pytest.fixture
def real(tmp_path: Path, codex_version: str) -> RealCodexHarness:
    binary = require_codex_binary(codex_version)
    return RealCodexHarness(tmp_path / "real", binary, loopback_only_available())


def bridge_config(tmp_path: Path, real: RealCodexHarness, *sets: str) -> BridgeConfig:
    """Only ``codex-app-server``, running the real binary, plus ``sets``."""
    return load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path / "data")},
        sets=[
            f'default_provider="{PROVIDER}"',
            "providers.codex_responses.enabled=false",
            "providers.mock.enabled=false",
            f'providers.codex_app_server.executable="{real.wrapper}"',
            f'providers.codex_app_server.cwd="{real.workdir}"',
            "providers.codex_app_server.rpc_timeout_ms=30000",
            *sets,
        ],
        cwd=tmp_path,
    ).require_valid()


@pytest.fixture
async def app(tmp_path: Path, real: RealCodexHarness) -> AsyncIterator[Application]:
    application = build_application(bridge_config(tmp_path, real))
    try:
        yield application
    finally:
        await application.aclose()
        pids = BridgeHarness.provider(application).client.spawned_pids
        assert pids, "codex was never started"
        assert_reaped(pids)
        await real.assert_no_process_left()


def assert_only_the_mock_was_contacted(real: RealCodexHarness) -> None:
    requests = real.requests()
    assert requests, "codex never reached the mock backend"
    assert all(request["path"].startswith("/backend-api/") for request in requests)
    origin = real.origin()
    assert origin is not None and origin.startswith("https://127.0.0.1:")
    real.assert_codex_is_confined()


async def test_a_persistent_session_generates_then_resumes_its_thread(
    app: Application, real: RealCodexHarness
) -> None:
    (ready,) = await app.runtime.registry.readiness(timeout=30)
    assert ready.error is None

    session: dict[str, Any] = {"session": {"mode": "persistent", "key": "real-poster"}}
    first = await app.runtime.execute(image_request(**session))
    (image,) = first.data
    assert decoded(image.b64_json) == MOCK_PNG
    assert (image.format.value, image.width, image.height) == ("png", 8, 8)
    assert first.revised_prompt == MOCK_PROMPT
    assert first.session is not None and first.session.reused is False

    second = await app.runtime.execute(image_request(**session))
    assert second.session is not None
    assert second.session.reused is True
    assert second.session.thread_id == first.session.thread_id
    assert decoded(second.data[0].b64_json) == MOCK_PNG

    generations = [r for r in real.requests() if r["path"].endswith("/images/generations")]
    assert len(generations) == 2
    turns = [r for r in real.requests() if r["path"].endswith("/codex/responses")]
    assert all(r["headers"]["originator"] == "imagegen-bridge" for r in turns)
    # On the wire: codex ran both turns on the one thread, the second with the first's history.
    assert {r["headers"]["thread-id"] for r in turns} == {first.session.thread_id}
    first_turn, second_turn = (r for r in turns if not r["follow_up"])
    assert second_turn["input_items"] > first_turn["input_items"]
    assert BridgeHarness.provider(app).restart_count() == 0
    assert_only_the_mock_was_contacted(real)


async def test_inputs_loaded_by_the_engine_reach_codex_as_staged_images(
    tmp_path: Path, real: RealCodexHarness
) -> None:
    roots = tmp_path / "inputs"
    roots.mkdir()
    (roots / "source.png").write_bytes(MOCK_PNG)
    config = bridge_config(tmp_path, real, f'inputs.local_roots=["{roots}"]')
    application = build_application(config)
    try:
        reference = {"type": "base64", "data": base64.b64encode(MOCK_PNG).decode()}
        response = await application.runtime.execute(
            image_request(
                operation="edit",
                images=[{"type": "file", "path": "source.png", "media_type": "image/png"}],
                reference_images=[reference],
            )
        )
        assert decoded(response.data[0].b64_json) == MOCK_PNG
        turn = next(r for r in real.requests() if r["path"].endswith("/codex/responses"))
        assert turn["input_images"] == 2  # the source and the reference, both staged
        assert_only_the_mock_was_contacted(real)
    finally:
        await application.aclose()
        assert_reaped(BridgeHarness.provider(application).client.spawned_pids)
        await real.assert_no_process_left()
    assert not any(path.is_file() for path in (tmp_path / "data").rglob("codex-staging/*/*"))


async def test_policy_and_429_failures_map_to_their_codes(
    app: Application, real: RealCodexHarness
) -> None:
    real.set_mode("policy")
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    assert caught.value.code is ErrorCode.SAFETY_REJECTED
    assert "safety system" not in caught.value.message
    assert "safety system" in caught.value.details["upstream_message"]

    real.set_mode("http429")
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    assert caught.value.code is ErrorCode.RATE_LIMITED
    assert caught.value.retryable
    assert caught.value.details["upstream_status"] == 429

    real.set_mode("auto")  # the same child serves the next request once the backend recovers
    response = await app.runtime.execute(image_request())
    assert decoded(response.data[0].b64_json) == MOCK_PNG
    assert BridgeHarness.provider(app).restart_count() == 0
    assert_only_the_mock_was_contacted(real)


async def test_two_pool_accounts_each_run_their_own_codex(
    tmp_path: Path, real: RealCodexHarness
) -> None:
    """The real codex, once per account: a fan-out spreads over both children, and a
    persistent session's turns all run in the home that holds its thread."""
    homes = {name: real.add_home(f"home-{name}") for name in ("alpha", "beta")}
    config = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path / "pool-data")},
        sets=[
            f'default_provider="{PROVIDER}"',
            "providers.codex_responses.enabled=false",
            "providers.mock.enabled=false",
            f'providers.codex_app_server.executable="{real.pool_wrapper}"',
            f'providers.codex_app_server.cwd="{real.workdir}"',
            "providers.codex_app_server.rpc_timeout_ms=30000",
            *(f'accounts.pool.{name}.codex_home="{home}"' for name, home in homes.items()),
        ],
        cwd=tmp_path,
    ).require_valid()
    application = build_application(config)
    provider = BridgeHarness.provider(application)
    try:
        fanned = await application.runtime.execute(image_request(parameters={"n": 2}))
        assert [decoded(image.b64_json) for image in fanned.data] == [MOCK_PNG, MOCK_PNG]
        generations = [r for r in real.requests() if r["path"].endswith("/images/generations")]
        assert sorted(r["home"] for r in generations) == ["home-alpha", "home-beta"]

        session: dict[str, Any] = {"session": {"mode": "persistent", "key": "pool-poster"}}
        first = await application.runtime.execute(image_request(**session))
        second = await application.runtime.execute(image_request(**session))
        assert first.session is not None and second.session is not None
        assert second.session.reused and second.session.thread_id == first.session.thread_id
        turns = [
            r
            for r in real.requests()
            if r["path"].endswith("/codex/responses")
            and r["headers"].get("thread-id") == first.session.thread_id
        ]
        assert len({r["home"] for r in turns}) == 1, "the session's turns stayed on one account"
        assert {client.codex_home for client in provider.clients} == set(homes.values())
        assert_only_the_mock_was_contacted(real)
    finally:
        await application.aclose()
        for client in provider.clients:
            assert_reaped(client.spawned_pids)
        await real.assert_no_process_left()
