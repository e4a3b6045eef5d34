"""Stream objects: early exit, context managers and the public names of the package."""

from __future__ import annotations

import time

import imagebridge.client as sdk
from imagebridge.client import StartedEvent
from tests.client.conftest import Client, resolve


async def test_leaving_a_stream_early_releases_it_at_once(api: Client) -> None:
    # An upper bound on time says "not the long wait", so it sits halfway to that wait (a
    # generation of 60 s), never near the expected moment, which a busy machine stretches.
    stream = await resolve(api.images.stream("[mock:latency=60000] slow fox"))
    started = time.monotonic()
    if hasattr(stream, "__aenter__"):
        async with stream:
            first = await stream.__anext__()
    else:
        with stream:
            first = next(stream)
    assert isinstance(first, StartedEvent)
    assert time.monotonic() - started < 30
    # The client is still usable afterwards.
    assert await resolve(api.health.live()) is True


def test_public_names_are_exactly_the_documented_ones() -> None:
    public = sorted(name for name in vars(sdk) if not name.startswith("_"))
    modules = {"resources"}
    assert sorted(set(public) - modules) == sorted(sdk.__all__)
