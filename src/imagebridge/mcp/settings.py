"""Bounds of what the MCP server puts into tool results (every one a parameter)."""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["LOCAL_OWNER", "McpSettings"]

LOCAL_OWNER = "anonymous-local"
"""Artifacts written by the MCP server belong to the scope of an unauthenticated local
bridge, so ``imagegen-bridge serve`` on the same data directory serves them too."""


@dataclass(frozen=True, slots=True)
class McpSettings:
    """What a tool result may contain; previews stay small unless the caller asks."""

    preview_edge: int = 256
    """Longest edge of the thumbnail previews returned as image content."""
    max_previews: int = 8
    """Previews per result; more images are listed by path only."""
    max_inline_bytes: int = 16 * 1024 * 1024
    """Total bytes of full images a result may embed when ``include_image`` is set."""
    heartbeat_s: float = 5.0
    """Seconds between keep-alive progress notifications while a generation runs."""
    max_job_page: int = 100

    def __post_init__(self) -> None:
        checks = (
            ("preview_edge", 32 <= self.preview_edge <= 2048),
            ("max_previews", 0 <= self.max_previews <= 255),
            ("max_inline_bytes", self.max_inline_bytes >= 0),
            ("heartbeat_s", 0 < self.heartbeat_s <= 3600),
            ("max_job_page", 1 <= self.max_job_page <= 100),
        )
        for name, valid in checks:
            if not valid:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    f"MCP setting {name} is out of range",
                    details={"field": name},
                )
