"""Plan-gated carrier models: a refused carrier moves to the next one, once.

The mock backend refuses the models in ``refused_models`` with the real backend's 400
``{"detail": "The 'gpt-5.5' model is not supported when using Codex with a ChatGPT
account."}``; everything runs through the real application over HTTP.
"""

from __future__ import annotations

from typing import Any

from imagebridge.contract.errors import ErrorCode
from imagebridge.providers.codex.auth import CodexCredentials
from imagebridge.providers.codex.carriers import CarrierMemory, login_key
from tests.support.codex_backend import BRIDGE_ACCOUNT, BRIDGE_TOKEN, CodexBridge


def carriers_sent(bridge: CodexBridge) -> list[str]:
    return [request.body["model"] for request in bridge.backend.requests_for("responses")]


async def test_a_refused_default_carrier_falls_to_the_next_and_is_remembered(
    codex_bridge: CodexBridge,
) -> None:
    backend = codex_bridge.backend
    backend.refused_models = {"gpt-5.5"}

    first = await codex_bridge.run()

    assert carriers_sent(codex_bridge) == ["gpt-5.5", "gpt-5.4-mini"]
    assert len(first.data) == 1
    assert "responses_model_fallback_used" in first.warnings
    wire = first.to_wire()
    assert [(a["model"], a["outcome"]) for a in wire["attempts"]] == [
        ("gpt-5.5", "failed"),
        ("gpt-image-2", "succeeded"),
    ]
    assert wire["attempts"][0]["error_code"] == "upstream"

    backend.reset()
    backend.refused_models = {"gpt-5.5"}
    second = await codex_bridge.run()

    assert carriers_sent(codex_bridge) == ["gpt-5.4-mini"]  # one upstream call
    assert "attempts" not in second.to_wire()
    assert "responses_model_fallback_used" not in second.warnings


async def test_the_remembered_carrier_is_shown_in_diagnostics(codex_bridge: CodexBridge) -> None:
    provider = codex_bridge.provider()
    before = (await provider.diagnostics())["carrier"]
    assert before == {
        "order": ["gpt-5.5", "gpt-5.4-mini", "gpt-5.4"],
        "current_login": None,
        "remembered_logins": 0,
    }
    codex_bridge.backend.refused_models = {"gpt-5.5", "gpt-5.4-mini"}

    await codex_bridge.run()

    after = (await provider.diagnostics())["carrier"]
    assert after["current_login"] == "gpt-5.4" and after["remembered_logins"] == 1
    assert BRIDGE_ACCOUNT not in str(after) and BRIDGE_TOKEN not in str(after)


async def test_fan_out_siblings_report_each_refusal_once(codex_bridge_factory: Any) -> None:
    bridge = await codex_bridge_factory("providers.codex_responses.max_parallel_outputs=1")
    bridge.backend.refused_models = {"gpt-5.5"}

    response = await bridge.run(parameters={"n": 3})

    assert carriers_sent(bridge) == ["gpt-5.5", "gpt-5.4-mini", "gpt-5.4-mini", "gpt-5.4-mini"]
    assert len(response.data) == 3
    failed = [a for a in response.attempts if a.outcome.value == "failed"]
    assert [a.model for a in failed] == ["gpt-5.5"]


async def test_every_carrier_refused_is_a_plain_error_naming_them(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.refused_models = {"gpt-5.5", "gpt-5.4-mini", "gpt-5.4"}

    error = await codex_bridge.fail()

    assert carriers_sent(codex_bridge) == ["gpt-5.5", "gpt-5.4-mini", "gpt-5.4"]
    assert error.code is ErrorCode.UPSTREAM and error.retryable is False
    assert error.details["http_status"] == 400
    assert error.details["carrier_models_refused"] == ["gpt-5.5", "gpt-5.4-mini", "gpt-5.4"]
    assert error.details["provider_attempts"] == 3
    assert "gpt-5.4" in error.details["upstream_message"]
    assert any("responses_model_fallbacks" in s for s in error.suggestions)


async def test_no_fallbacks_configured_means_one_call(codex_bridge_factory: Any) -> None:
    bridge = await codex_bridge_factory("providers.codex_responses.responses_model_fallbacks=[]")
    bridge.backend.refused_models = {"gpt-5.5"}

    error = await bridge.fail()

    assert carriers_sent(bridge) == ["gpt-5.5"]
    assert error.details["upstream_message"] == (
        "The 'gpt-5.5' model is not supported when using Codex with a ChatGPT account."
    )


async def test_another_400_is_not_a_carrier_refusal(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.script("http_400")

    error = await codex_bridge.fail()

    assert carriers_sent(codex_bridge) == ["gpt-5.5"]
    assert error.details["http_status"] == 400
    assert "carrier_models_refused" not in error.details


async def test_a_configured_carrier_comes_first(codex_bridge_factory: Any) -> None:
    bridge = await codex_bridge_factory('providers.codex_responses.responses_model="gpt-5.4"')

    await bridge.run()

    assert carriers_sent(bridge) == ["gpt-5.4"]
    assert bridge.provider().carriers.order == ("gpt-5.4", "gpt-5.4-mini")


def test_memory_is_per_login_and_bounded() -> None:
    memory = CarrierMemory(["a", "b", "a", ""], max_logins=2)
    assert memory.order == ("a", "b")
    one = login_key(CodexCredentials(access_token="t1", account_id="acct-1"))
    two = login_key(CodexCredentials(access_token="t2", account_id="acct-2"))
    three = login_key(CodexCredentials(access_token="t3"))
    assert one != two and "acct-1" not in one
    memory.accept(one, 1)
    assert (memory.start(one), memory.start(two)) == (1, 0)
    memory.accept(two, 0)
    memory.accept(three, 1)
    assert memory.start(one) == 0  # the oldest login was forgotten
    assert memory.snapshot(three) == {
        "order": ["a", "b"],
        "current_login": "b",
        "remembered_logins": 2,
    }
