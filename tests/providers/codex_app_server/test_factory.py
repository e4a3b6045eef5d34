"""``[providers.codex_app_server]`` → provider: every key reaches the transport."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebridge.application import build_application
from imagebridge.application.codex_app_server import (
    STAGING_DIR_NAME,
    build_codex_app_server_provider,
)
from imagebridge.config import load_config
from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.providers.codex_app_server import CodexAppServerProvider


def config(tmp_path: Path, *sets: str) -> BridgeConfig:
    return load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path / "data")},
        sets=[
            'default_provider="codex-app-server"',
            "providers.codex_responses.enabled=false",
            *sets,
        ],
        cwd=tmp_path,
    ).require_valid()


def test_every_transport_key_is_copied(tmp_path: Path) -> None:
    built = build_codex_app_server_provider(
        config(
            tmp_path,
            'providers.codex_app_server.executable="/opt/codex/bin/codex"',
            'providers.codex_app_server.args=["--strict-config"]',
            f'providers.codex_app_server.cwd="{tmp_path}"',
            "providers.codex_app_server.rpc_max_message_bytes=2097152",
            "providers.codex_app_server.rpc_max_notification_bytes=1048576",
            "providers.codex_app_server.rpc_timeout_ms=1234",
            "providers.codex_app_server.notification_capacity=8",
            "providers.codex_app_server.shutdown_timeout_ms=4321",
            "providers.codex_app_server.restart_backoff_ms=99",
            "providers.codex_app_server.max_outputs=9",
            "providers.codex_app_server.max_parallel_outputs=3",
            "artifacts.image.max_encoded_bytes=1048576",
        )
    )
    provider = built.provider
    assert isinstance(provider, CodexAppServerProvider)
    options = provider.options
    assert options.executable == "/opt/codex/bin/codex"
    assert options.args == ("--strict-config",)
    assert options.cwd == tmp_path
    assert (options.rpc_max_message_bytes, options.rpc_max_notification_bytes) == (
        2 * 1024 * 1024,
        1024 * 1024,
    )
    assert (options.rpc_timeout_ms, options.notification_capacity) == (1234, 8)
    assert (options.shutdown_timeout_ms, options.restart_backoff_ms) == (4321, 99)
    assert (built.native_count, built.max_outputs, built.max_parallel_outputs) == (1, 9, 3)
    assert provider.settings.image_limits.max_encoded_bytes == 1024 * 1024


def test_staging_lives_next_to_the_session_database(tmp_path: Path) -> None:
    built = build_codex_app_server_provider(config(tmp_path))
    assert isinstance(built.provider, CodexAppServerProvider)
    assert built.provider.staging_root == tmp_path / "data" / STAGING_DIR_NAME
    database = tmp_path / "db" / "state.sqlite3"
    moved = build_codex_app_server_provider(
        config(tmp_path, f'providers.codex_app_server.session_database="{database}"')
    )
    assert isinstance(moved.provider, CodexAppServerProvider)
    assert moved.provider.staging_root == database.parent / STAGING_DIR_NAME


async def test_the_application_registers_it_behind_fan_out(tmp_path: Path) -> None:
    app = build_application(config(tmp_path))
    try:
        wrapped = app.runtime.registry.resolve("codex-app-server")
        assert isinstance(wrapped, FanoutProvider)
        assert isinstance(wrapped.inner, CodexAppServerProvider)
        assert app.runtime.registry.default == "codex-app-server"
        (descriptor,) = [
            d for d in app.runtime.registry.descriptors() if d.name == "codex-app-server"
        ]
        assert descriptor.display_name == "Codex app-server"
        assert descriptor.models == ["gpt-image-2"]
        assert wrapped.restart_count() == 0
    finally:
        await app.aclose()
    assert not (tmp_path / "data" / "state.sqlite3").exists()  # opened only when used


def test_transport_bounds_the_transport_cannot_honour_are_configuration_errors(
    tmp_path: Path,
) -> None:
    # Both at or above the 1 KiB floor (config and transport agree on it), but a notification
    # larger than a whole message is a bound the transport cannot honour.
    loaded = load_config(
        env={"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path / "data")},
        sets=[
            'default_provider="codex-app-server"',
            "providers.codex_responses.enabled=false",
            "providers.codex_app_server.rpc_max_message_bytes=2048",
            "providers.codex_app_server.rpc_max_notification_bytes=4096",
        ],
        cwd=tmp_path,
    )
    field = "providers.codex_app_server.rpc_max_notification_bytes"
    assert [issue.field for issue in loaded.issues] == [field]  # `config check` says so first
    with pytest.raises(BridgeError) as caught:
        build_codex_app_server_provider(loaded.config)  # and so does the build, unchecked
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details["field"] == field
