"""The end of one image operation, told to whoever counts it: the observer port.

Every surface that runs an image operation — the synchronous, streamed and
OpenAI-compatible routes, durable jobs, and later the Responses API — ends it by handing
one :class:`ImageOutcome` to an :class:`OutcomeObserver`. The server's metrics are the
observer (``server/metrics``); the services only know this port, so the jobs layer
never imports the server. A tracer can implement the same port to close its span with
the operation's attributes: the place an operation ends is this one call per surface.

An outcome says how many images were asked for and how many were delivered, and, for
the rest, whether they failed (not billed) or their outcome is unknown (the upstream
call may have run). :func:`image_shares` splits it by the pool account each image ran
on, as the key usage rows do (docs/keys.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from imagebridge.contract.errors import BridgeError
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse
from imagebridge.engine.served import served_by
from imagebridge.keys import key_id_of_scope
from imagebridge.storage.records import JobRecord, KeyRecord

__all__ = [
    "ROUTES",
    "ImageOutcome",
    "OutcomeObserver",
    "failure_outcome",
    "image_shares",
    "report_job_run",
    "success_outcome",
]

ROUTES: Final = ("images", "stream", "openai", "jobs", "responses")
"""The surfaces an operation comes through (the metrics' ``route`` label). ``responses``
is reserved for the Responses API: its route hands its outcomes to the same observer."""


@dataclass(frozen=True, slots=True)
class ImageOutcome:
    """One finished image operation: counts, names and times, never prompts or ids."""

    route: str
    provider: str
    model: str | None
    """The model that answered, else the one asked for (``None``: the provider's default)."""
    key: str | None
    """The API key's *name* (``None``: no key — the admin, a single token, or no auth)."""
    requested: int
    """Images asked for (0 when the request could not even be read)."""
    delivered: int
    code: str | None
    """The error code, ``None`` for a success (possibly with fewer images than asked)."""
    unknown: bool = False
    """The failure's upstream call may have run: its images' outcome is unknown."""
    seconds: float = 0.0
    """The operation's own time: request to answer, or a job's run (claim to outcome)."""
    queued_seconds: float | None = None
    """A job's wait in the durable queue before it was claimed (jobs only)."""
    served_by: Mapping[str, int] = field(default_factory=dict)
    """``{pool account: images}`` of a success (``engine.served``)."""
    account: str | None = None
    """The one pool account a failure names (``details.account``)."""


class OutcomeObserver(Protocol):
    """Told every finished image operation, on the event loop; must not block or raise."""

    def image_outcome(self, outcome: ImageOutcome) -> None: ...


def success_outcome(
    route: str,
    response: ImageResponse,
    *,
    key: str | None,
    seconds: float,
    queued_seconds: float | None = None,
) -> ImageOutcome:
    """The outcome of a response (its ``requested.n`` against the images it holds)."""
    delivered = len(response.data)
    return ImageOutcome(
        route=route,
        provider=response.provider,
        model=response.model,
        key=key,
        requested=max(response.requested.n, delivered),
        delivered=delivered,
        code=None,
        seconds=seconds,
        queued_seconds=queued_seconds,
        served_by=served_by(response),
    )


def failure_outcome(
    route: str,
    error: BridgeError,
    request: ImageRequest | None,
    *,
    provider: str,
    key: str | None,
    seconds: float,
    queued_seconds: float | None = None,
) -> ImageOutcome:
    """The outcome of a failure: every image asked for is failed, or unknown when the
    upstream call may have run. ``request`` is ``None`` when it could not be read."""
    account = error.details.get("account")
    return ImageOutcome(
        route=route,
        provider=error.provider or provider,
        model=request.routing.model if request is not None else None,
        key=key,
        requested=request.parameters.n if request is not None else 0,
        delivered=0,
        code=error.code.value,
        unknown=error.outcome_unknown,
        seconds=seconds,
        queued_seconds=queued_seconds,
        account=account if isinstance(account, str) else None,
    )


def image_shares(outcome: ImageOutcome) -> list[tuple[str | None, str, int]]:
    """``(account, outcome, images)`` rows adding up to ``outcome.requested``.

    ``outcome`` is ``delivered``, ``failed`` or ``unknown``. Delivered images are put on
    the accounts that served them, in order; the rest (and delivered images no account is
    known for) on the failure's account, or ``None`` when none is known.
    """
    rows: list[tuple[str | None, str, int]] = []
    left = outcome.delivered
    for account, count in outcome.served_by.items():
        take = min(max(0, count), left)
        if take:
            rows.append((account, "delivered", take))
            left -= take
    if left:
        rows.append((outcome.account, "delivered", left))
    missing = outcome.requested - outcome.delivered
    if missing > 0:
        rows.append((outcome.account, "unknown" if outcome.unknown else "failed", missing))
    return rows


class _KeyLookup(Protocol):
    async def get(self, key_id: str) -> KeyRecord: ...


async def report_job_run(
    observer: OutcomeObserver,
    record: JobRecord,
    request: ImageRequest,
    result: ImageResponse | BridgeError,
    *,
    key: str | None,
    keys: _KeyLookup | None,
    default_provider: str,
    seconds: float,
) -> None:
    """Report one job run (``route="jobs"``) with its wait in the queue.

    ``key`` is the name of the key the run reserved on; a key's job refused before
    reserving (its quota, its provider allow-list) is named by one lookup in ``keys``.
    """
    key_id = key_id_of_scope(record.auth_scope)
    if key is None and key_id is not None and keys is not None:
        with contextlib.suppress(BridgeError):
            key = (await keys.get(key_id)).name
    queued = None if record.started_at is None else record.started_at - record.created_at
    if isinstance(result, ImageResponse):
        outcome = success_outcome("jobs", result, key=key, seconds=seconds, queued_seconds=queued)
    else:
        outcome = failure_outcome(
            "jobs",
            result,
            request,
            provider=request.routing.provider or default_provider,
            key=key,
            seconds=seconds,
            queued_seconds=queued,
        )
    observer.image_outcome(outcome)
