from __future__ import annotations

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.options import AppServerOptions

MiB = 1024 * 1024


def test_defaults_are_the_originals() -> None:
    options = AppServerOptions()
    assert options.executable == "codex"
    assert options.args == ()
    assert options.rpc_max_message_bytes == 64 * MiB
    assert options.rpc_max_notification_bytes == 48 * MiB
    assert options.rpc_timeout == 60.0
    assert options.notification_capacity == 4
    assert options.shutdown_timeout == 5.0
    assert options.restart_backoff == 0.25


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("executable", " "),
        ("rpc_max_message_bytes", 64 * MiB + 1),
        ("rpc_max_notification_bytes", 48 * MiB + 1),
        ("notification_capacity", 0),
        ("notification_capacity", 65),
        ("restart_backoff_ms", 30_001),
        ("rpc_timeout_ms", 0),
        ("shutdown_timeout_ms", True),
    ],
)
def test_out_of_range_values_are_configuration_errors(field: str, value: object) -> None:
    with pytest.raises(BridgeError) as caught:
        AppServerOptions(**{field: value})  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details["field"] == f"providers.codex_app_server.{field}"


def test_notification_bytes_may_not_exceed_message_bytes() -> None:
    with pytest.raises(BridgeError):
        AppServerOptions(rpc_max_message_bytes=2 * MiB, rpc_max_notification_bytes=3 * MiB)


def test_notification_buffer_product_is_bounded_by_256_mib() -> None:
    # 48 MiB × next_pow2(5) = 48 × 8 = 384 MiB > 256 MiB
    with pytest.raises(BridgeError) as caught:
        AppServerOptions(notification_capacity=5)
    assert caught.value.details["field"].endswith("notification_capacity")
    # 48 MiB × 4 = 192 MiB is fine, and so is 4 MiB × 64 = 256 MiB
    AppServerOptions(notification_capacity=4)
    AppServerOptions(rpc_max_notification_bytes=4 * MiB, notification_capacity=64)
