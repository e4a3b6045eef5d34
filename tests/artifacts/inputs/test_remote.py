from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Sequence
from typing import Any

import pytest

from imagebridge.artifacts.inputs.remote import (
    IPAddress,
    RemoteFetchPolicy,
    RemoteImageFetcher,
    is_public_address,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from tests.artifacts.http_server import Route, local_server
from tests.artifacts.images import png
from tests.support.network_guard import NetworkGuard

pytestmark = pytest.mark.usefixtures("no_external_network")

PRIVATE_URLS = [
    "http://127.0.0.1/image.png",
    "http://[::1]/image.png",
    "http://10.0.0.1/image.png",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:127.0.0.1]/image.png",
    "http://[::ffff:169.254.169.254]/image.png",
    "http://0.0.0.0/image.png",
    "http://2130706433/image.png",  # 127.0.0.1 spelled as an integer
    "http://private.example/image.png",  # resolves to 10.1.2.3
    "http://mixed.example/image.png",  # one public and one private answer
    "http://[fec0::1]/image.png",
    "http://[64:ff9b::a9fe:a9fe]/image.png",  # NAT64 of 169.254.169.254
    "http://[2002:a00:1::1]/image.png",  # 6to4 of 10.0.0.1
]

FAKE_DNS = {
    "private.example": ["10.1.2.3"],
    "mixed.example": ["93.184.216.34", "192.168.1.5"],
    "images.test": ["127.0.0.1"],
}


