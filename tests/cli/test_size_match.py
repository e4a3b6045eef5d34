"""Size-match rates in the CLI: ``providers capabilities --size-match`` and ``doctor``,
read from a running bridge (where they are measured)."""

from __future__ import annotations

from typing import Any

import httpx

from imagebridge.cli.size_match import size_match_check
from tests.cli.conftest import Cli
from tests.cli.servers import bridge


def test_a_running_bridge_shows_its_rates(cli: Cli) -> None:
    with bridge(cli.root / "server-data") as url:
        generated = httpx.post(
            f"{url}/v1/images",
            json={"operation": "generate", "prompt": "a fox", "parameters": {"size": "64x48"}},
            timeout=30,
        )
        assert generated.status_code == 200, generated.text
        caps = cli("--json", "--remote", url, "providers", "capabilities",
                   "--provider", "mock", "--size-match")  # fmt: skip
        plain = cli("--json", "--remote", url, "providers", "capabilities", "--provider", "mock")
        doctor = cli("--json", "--remote", url, "doctor")
    assert caps.code == 0, caps.stderr
    body = caps.json()
    assert body["capabilities"]["provider"] == "mock"
    [model] = body["size_match"]
    assert body["size_match"][model] == {"1k": {"calls": 1, "matched": 1, "rate": 1.0}}
    assert "size_match" not in plain.json()  # the document itself is the original's
    checks = {check["name"]: check for check in doctor.json()["checks"]}
    assert checks["size_match"]["status"] == "pass"
    assert checks["size_match"]["details"]["mock"][model]["1k"]["calls"] == 1


def test_doctor_without_a_bridge_says_where_rates_live(cli: Cli) -> None:
    cli.write("imagegen-bridge.toml", "version = 1\n")
    result = cli("--json", "doctor")
    checks = {check["name"]: check for check in result.json()["checks"]}
    assert checks["size_match"]["status"] == "skip"
    assert "--remote" in checks["size_match"]["message"]


def rates(**providers: Any) -> dict[str, Any]:
    return {"runtime": {"size_match": providers}}


def test_the_check_warns_about_the_transport_that_misses_sizes() -> None:
    body = rates(
        a={"m": {"2k": {"calls": 4, "matched": 4, "rate": 1.0}}},
        b={"m": {"2k": {"calls": 5, "matched": 1, "rate": 0.2}}},
    )
    status, message, _ = size_match_check(body)
    assert status == "warn" and message == "b (m, 2k) delivered the size asked in 1 of 5 calls"
    assert size_match_check(rates())[0] == "skip"
    assert size_match_check({})[0] == "skip"
