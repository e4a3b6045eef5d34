"""The provider interface's helpers."""

from __future__ import annotations

from typing import Any

from imagebridge.engine.provider import diagnostics_owner


class Transport:
    async def diagnostics(self) -> dict[str, Any]:
        return {"quota": {"status": "available"}}


class Decorator:
    def __init__(self, inner: object) -> None:
        self.inner = inner


def test_the_hook_is_found_on_the_transport_behind_decorators() -> None:
    transport = Transport()
    assert diagnostics_owner(Decorator(Decorator(transport))) is transport
    assert diagnostics_owner(transport) is transport


def test_a_chain_without_a_hook_has_no_owner() -> None:
    assert diagnostics_owner(Decorator(Decorator(object()))) is None
    assert diagnostics_owner(object()) is None


def test_a_cyclic_chain_ends_after_a_bounded_walk() -> None:
    loop = Decorator(None)
    loop.inner = loop
    assert diagnostics_owner(loop) is None


def test_a_hook_deeper_than_the_bound_is_not_searched_for() -> None:
    chain: object = Transport()
    for _ in range(8):
        chain = Decorator(chain)
    assert diagnostics_owner(chain) is None
