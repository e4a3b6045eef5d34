"""What an S3 failure means to a caller: one ``artifact`` error with a stable reason.

The S3 twin's ``errors.py`` (the filesystem's says which failed writes are storage faults).
The object layer (:mod:`.objects`) turns every exception of botocore, aiohttp or the socket layer
into a :class:`~imagebridge.contract.errors.BridgeError` with code ``artifact`` and
``details.reason`` one of :data:`REASONS`; ``details.operation`` names the step (``put``,
``get``, ``head``, ``delete``, ``list``, ``presign``, ``abort``, ``check``) and, when the
store answered, ``details.status`` and ``details.s3_code`` say how. Keys, endpoints and
credentials never appear in the message or the details. :func:`write_fault` marks a write
the bucket did not take as the artifact storage's fault, as a full disk is on a filesystem.
"""

from __future__ import annotations

import asyncio
from typing import Any

from imagebridge.artifacts import rules
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "BUCKET_MISSING",
    "NOT_FOUND",
    "NO_CREDENTIALS",
    "REASONS",
    "STORE_ERROR",
    "STORE_REFUSED",
    "STORE_UNAVAILABLE",
    "is_not_found",
    "store_error",
    "write_fault",
]

STORE_UNAVAILABLE = "store_unavailable"
"""No answer, a timeout, a dropped connection or a 5xx/throttling answer: retry later."""
STORE_REFUSED = "store_refused"
"""The store refused the credentials or the permission (401/403): an operator must act."""
BUCKET_MISSING = "bucket_missing"
NOT_FOUND = "not_found"
NO_CREDENTIALS = "no_credentials"
"""Neither configured keys nor the standard AWS chain found credentials."""
STORE_ERROR = "store_error"
"""Any other refusal (a 4xx the backend does not expect)."""
REASONS = frozenset(
    {STORE_UNAVAILABLE, STORE_REFUSED, BUCKET_MISSING, NOT_FOUND, NO_CREDENTIALS, STORE_ERROR}
)

_MESSAGES = {
    STORE_UNAVAILABLE: "object store is unavailable",
    STORE_REFUSED: "object store refused the credentials or the permission",
    BUCKET_MISSING: "object store bucket does not exist",
    NOT_FOUND: rules.NOT_FOUND,
    NO_CREDENTIALS: "no credentials for the object store were found",
    STORE_ERROR: "object store refused the request",
}
_REFUSED_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "AccountProblem",
    }
)
_UNAVAILABLE_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "RequestTimeTooSkewed",
    }
)
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "NotFound", "404"})


def _classify(exc: BaseException) -> tuple[str, dict[str, Any]]:
    """The reason for ``exc`` and what the store said (status, code)."""
    # botocore is imported here, not at module level: importing this module must not
    # need the optional `s3` extra (the error names are used by the wiring too).
    from botocore import exceptions as boto

    if isinstance(exc, boto.ClientError):
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        code = str(error.get("Code") or "")
        status = int(meta.get("HTTPStatusCode") or 0)
        said: dict[str, Any] = {"status": status} if status else {}
        if code:
            said["s3_code"] = code[:64]
        if code == "NoSuchBucket":
            return BUCKET_MISSING, said
        if code in _NOT_FOUND_CODES or (status == 404 and code != "NoSuchUpload"):
            return NOT_FOUND, said
        if code in _REFUSED_CODES or status in (401, 403):
            return STORE_REFUSED, said
        if code in _UNAVAILABLE_CODES or status >= 500 or status == 429:
            return STORE_UNAVAILABLE, said
        return STORE_ERROR, said
    if isinstance(exc, boto.NoCredentialsError | boto.PartialCredentialsError):
        return NO_CREDENTIALS, {}
    if isinstance(exc, boto.BotoCoreError | OSError | asyncio.TimeoutError):
        # connection refused/reset, DNS, connect and read timeouts, a closed connection
        return STORE_UNAVAILABLE, {}
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - aiohttp is a core dependency
        return STORE_ERROR, {}
    if isinstance(exc, aiohttp.ClientError):
        return STORE_UNAVAILABLE, {}
    return STORE_ERROR, {}


def store_error(exc: BaseException, operation: str) -> BridgeError:
    """The ``artifact`` error for ``exc`` raised by ``operation``."""
    if isinstance(exc, BridgeError):
        return exc
    reason, said = _classify(exc)
    return BridgeError(
        ErrorCode.ARTIFACT,
        _MESSAGES[reason],
        retryable=reason == STORE_UNAVAILABLE,
        details={"reason": reason, "operation": operation, **said},
    )


def is_not_found(error: BridgeError) -> bool:
    """Whether the store answered that the object is not there."""
    return error.details.get("reason") == NOT_FOUND


def write_fault(error: BridgeError) -> BridgeError:
    """A write the bucket did not take, marked as the artifact storage's fault
    (``details.storage``), so a billed image is delivered inline as on a full disk."""
    if error.code is not ErrorCode.ARTIFACT or error.details.get("reason") in (None, "invalid_key"):
        return error
    return BridgeError(
        error.code,
        error.message,
        retryable=error.retryable,
        details={**error.details, "storage": "artifacts"},
        suggestions=error.suggestions,
    )
