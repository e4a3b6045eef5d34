"""How the MCP server runs: transport, listen address and bridge (light: no SDK import)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["DEFAULT_HTTP_PORT", "McpOptions", "Transport", "options_from", "parse_bind"]

Transport = Literal["stdio", "streamable-http"]
DEFAULT_HTTP_PORT = 8788
REMOTE_ENV = "IMAGEGEN_BRIDGE_URL"
TOKEN_ENV = "IMAGEGEN_BRIDGE_TOKEN"  # noqa: S105 - a variable name, not a secret


@dataclass(frozen=True, slots=True)
class McpOptions:
    """How to run: transport, where to listen (HTTP), and which bridge to use."""

    transport: Transport = "stdio"
    host: str = "127.0.0.1"
    port: int = DEFAULT_HTTP_PORT
    remote: str | None = None
    token: str | None = field(default=None, repr=False)


def parse_bind(value: str) -> tuple[str, int]:
    """``IP:PORT`` (``[::1]:PORT`` for IPv6, or ``localhost:PORT``) on a loopback address.

    The MCP server has no authentication of its own, so it never listens beyond this
    machine: anyone who can reach it can spend the user's subscription and read the
    allowed input roots.
    """
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "--bind must be HOST:PORT with a port between 1 and 65535",
            details={"field": "bind"},
        )
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise BridgeError(
                ErrorCode.CONFIGURATION,
                "the MCP server only listens on a loopback address (it has no authentication)",
                details={"field": "bind"},
                suggestions=["Use --bind 127.0.0.1:PORT; reach it remotely through an SSH tunnel."],
            )
    return host, int(port_text)


def options_from(
    transport: str, bind: str | None, remote: str | None, env: Mapping[str, str]
) -> McpOptions:
    """Options from flags and the environment (``--remote`` wins over the variable)."""
    if transport not in ("stdio", "streamable-http"):
        raise BridgeError.invalid_request(
            "--transport must be stdio or streamable-http", field="transport"
        )
    if bind is not None and transport == "stdio":
        raise BridgeError.invalid_request(
            "--bind applies only to --transport streamable-http", field="bind"
        )
    host, port = parse_bind(bind) if bind is not None else ("127.0.0.1", DEFAULT_HTTP_PORT)
    return McpOptions(
        transport="stdio" if transport == "stdio" else "streamable-http",
        host=host,
        port=port,
        remote=remote or env.get(REMOTE_ENV, "").strip() or None,
        token=env.get(TOKEN_ENV) or None,
    )
