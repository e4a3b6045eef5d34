"""How S3 answers that the real server cannot be made to give map to ``artifact`` reasons.

Throttling and 5xx answers are retryable ``store_unavailable``; a refused signature is
``store_refused``; anything unexpected is ``store_error``, never retryable. The stopped
server, wrong keys and a missing bucket are checked against the real server in
test_objects.py.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, NoCredentialsError, ReadTimeoutError

from imagebridge.artifacts.s3.errors import store_error
from imagebridge.contract.errors import ErrorCode


def answer(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutObject",
    )


@pytest.mark.parametrize(
    ("exc", "reason", "retryable"),
    [
        (answer("SlowDown", 503), "store_unavailable", True),
        (answer("InternalError", 500), "store_unavailable", True),
        (answer("", 502), "store_unavailable", True),
        (ReadTimeoutError(endpoint_url="http://x"), "store_unavailable", True),
        (ConnectionResetError(), "store_unavailable", True),
        (answer("SignatureDoesNotMatch", 403), "store_refused", False),
        (answer("NoSuchBucket", 404), "bucket_missing", False),
        (answer("NoSuchKey", 404), "not_found", False),
        (answer("EntityTooLarge", 400), "store_error", False),
        (NoCredentialsError(), "no_credentials", False),
        (ValueError("odd"), "store_error", False),
    ],
)
def test_each_failure_has_a_stable_reason(exc: BaseException, reason: str, retryable: bool) -> None:
    error = store_error(exc, "put")
    assert error.code is ErrorCode.ARTIFACT
    assert (error.details["reason"], error.retryable) == (reason, retryable)
    assert error.details["operation"] == "put"


def test_the_store_answer_is_named_without_the_message() -> None:
    error = store_error(answer("SlowDown", 503), "get")
    assert error.details == {
        "reason": "store_unavailable",
        "operation": "get",
        "status": 503,
        "s3_code": "SlowDown",
    }
