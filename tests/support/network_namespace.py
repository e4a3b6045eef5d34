"""``own_network_namespace()``: run a stretch of a test in a network namespace of its own.

Chromium watches the machine's interfaces (netlink) and, whenever an address comes or goes,
drops every connection it has open with ``net::ERR_NETWORK_CHANGED``. The container tier, in
another pytest worker at the same time, makes docker and podman add a bridge and a veth
pair per container: a browser test beside it saw its requests fail at random (stop 45's CI:
a gallery page load failed). Inside a namespace of its own, whose only interface is
loopback, nothing the rest of the machine does to its interfaces reaches the browser.

The namespace belongs to the calling thread (Linux namespaces are per task): servers,
Playwright's driver and Chromium started from it afterwards live there too, and reach each
other on 127.0.0.1. On leaving, the thread goes back to the namespace it came from.
Creating one needs CAP_SYS_ADMIN (root here and in CI); without it the stretch runs where
it is, as before, and :attr:`NetworkNamespace.isolated` says so.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["NetworkNamespace", "own_network_namespace"]

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


@dataclass(frozen=True)
class NetworkNamespace:
    isolated: bool
    """True when the thread runs in a namespace of its own."""
    outside: str
    """A path naming the namespace the thread came from (for ``nsenter --net=``)."""
    reason: str = ""
    """Why the thread could not get a namespace of its own, when it could not."""


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP))


@contextmanager
def own_network_namespace() -> Iterator[NetworkNamespace]:
    """The calling thread in a new loopback-only network namespace until the block ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    outside = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    outside_path = f"/proc/{os.getpid()}/fd/{outside}"
    try:
        if libc.unshare(_CLONE_NEWNET) != 0:
            reason = os.strerror(ctypes.get_errno())
            yield NetworkNamespace(isolated=False, outside=outside_path, reason=reason)
            return
        try:
            _loopback_up()
            yield NetworkNamespace(isolated=True, outside=outside_path)
        finally:
            if libc.setns(outside, _CLONE_NEWNET) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"could not go back to the network namespace: {error}")
    finally:
        os.close(outside)
