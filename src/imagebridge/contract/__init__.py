"""The v1 wire contract: pydantic models, closed value sets and the one error type.

No I/O lives here. Every other layer imports its shapes from this package.
"""

from imagebridge.contract.errors import (
    ERROR_TABLE,
    BridgeError,
    ErrorCode,
    error_envelope,
    retry_after_seconds,
)

__all__ = [
    "ERROR_TABLE",
    "BridgeError",
    "ErrorCode",
    "error_envelope",
    "retry_after_seconds",
]
