"""CLI-made ``invalid_request`` errors carry their own advice, not the API's generic one."""

from __future__ import annotations

from typing import Any

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["invalid"]


def invalid(message: str, suggestion: str, **details: Any) -> BridgeError:
    """An ``invalid_request`` (exit 2) whose only suggestion is ``suggestion``."""
    return BridgeError(
        ErrorCode.INVALID_REQUEST, message, details=details or None, suggestions=[suggestion]
    )
