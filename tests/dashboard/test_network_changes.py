"""The browser tests' Chromium does not see the machine's interfaces come and go.

Docker and podman (the container tier, in another worker) add a bridge and a veth pair per
container; Chromium drops every open request when an address changes
(``net::ERR_NETWORK_CHANGED``). Here a veth pair with an address comes and goes outside
the module's network namespace, as docker's do, while the page loads its gallery again and
again: nothing may fail.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import BridgeFactory, OpenPage, create_job, wait_terminal
from tests.server.conftest import LiveServer
from tests.support.network_namespace import NetworkNamespace

pytestmark = pytest.mark.browser

# One cycle: a veth pair appears with an address, lives 0.3 s, goes; printed when gone.
CHURN = """
set -e
trap 'ip link del "$1" 2>/dev/null || true' EXIT
trap 'exit 0' TERM INT
while :; do
    ip link add "$1" type veth peer name "$2"
    ip addr add 198.18.0.1/30 dev "$1"
    ip link set "$1" up
    ip link set "$2" up
    sleep 0.3
    ip link del "$1"
    echo cycle
    sleep 0.2
done
"""
RELOADS = 4
IMAGES = 6


@pytest.fixture(scope="module")
def server(bridge: BridgeFactory) -> LiveServer:
    live = bridge()
    for index in range(IMAGES // 2):
        job_id = create_job(live, f"a lighthouse in a gale, take {index}", n=2)
        assert wait_terminal(live, job_id)["status"] == "succeeded"
    return live


@pytest.fixture
def churn(own_network: NetworkNamespace) -> Iterator[subprocess.Popen[str]]:
    """Interfaces coming and going outside this module's namespace until the test ends."""
    if not own_network.isolated:
        pytest.skip(
            "creating a network namespace needs CAP_SYS_ADMIN (root): "
            f"{own_network.reason or 'not available'}"
        )
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        pytest.skip("iproute2's ip and util-linux's nsenter are not installed")
    suffix = os.getpid() % 100_000
    names = [f"ibchurn{suffix}a", f"ibchurn{suffix}b"]
    process = subprocess.Popen(
        ["nsenter", f"--net={own_network.outside}", "sh", "-c", CHURN, "churn", *names],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    yield process
    process.terminate()
    process.wait(timeout=10)


def test_interfaces_changing_outside_do_not_fail_the_pages_requests(
    server: LiveServer, open_page: OpenPage, churn: subprocess.Popen[str]
) -> None:
    assert [name for _, name in socket.if_nameindex()] == ["lo"]
    started = time.monotonic()
    dashboard = open_page(server)
    page = dashboard.page
    for _ in range(RELOADS):
        tiles = page.locator(".tile")
        expect(tiles).to_have_count(IMAGES)
        for index in range(IMAGES):
            image = tiles.nth(index).locator(".tile-image")
            expect(image).to_have_attribute("src", re.compile(r"^blob:"))
        page.wait_for_timeout(500)
        page.reload()
        page.wait_for_selector("#connection[data-state='online']")
    elapsed = time.monotonic() - started
    churn.terminate()
    out, err = churn.communicate(timeout=10)
    cycles = out.count("cycle")
    # The churn really ran beside the page: at least one change every two seconds.
    assert cycles >= max(2, int(elapsed / 2)), (cycles, elapsed, err)
    dashboard.watch.assert_clean()
