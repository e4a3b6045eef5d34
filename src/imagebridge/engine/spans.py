"""What an upstream call's span says about how it ended: outcome, billing, account, model.

A provider attempt and a fan-out child describe their end the same way, from the answer or
the error, with nothing a trace must not carry (no prompt, no upstream text): the error's
stable code, whether the call ran (``billing``), and the pool account it ran on.
"""

from __future__ import annotations

from imagebridge.contract.enums import ProviderAttemptOutcome
from imagebridge.contract.errors import BridgeError
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.served import served_by
from imagebridge.engine.tracing import (
    ACCOUNT,
    BILLING,
    ERROR_CODE,
    FAILED_OUTPUTS,
    MODEL,
    OUTCOME,
    PROVIDER,
    Span,
)

__all__ = ["billing", "describe_answer", "describe_failure"]


def billing(error: BridgeError | None) -> str:
    """``billed`` when the upstream call ran, ``unknown`` when it may have, else ``not_billed``."""
    if error is None or error.details.get("billed") is True:
        return "billed"
    if error.outcome_unknown:
        return "unknown"
    return "not_billed"


def describe_answer(span: Span, response: ImageResponse) -> None:
    """An answer: ``succeeded`` with at least one image; an answer whose every output
    failed (``best_effort``) is described by its first failure."""
    if response.failures:
        span.set_attribute(FAILED_OUTPUTS, len(response.failures))
        if not response.data:
            describe_failure(span, response.failures[0].error.to_error())
            return
    span.set_attribute(OUTCOME, ProviderAttemptOutcome.SUCCEEDED.value)
    span.set_attribute(BILLING, billing(None))
    span.set_attribute(PROVIDER, response.provider)
    span.set_attribute(MODEL, response.model)
    accounts = served_by(response)
    if accounts:
        span.set_attribute(ACCOUNT, ",".join(sorted(accounts)))


def describe_failure(span: Span, error: BridgeError) -> None:
    span.set_attribute(OUTCOME, ProviderAttemptOutcome.FAILED.value)
    span.set_attribute(ERROR_CODE, error.code.value)
    span.set_attribute(BILLING, billing(error))
    account = error.details.get("account")
    if isinstance(account, str):
        span.set_attribute(ACCOUNT, account)
    span.fail(error.code.value)
