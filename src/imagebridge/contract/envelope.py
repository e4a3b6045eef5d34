"""Typed view of the error envelope every non-2xx JSON response carries."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from imagebridge.contract._base import ContractModel, StrictBool, StrictStr, omit_empty, omit_none
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["ErrorEnvelope", "ErrorObject", "NativeError"]


class NativeError(ContractModel):
    code: ErrorCode
    retryable: StrictBool = False
    provider: StrictStr | None = Field(default=None, exclude_if=omit_none)
    upstream_request_id: StrictStr | None = Field(default=None, exclude_if=omit_none)
    details: dict[str, Any] = Field(default_factory=dict, exclude_if=omit_empty)
    suggestions: list[StrictStr] = Field(default_factory=list, exclude_if=omit_empty)


class ErrorObject(ContractModel):
    message: StrictStr
    type: StrictStr
    param: StrictStr | None
    code: StrictStr
    imagegen_bridge: NativeError


class ErrorEnvelope(ContractModel):
    error: ErrorObject
    request_id: StrictStr

    def to_error(self) -> BridgeError:
        native = self.error.imagegen_bridge
        return BridgeError(
            native.code,
            self.error.message,
            retryable=native.retryable,
            provider=native.provider,
            upstream_request_id=native.upstream_request_id,
            details=native.details,
            suggestions=native.suggestions,
        )
