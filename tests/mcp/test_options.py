"""Transport options: loopback-only HTTP, flags and environment."""

from __future__ import annotations

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.mcp import McpSettings, options_from, parse_bind


@pytest.mark.parametrize(
    ("value", "expected"),
    [("127.0.0.1:8788", ("127.0.0.1", 8788)), ("[::1]:9000", ("::1", 9000)),
     ("localhost:1", ("localhost", 1)), ("127.0.0.5:80", ("127.0.0.5", 80))],
)  # fmt: skip
def test_loopback_binds(value: str, expected: tuple[str, int]) -> None:
    assert parse_bind(value) == expected


@pytest.mark.parametrize(
    "value", ["0.0.0.0:8788", "[::]:8788", "192.168.1.2:80", "example.com:80", "127.0.0.1",
              "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:x"],
)  # fmt: skip
def test_other_binds_are_refused(value: str) -> None:
    with pytest.raises(BridgeError) as caught:
        parse_bind(value)
    assert caught.value.code is ErrorCode.CONFIGURATION


def test_options_from_flags_and_environment() -> None:
    env = {"IMAGEGEN_BRIDGE_URL": "http://127.0.0.1:8787", "IMAGEGEN_BRIDGE_TOKEN": "tok"}
    options = options_from("stdio", None, None, env)
    assert options.remote == "http://127.0.0.1:8787"
    assert options.token == "tok"
    assert "tok" not in repr(options)
    explicit = options_from("streamable-http", "127.0.0.1:9", "http://other:1", {})
    assert (explicit.transport, explicit.host, explicit.port) == ("streamable-http", "127.0.0.1", 9)
    assert explicit.remote == "http://other:1"
    with pytest.raises(BridgeError) as caught:
        options_from("stdio", "127.0.0.1:9", None, {})
    assert caught.value.field == "bind"


@pytest.mark.parametrize(
    "kwargs", [{"preview_edge": 16}, {"max_previews": -1}, {"heartbeat_s": 0},
               {"max_inline_bytes": -1}, {"max_job_page": 0}],
)  # fmt: skip
def test_settings_are_bounded(kwargs: dict[str, int]) -> None:
    with pytest.raises(BridgeError):
        McpSettings(**kwargs)  # type: ignore[arg-type]
