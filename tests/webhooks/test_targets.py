"""The address rules for receivers: refused at creation and again before every attempt.

Every test here runs under ``no_external_network`` (and, in scripts/check, in a
loopback-only namespace): a refusal that failed would hit the guard, never a real host.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.webhooks.targets import TargetPolicy, parse_target, resolve_target

pytestmark = pytest.mark.usefixtures("no_external_network")

DNS = {
    "private.example": ["10.1.2.3"],
    "mixed.example": ["93.184.216.34", "192.168.1.5"],
    "metadata.example": ["169.254.169.254"],
    "public.example": ["93.184.216.34"],
}
POLICY = TargetPolicy(allowed_ports=frozenset({80, 443, 8080}))


async def resolver(host: str, port: int) -> Sequence[str]:
    if host in DNS:
        return DNS[host]
    if host.isdigit():
        return [str(ipaddress.IPv4Address(int(host)))]
    raise OSError("no such name")


async def refusal(url: str, policy: TargetPolicy = POLICY) -> str:
    with pytest.raises(BridgeError) as caught:
        await resolve_target(parse_target(url, policy), policy, resolver)
    error = caught.value
    assert error.code is ErrorCode.INVALID_REQUEST and error.field == "url"
    assert "://" not in str(error.to_dict())  # the URL never appears in an error
    return str(error.details["reason"])


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://[::1]/hook",
        "https://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/hook",
        "http://2130706433/hook",  # 127.0.0.1 as an integer
        "https://private.example/hook",
        "https://mixed.example/hook",
        "https://metadata.example/hook",
        "http://[fe80::1]/hook",
        "http://[64:ff9b::a9fe:a9fe]/hook",  # NAT64 of the metadata address
        "http://100.64.0.1/hook",  # CGNAT
    ],
)
async def test_private_and_reserved_targets_are_refused(url: str) -> None:
    assert await refusal(url) == "webhook_target_private"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://public.example/hook", "webhook_target_invalid"),
        ("https://user:pw@public.example/hook", "webhook_target_invalid"),
        ("https:///hook", "webhook_target_invalid"),
        ("not a url", "webhook_target_invalid"),
        ("https://public.example:22/hook", "webhook_target_port"),
        ("https://nowhere.example/hook", "webhook_target_unresolvable"),
        ("https://" + "a" * 3000 + ".example/", "webhook_target_invalid"),
    ],
)
async def test_malformed_targets_have_stable_reasons(url: str, reason: str) -> None:
    assert await refusal(url) == reason


async def test_public_targets_pass_and_private_ones_only_when_allowed() -> None:
    target = await resolve_target(
        parse_target("https://public.example/hook", POLICY), POLICY, resolver
    )
    assert (target.host, target.port) == ("public.example", 443)
    assert [str(a) for a in target.addresses] == ["93.184.216.34"]
    allowed = TargetPolicy(allow_private_networks=True, allowed_ports=frozenset({8080}))
    local = await resolve_target(
        parse_target("http://127.0.0.1:8080/x", allowed), allowed, resolver
    )
    assert [str(a) for a in local.addresses] == ["127.0.0.1"]
