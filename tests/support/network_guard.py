"""``no_external_network``: a pytest fixture that fails the test on any off-host traffic.

Use it in every test that checks refusal of private or link-local addresses, so that a
bug in the code under test cannot reach a real host (for example the cloud metadata
service at 169.254.169.254) while the test is running::

    from tests.support.network_guard import no_external_network  # re-export in conftest

    @pytest.mark.usefixtures("no_external_network")
    async def test_refuses_metadata_service(): ...

What it patches, for the duration of one test:

* ``socket.socket.connect`` / ``connect_ex`` (asyncio's ``sock_connect`` and
  ``create_connection``, anyio and httpx all end there) and ``sendto``/``sendmsg``:
  only loopback (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) and Unix sockets pass;
* ``socket.getaddrinfo`` (used by ``loop.getaddrinfo``): only IP literals and
  ``localhost`` are resolved, so no DNS query leaves the machine.

A blocked attempt raises ``ConnectionRefusedError`` / ``socket.gaierror`` inside the
code (so it fails the way an unreachable network would) and is recorded; the test then
fails at teardown, even if the code swallowed the error. A test that provokes a
violation on purpose inspects ``guard.violations`` and clears it.

The fixture complements, not replaces, running the suite under
``scripts/loopback-only``, which ``scripts/check`` does where it can create a network namespace.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["NetworkGuard", "is_loopback_destination", "no_external_network"]


@dataclass
class NetworkGuard:
    """What the guard refused during the test (``kind``, destination) pairs."""

    violations: list[tuple[str, str]] = field(default_factory=list)

    def refuse(self, kind: str, destination: object) -> None:
        self.violations.append((kind, repr(destination)))


def _loopback_host(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def is_loopback_destination(family: int, address: object) -> bool:
    """Whether a ``connect``/``sendto`` destination stays on this host."""
    if family == getattr(socket, "AF_UNIX", object()):
        return True
    if isinstance(address, tuple) and address:
        return _loopback_host(address[0])
    return False


def _is_ip_literal(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


@pytest.fixture
def no_external_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """Fail the test if anything tries to reach a non-loopback address or resolve a name."""
    guard = NetworkGuard()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_sendto = socket.socket.sendto
    real_sendmsg = socket.socket.sendmsg
    real_getaddrinfo = socket.getaddrinfo

    def refused(kind: str, destination: object) -> ConnectionRefusedError:
        guard.refuse(kind, destination)
        return ConnectionRefusedError(
            errno.ECONNREFUSED, f"no_external_network refused {kind} to {destination!r}"
        )

    def connect(self: socket.socket, address: Any) -> None:
        if not is_loopback_destination(self.family, address):
            raise refused("connect", address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not is_loopback_destination(self.family, address):
            guard.refuse("connect_ex", address)
            return errno.ECONNREFUSED
        return real_connect_ex(self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> int:
        address = args[-1]
        if not is_loopback_destination(self.family, address):
            raise refused("sendto", address)
        return real_sendto(self, data, *args)

    def sendmsg(self: socket.socket, buffers: Any, *args: Any) -> int:
        if len(args) >= 3 and args[2] is not None:
            address = args[2]
            if not is_loopback_destination(self.family, address):
                raise refused("sendmsg", address)
        return real_sendmsg(self, buffers, *args)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if (
            host is not None
            and not _is_ip_literal(host)
            and host not in ("localhost", b"localhost")
        ):
            guard.refuse("getaddrinfo", host)
            raise socket.gaierror(socket.EAI_NONAME, "no_external_network refused DNS lookup")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket.socket, "sendto", sendto)
    monkeypatch.setattr(socket.socket, "sendmsg", sendmsg)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield guard
    if guard.violations:
        pytest.fail(f"test attempted off-host network access: {guard.violations}")