class FakeResolver:
    """Answers from FAKE_DNS; IP literals resolve to themselves like getaddrinfo."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls.append(host)
        if host in FAKE_DNS:
            return FAKE_DNS[host]
        if host.isdigit():
            return [str(ipaddress.IPv4Address(int(host)))]
        return [str(ipaddress.ip_address(host))]


class FirstHopLoopback(RemoteImageFetcher):
    """Lets the first request reach the 127.0.0.1 test server; every later hop is judged
    by the real policy."""

    def _address_permitted(self, address: IPAddress, hop: int) -> bool:
        if hop == 0 and address == ipaddress.IPv4Address("127.0.0.1"):
            return True
        return super()._address_permitted(address, hop)


def fetcher(
    cls: type[RemoteImageFetcher] = RemoteImageFetcher, /, **policy: Any
) -> RemoteImageFetcher:
    options: dict[str, object] = {"enabled": True}
    options.update(policy)
    return cls(RemoteFetchPolicy(**options), resolver=FakeResolver())  # type: ignore[arg-type]


async def refused(remote: RemoteImageFetcher, url: str) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        await remote.fetch(url)
    assert caught.value.code is ErrorCode.INPUT
    return caught.value


async def test_disabled_policy_refuses_everything() -> None:
    remote = RemoteImageFetcher(RemoteFetchPolicy())
    error = await refused(remote, "https://example.com/a.png")
    assert error.message == "remote image inputs are disabled"


async def test_blocks_loopback_by_default() -> None:
    error = await refused(fetcher(), "http://127.0.0.1/image.png")
    assert "private or reserved" in error.message


@pytest.mark.parametrize("url", PRIVATE_URLS)
async def test_private_and_reserved_destinations_are_refused(url: str) -> None:
    error = await refused(fetcher(), url)
    assert error.message == "remote image hostname resolves to a private or reserved address"
    assert "://" not in str(error.to_dict())  # the URL itself never appears in the error


async def test_system_resolver_runs_off_the_loop_and_refuses_literals() -> None:
    remote = RemoteImageFetcher(RemoteFetchPolicy(enabled=True))  # real loop.getaddrinfo
    for url in ("http://127.0.0.1/x", "http://[::1]/x", "http://169.254.169.254/x"):
        assert "private or reserved" in (await refused(remote, url)).message


async def test_fetches_bounded_image_when_private_network_is_explicitly_allowed() -> None:
    body = png(2, 3)
    async with local_server() as server:
        server.routes["/image.png"] = Route(headers={"Content-Type": "image/png"}, body=body)
        remote = fetcher(allowed_ports={server.port}, allow_private_networks=True)
        image = await remote.fetch(f"{server.origin}/image.png")
    assert image.data == body
    assert (image.info.width, image.info.height) == (2, 3)
    headers = server.seen[0].headers
    assert headers["host"] == f"127.0.0.1:{server.port}"
    assert headers["user-agent"].startswith("imagegen-bridge/")
    assert headers["accept"] == "image/png,image/jpeg,image/webp;q=0.9"
    assert headers["accept-encoding"] == "identity"


async def test_connection_is_pinned_to_the_checked_address() -> None:
    async with local_server() as server:
        server.routes["/a.png"] = Route(body=png(1, 1))
        resolver = FakeResolver()
        remote = RemoteImageFetcher(
            RemoteFetchPolicy(
                enabled=True, allowed_ports=frozenset({server.port}), allow_private_networks=True
            ),
            resolver=resolver,
        )
        await remote.fetch(f"http://images.test:{server.port}/a.png")
    assert resolver.calls == ["images.test"]  # resolved once, then connected by address
    assert server.seen[0].headers["host"] == f"images.test:{server.port}"


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/image.png",
        "http://[::1]:{port}/image.png",
        "http://10.0.0.1/image.png",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]:{port}/image.png",
        "http://private.example/image.png",
        "/image.png",  # a relative redirect back to the loopback server itself
    ],
)
async def test_redirects_to_private_destinations_are_refused(target: str) -> None:
    async with local_server() as server:
        location = target.format(port=server.port)
        server.routes["/start"] = Route(status=302, headers={"Location": location})
        server.routes["/image.png"] = Route(body=png(1, 1))
        remote = fetcher(FirstHopLoopback, allowed_ports={server.port, 80})
        error = await refused(remote, f"{server.origin}/start")
    assert error.message == "remote image hostname resolves to a private or reserved address"
    assert [seen.path for seen in server.seen] == ["/start"]


async def test_redirects_are_followed_and_bounded() -> None:
    async with local_server() as server:
        for hop in range(4):
            server.routes[f"/{hop}"] = Route(status=307, headers={"Location": f"/{hop + 1}"})
        server.routes["/4"] = Route(body=png(1, 1))
        server.routes["/2-final"] = Route(status=301, headers={"Location": "/4"})
        allowed = {"allowed_ports": {server.port}, "allow_private_networks": True}
        image = await fetcher(**allowed).fetch(f"{server.origin}/2")  # 2 → 3 → 4
        assert image.info.width == 1
        error = await refused(fetcher(**allowed), f"{server.origin}/0")  # four redirects
        assert error.message == "remote image redirect limit exceeded"
        no_redirects = fetcher(max_redirects=0, **allowed)
        assert "redirect limit" in (await refused(no_redirects, f"{server.origin}/3")).message


@pytest.mark.parametrize(
    ("route", "message"),
    [
        (Route(status=404), "remote image returned HTTP 404"),
        (Route(status=300, headers={"Location": "/x"}), "remote image returned HTTP 300"),
        (Route(status=302), "redirect response has no location"),
        (
            Route(headers={"Content-Type": "text/html"}, body=png(1, 1)),
            "remote response does not declare a supported image content type",
        ),
        (
            Route(headers={"Content-Encoding": "gzip"}, body=png(1, 1)),
            "remote image uses an unsupported content encoding",
        ),
        (
            Route(headers={"Content-Length": str(10**9)}, body=b""),
            "remote image content length exceeds the configured limit",
        ),
        (Route(body=b"x" * 5000, chunked=True), "remote image exceeds the configured byte limit"),
        (Route(body=png(2, 2)[:-10]), "image payload is malformed or incomplete"),
        (Route(body=b"GIF89a" + b"\0" * 20), "input image format is not enabled"),
    ],
)
async def test_bad_responses_are_refused(route: Route, message: str) -> None:
    async with local_server() as server:
        server.routes["/x"] = route
        remote = fetcher(allowed_ports={server.port}, allow_private_networks=True, max_bytes=4096)
        error = await refused(remote, f"{server.origin}/x")
    assert error.message == message


async def test_each_hop_has_a_deadline() -> None:
    async with local_server() as server:
        server.routes["/slow"] = Route(stall=True)
        remote = fetcher(allowed_ports={server.port}, allow_private_networks=True, timeout_ms=200)
        error = await refused(remote, f"{server.origin}/slow")
    assert error.message == "remote image request timed out"


@pytest.mark.parametrize(
    ("url", "policy", "message"),
    [
        ("ftp://example.com/a.png", {}, "remote image URL must use http or https"),
        ("http://user:pw@example.com/a.png", {}, "remote image URL must not contain credentials"),
        ("http://example.com:8080/a.png", {}, "remote image port is not allowed"),
        (
            "http://other.example/a.png",
            {"allowed_hosts": {"images.example"}},
            "remote image hostname is not allowed",
        ),
        ("http://example.com/" + "a" * 9000, {}, "remote image URL exceeds the configured limit"),
        ("http://[not-an-ip/", {}, "remote image URL is invalid"),
        ("http:///a.png", {}, "remote image URL has no hostname"),
    ],
)
async def test_url_checks_happen_before_any_lookup(
    url: str, policy: dict[str, object], message: str
) -> None:
    remote = fetcher(**policy)
    assert (await refused(remote, url)).message == message


def test_policy_is_validated() -> None:
    with pytest.raises(BridgeError) as caught:
        RemoteFetchPolicy(enabled=True, allowed_ports=frozenset())
    assert caught.value.code is ErrorCode.CONFIGURATION
    with pytest.raises(BridgeError):
        RemoteFetchPolicy(max_redirects=11)


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "127.0.0.1",
        "169.254.1.1",
        "100.64.0.1",
        "192.0.2.1",
        "198.18.0.1",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "0.0.0.0",
        "0.1.2.3",
        "172.16.0.1",
        "192.168.0.1",
        "192.0.0.8",
        "198.51.100.7",
        "203.0.113.9",
        "::1",
        "::",
        "fc00::1",
        "fd12::1",
        "fe80::1",
        "fec0::1",
        "ff02::1",
        "2001:db8::1",
        "::ffff:10.0.0.1",
        "::ffff:127.0.0.1",
        "::7f00:1",
        "64:ff9b::a00:1",
        "64:ff9b:1::1",
        "2002:7f00:1::1",
        "2002:a9fe:a9fe::1",
        "2001:2::1",
        "2001:10::1",
        "3fff::1",
        "100::1",
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    ],
)
def test_reserved_ranges_are_not_public(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "93.184.216.34",
        "1.1.1.1",
        "2606:4700:4700::1111",
        "2a00:1450::1",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo, client 8.8.8.8
    ],
)
def test_public_addresses_are_public(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))


async def test_the_network_guard_itself_blocks_off_host_connections(
    no_external_network: NetworkGuard,
) -> None:
    with pytest.raises(ConnectionRefusedError, match="no_external_network refused connect"):
        await asyncio.open_connection("10.0.0.1", 80)
    assert no_external_network.violations == [("connect", "('10.0.0.1', 80)")]
    no_external_network.violations.clear()
