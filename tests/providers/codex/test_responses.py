"""``codex-responses`` through the whole engine, against the loopback Codex backend mock."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import time
from typing import Any

import httpx
import pytest
from PIL import Image

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent
from imagebridge.contract.response import Usage
from imagebridge.engine.cancellation import CancelToken
from imagebridge.engine.provider import ProviderEventT
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.providers.codex.responses import CodexResponsesOptions, CodexResponsesProvider
from tests.support.codex_backend import (
    BRIDGE_ACCOUNT,
    BRIDGE_TOKEN,
    CodexBridge,
    write_codex_auth,
)
from tests.support.fixture_files import CODEX_ADVANCED_REQUEST
from tests.support.images import png_data_url

ADVANCED_REQUEST = CODEX_ADVANCED_REQUEST


def collecting_sink() -> tuple[list[ProviderEventT], Any]:
    events: list[ProviderEventT] = []

    async def sink(event: ProviderEventT) -> None:
        events.append(event)

    return events, sink


def content_of(body: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = body["input"][0]["content"]
    return parts


# -- success ----------------------------------------------------------------------------------


async def test_one_image_is_verified_and_reported_with_revised_prompt_and_usage(
    codex_bridge: CodexBridge,
) -> None:
    response = await codex_bridge.run("a red fox in snow")

    assert response.provider == "codex-responses"
    assert response.model == "gpt-image-2"
    [image] = response.data
    decoded = Image.open(io.BytesIO(base64.b64decode(image.b64_json or "")))
    assert (decoded.format, decoded.size) == ("PNG", (image.width, image.height))
    assert (image.width, image.height) == (64, 64)
    assert response.revised_prompt == "revised"
    assert response.usage == Usage(input_tokens=2, output_tokens=3, total_tokens=5)
    assert "transient_provider_retry_used" not in response.warnings
    [call] = codex_bridge.backend.requests_for("responses")
    assert call.body["tools"][0]["type"] == "image_generation"
    assert content_of(call.body) == [{"type": "input_text", "text": "a red fox in snow"}]


async def test_headers_are_exactly_the_original_set(codex_bridge: CodexBridge) -> None:
    await codex_bridge.run()

    [call] = codex_bridge.backend.requests_for("responses")
    assert call.sent_token(BRIDGE_TOKEN)
    assert call.sent_account_id(BRIDGE_ACCOUNT)
    assert call.headers["originator"] == "imagegen-bridge"
    assert call.headers["accept"] == "text/event-stream"
    assert call.headers["content-type"] == "application/json"
    for absent in ("session-id", "thread-id", "openai-beta", "x-client-request-id", "cookie"):
        assert absent not in call.headers
    transport = {"host", "accept-encoding", "connection", "content-length"}
    assert set(call.headers) - transport == {
        *("authorization", "chatgpt-account-id", "originator", "accept", "content-type"),
    }  # no User-Agent either: the original sends none, and httpx's default is removed
    assert call.headers["accept-encoding"] == "identity"


async def test_usage_is_an_empty_object_when_the_backend_reports_none(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.report_usage = False

    response = await codex_bridge.run()

    assert response.usage == Usage()
    assert response.to_wire()["usage"] == {}


async def test_advanced_request_body_matches_the_golden_fixture(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.honour_output_format = True
    parameters = {
        "size": "1536x1024",
        "quality": "high",
        "output_format": "webp",
        "background": "opaque",
        "moderation": "low",
        "output_compression": 80,
        "partial_images": 2,
    }

    response = await codex_bridge.run("test", parameters=parameters)

    [call] = codex_bridge.backend.requests_for("responses")
    assert call.body == json.loads(ADVANCED_REQUEST.read_text())
    assert response.data[0].format.value == "webp"
    assert (response.data[0].width, response.data[0].height) == (1536, 1024)


async def test_n3_fans_out_to_three_calls(codex_bridge: CodexBridge) -> None:
    response = await codex_bridge.run(parameters={"n": 3})

    assert [image.index for image in response.data] == [0, 1, 2]
    assert codex_bridge.backend.calls("responses") == 3
    assert "emulated_multi_image_fanout" in response.warnings
    assert response.usage == Usage(input_tokens=6, output_tokens=9, total_tokens=15)


async def test_edit_sends_the_input_image_as_a_data_url(codex_bridge: CodexBridge) -> None:
    source = png_data_url(8, 8, (9, 99, 199))

    response = await codex_bridge.run(
        "make it blue", operation="edit", images=[{"type": "data_url", "data_url": source}]
    )

    assert len(response.data) == 1
    [call] = codex_bridge.backend.requests_for("responses")
    assert content_of(call.body) == [
        {"type": "input_text", "text": "make it blue"},
        {"type": "input_image", "image_url": source, "detail": "auto"},
    ]


async def test_references_are_explained_and_sent_after_the_sources(
    codex_bridge: CodexBridge,
) -> None:
    source, reference = png_data_url(8, 8, (9, 99, 199)), png_data_url(8, 8, (250, 10, 10))

    await codex_bridge.run(
        "blend",
        operation="edit",
        images=[{"type": "data_url", "data_url": source}],
        reference_images=[{"type": "base64", "data": reference.split(",", 1)[1]}],
    )

    [call] = codex_bridge.backend.requests_for("responses")
    text, first, second = content_of(call.body)
    assert text["text"] == (
        "Edit the first 1 attached source image(s) according to the prompt. The following 1 "
        "attached image(s) are visual references only. Prompt: blend"
    )
    assert (first["image_url"], second["image_url"]) == (source, reference)


async def test_a_bad_input_image_fails_before_any_call(codex_bridge: CodexBridge) -> None:
    error = await codex_bridge.fail(
        "x",
        operation="edit",
        images=[{"type": "data_url", "data_url": "data:image/png;base64,bm90IGFuIGltYWdl"}],
    )

    assert error.code is ErrorCode.INPUT
    assert error.details["field"] == "images[0]"
    assert codex_bridge.backend.calls("responses") == 0


async def test_aspect_ratio_and_resolution_are_emulated(codex_bridge: CodexBridge) -> None:
    await codex_bridge.run("wide", parameters={"aspect_ratio": "16:9"})
    await codex_bridge.run("wide", parameters={"aspect_ratio": "16:9", "resolution": "2k"})

    first, second = codex_bridge.backend.requests_for("responses")
    assert first.body["tools"][0]["size"] == "1536x1024"
    assert second.body["tools"][0]["size"] == "2048x1152"
    assert content_of(first.body)[0]["text"] == "wide\n\nAspect ratio: 16:9."


# -- partial images -----------------------------------------------------------------------------


async def test_partial_images_reach_the_event_sink(codex_bridge: CodexBridge) -> None:
    events, sink = collecting_sink()

    await codex_bridge.run(parameters={"partial_images": 2}, context=ExecutionContext(events=sink))

    partials = [event for event in events if isinstance(event, PartialImageEvent)]
    assert [(p.index, p.partial_index) for p in partials] == [(0, 0), (0, 1)]
    assert all(base64.b64decode(p.b64_json).startswith(b"\x89PNG") for p in partials)


async def test_partial_images_of_a_fan_out_carry_their_output_index(
    codex_bridge: CodexBridge,
) -> None:
    events, sink = collecting_sink()

    await codex_bridge.run(
        parameters={"n": 2, "partial_images": 1}, context=ExecutionContext(events=sink)
    )

    partials = [event for event in events if isinstance(event, PartialImageEvent)]
    assert sorted((p.index, p.partial_index) for p in partials) == [(0, 0), (1, 0)]


# -- retries, breaker -------------------------------------------------------------------------


async def test_a_transient_5xx_before_output_is_retried_once(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.script("http_500")

    response = await codex_bridge.run()

    assert codex_bridge.backend.calls("responses") == 2
    assert "transient_provider_retry_used" in response.warnings
    assert len(response.data) == 1


@pytest.mark.parametrize(
    ("provider", "route"),
    [("codex-responses", "responses"), ("codex-images", "images_generations")],
)
async def test_the_configured_backoff_separates_the_attempts(
    codex_bridge_factory: Any, provider: str, route: str
) -> None:
    gaps = []
    for backoff_ms in (300, 1200):
        bridge = await codex_bridge_factory(
            f"providers.codex_responses.transient_retry_backoff_ms={backoff_ms}"
        )
        bridge.backend.reset()
        bridge.backend.script("http_500", route=route)
        response = await bridge.run(routing={"provider": provider})
        assert "transient_provider_retry_used" in response.warnings
        first, second = bridge.backend.requests_for(route)
        gaps.append(second.received_at - first.received_at)
        assert gaps[-1] >= backoff_ms / 1000 - 0.01  # never sooner than configured
    assert gaps[0] < gaps[1]  # the setting, not a constant, decides the wait


async def test_one_attempt_means_no_retry(codex_bridge_factory: Any) -> None:
    bridge = await codex_bridge_factory("providers.codex_responses.max_transient_attempts=1")
    bridge.backend.script("http_503")

    error = await bridge.fail()

    assert error.code is ErrorCode.UPSTREAM
    assert bridge.backend.calls("responses") == 1


async def test_a_retryable_failure_after_a_partial_image_is_not_retried(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.script("failed_after_partial", "failed_after_partial")
    events, sink = collecting_sink()

    error = await codex_bridge.fail(
        parameters={"partial_images": 1}, context=ExecutionContext(events=sink)
    )

    assert error.code is ErrorCode.UPSTREAM
    assert error.details["upstream_code"] == "server_error"
    assert error.retryable is True  # the caller may retry; the bridge did not
    assert codex_bridge.backend.calls("responses") == 1
    assert len([e for e in events if isinstance(e, PartialImageEvent)]) == 1


async def test_quota_429_is_not_retried_and_not_counted_by_the_breaker(
    codex_bridge: CodexBridge,
) -> None:
    runtime = codex_bridge.runtime
    codex_bridge.backend.script("http_429")

    error = await codex_bridge.fail()

    assert error.code is ErrorCode.RATE_LIMITED and error.details["quota_exhausted"] is True
    assert codex_bridge.backend.calls("responses") == 1
    assert runtime.breaker_snapshot()["codex-responses"]["consecutive_failures"] == 0

    codex_bridge.backend.script("http_500", "http_500")
    await codex_bridge.fail()
    assert runtime.breaker_snapshot()["codex-responses"]["consecutive_failures"] == 1


# -- cancellation ----------------------------------------------------------------------------


async def test_cancellation_mid_stream_closes_the_call_as_unknown_outcome(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.script("stall_mid_stream")
    token = CancelToken()

    async def cancel_on_partial(event: ProviderEventT) -> None:
        if isinstance(event, PartialImageEvent):
            token.cancel()

    started = asyncio.get_running_loop().time()
    error = await codex_bridge.fail(
        parameters={"partial_images": 1},
        context=ExecutionContext(cancellation=token, events=cancel_on_partial),
    )

    assert error.code is ErrorCode.CANCELLED
    assert error.http_status == 408
    assert error.retryable is False
    assert error.details["outcome"] == "unknown"
    assert codex_bridge.backend.calls("responses") == 1
    assert asyncio.get_running_loop().time() - started < 5  # not the mock's 30 s stall


# -- transport safety -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "route"),
    [("codex-responses", "responses"), ("codex-images", "images_generations")],
)
async def test_redirects_are_never_followed(
    codex_bridge: CodexBridge, provider: str, route: Any
) -> None:
    codex_bridge.backend.script("redirect", route=route)

    error = await codex_bridge.fail(routing={"provider": provider})

    assert error.code is ErrorCode.UPSTREAM and error.details["http_status"] == 307
    assert [r.path for r in codex_bridge.backend.requests] == [
        codex_bridge.backend.requests_for(route)[0].path
    ]


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://chatgpt.example/backend-api/codex/responses",
        "https://user:pw@chatgpt.com/backend-api/codex/responses",
        "ftp://127.0.0.1/responses",
    ],
)
def test_a_token_is_never_sent_to_an_unsafe_endpoint(endpoint: str) -> None:
    with pytest.raises(BridgeError) as caught:
        CodexResponsesProvider(CodexResponsesOptions(endpoint=endpoint))

    assert caught.value.code is ErrorCode.CONFIGURATION


# -- credentials and readiness ------------------------------------------------------------------


async def test_credentials_are_read_fresh_for_every_call(codex_bridge: CodexBridge) -> None:
    await codex_bridge.run()
    write_codex_auth(codex_bridge.codex_home, access_token="tok-rotated-2", account_id=None)

    await codex_bridge.run()

    first, second = codex_bridge.backend.requests_for("responses")
    assert first.sent_token(BRIDGE_TOKEN)
    assert second.sent_token("tok-rotated-2")
    assert "chatgpt-account-id" not in second.headers


async def test_a_missing_login_fails_without_any_call_and_is_not_ready(
    codex_bridge: CodexBridge,
) -> None:
    (codex_bridge.codex_home / "auth.json").unlink()

    error = await codex_bridge.fail()
    readiness = {r.provider: r for r in await codex_bridge.runtime.registry.readiness(2.0)}

    assert error.code is ErrorCode.AUTHENTICATION and error.http_status == 401
    assert error.provider == "codex-responses"
    assert codex_bridge.backend.requests == []
    assert readiness["codex-responses"].error is not None
    assert readiness["codex-images"].error is not None
    assert readiness["mock"].error is None


async def test_ready_when_the_login_loads(codex_bridge: CodexBridge) -> None:
    readiness = {r.provider: r for r in await codex_bridge.runtime.registry.readiness(2.0)}

    assert readiness["codex-responses"].error is None
    assert codex_bridge.backend.requests == []  # readiness makes no network call


# -- capabilities ---------------------------------------------------------------------------------


async def test_capabilities_follow_the_model(codex_bridge: CodexBridge) -> None:
    registry = codex_bridge.runtime.registry

    default = await registry.capabilities("codex-responses", None)
    small = await registry.capabilities("codex-responses", "gpt-image-1")

    assert default.model == "gpt-image-2"
    assert (default.count.min, default.count.max) == (1, 255)
    assert default.batching.mode.value == "fan_out"
    assert (default.batching.native_count.min, default.batching.native_count.max) == (1, 1)
    assert "3840x2160" in default.sizes.allowed
    assert default.transparent_background.value == "emulated"
    assert [f.value for f in default.input_fidelities] == ["high"]
    assert small.sizes.allowed == ["1024x1024", "1024x1536", "1536x1024"]
    assert small.transparent_background.value == "native"
    assert [f.value for f in small.input_fidelities] == ["low", "high"]
    # issue 32: the bridge composites the edit through the mask (strict still refuses it)
    assert default.masks.support.value == "emulated"
    assert default.masks.max_count == 1
    assert (default.partial_images.min, default.partial_images.max) == (0, 3)
    assert default.reference_images.max_count == 5


async def test_an_unknown_model_is_unsupported(codex_bridge: CodexBridge) -> None:
    with pytest.raises(BridgeError) as caught:
        await codex_bridge.runtime.registry.capabilities("codex-responses", "dall-e-3")

    error = caught.value
    assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY and error.http_status == 400
    assert error.details["supported_models"] == [
        "gpt-image-2",
        "gpt-image-1.5",
        "gpt-image-1",
        "gpt-image-1-mini",
    ]


async def test_routing_to_another_model_sends_it_upstream(codex_bridge: CodexBridge) -> None:
    response = await codex_bridge.run(routing={"model": "gpt-image-1"})

    [call] = codex_bridge.backend.requests_for("responses")
    assert call.body["tools"][0]["model"] == "gpt-image-1"
    assert response.model == "gpt-image-1"


# -- quota diagnostics and secrets ----------------------------------------------------------------


async def test_quota_snapshot_comes_from_wham_usage_then_from_headers(
    codex_bridge: CodexBridge,
) -> None:
    provider = codex_bridge.provider()
    backend = codex_bridge.backend

    first = await provider.diagnostics()
    backend.quota.primary_used_percent = 55.0
    await codex_bridge.run()
    second = await provider.diagnostics()

    assert backend.calls("usage") == 1
    assert first["quota"]["status"] == "available"
    assert first["quota"]["source"] == "usage_endpoint"
    assert first["quota"]["plan_type"] == "plus"
    windows = {w["name"]: w for w in first["quota"]["windows"]}
    assert windows["primary"]["used_percent"] == 12.0
    assert windows["secondary"]["window_minutes"] == 10_080
    assert second["quota"]["source"] == "headers"
    assert {w["name"]: w for w in second["quota"]["windows"]}["primary"]["used_percent"] == 55.0
    assert backend.calls("usage") == 1  # the generation's headers refreshed the cache
    text = json.dumps([first, second])
    for identifying in backend.usage_extra.values():
        assert identifying not in text


async def test_the_diagnostics_route_shows_both_providers_quota_without_identifiers(
    codex_bridge: CodexBridge,
) -> None:
    from imagebridge.server import create_app

    server = create_app(codex_bridge.app.config, application=codex_bridge.app)
    transport = httpx.ASGITransport(app=server)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.get("/v1/diagnostics/extended")

    assert response.status_code == 200
    for provider in ("codex-responses", "codex-images"):
        quota = response.json()["providers_detail"][provider]["quota"]
        assert quota["status"] == "available" and quota["plan_type"] == "plus"
        windows = {w["name"]: w for w in quota["windows"]}
        assert windows["primary"]["used_percent"] == 12.0
        assert windows["secondary"]["window_minutes"] == 10_080
        assert all(window["resets_at"] > time.time() for window in windows.values())
    for secret in (BRIDGE_TOKEN, BRIDGE_ACCOUNT, *codex_bridge.backend.usage_extra.values()):
        assert secret not in response.text


async def test_error_answers_update_the_snapshot_too(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.script("http_429")
    await codex_bridge.fail()

    diagnostics = await codex_bridge.provider().diagnostics()

    windows = {w["name"]: w for w in diagnostics["quota"]["windows"]}
    assert windows["primary"]["used_percent"] == 100.0
    assert diagnostics["quota"]["exhausted"] is True
    assert codex_bridge.backend.calls("usage") == 0


async def test_quota_reading_failure_is_reported_not_raised(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.script("http_401", route="usage")

    diagnostics = await codex_bridge.provider().diagnostics()

    assert diagnostics["quota"]["status"] == "unavailable"
    assert diagnostics["quota"]["error"]["code"] == "authentication"


async def test_no_token_or_account_id_in_logs_errors_or_diagnostics(
    codex_bridge: CodexBridge, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    backend = codex_bridge.backend
    seen: list[str] = []
    backend.script("http_500")
    await codex_bridge.run()
    for kind in ("http_401", "http_403", "http_429", "malformed_json", "content_policy_refusal"):
        backend.script(kind, kind)
        seen.append(json.dumps((await codex_bridge.fail()).to_dict()))
    backend.script("http_401", route="usage")
    seen.append(json.dumps(await codex_bridge.provider().diagnostics()))
    seen.append(json.dumps(await codex_bridge.provider("codex-images").diagnostics()))
    seen.append(repr(codex_bridge.provider().options))

    assert "transient upstream failure" in caplog.text  # the retry was logged
    everything = caplog.text + "".join(seen)
    for secret in (BRIDGE_TOKEN, BRIDGE_ACCOUNT):
        assert secret not in everything


# -- the backend of late 2026 (docs/providers.md, "Codex backend, as measured") -------------


async def test_a_final_image_with_status_generating_and_no_completed_is_delivered(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.script("final_generating_no_completed")

    response = await codex_bridge.run()

    [image] = response.data
    assert (image.width, image.height) == (64, 64)
    assert response.revised_prompt == "revised"
    assert response.usage == Usage()
    assert codex_bridge.backend.calls("responses") == 1


async def test_a_stream_that_ends_without_a_complete_image_stays_a_protocol_error(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.script("ends_without_image")

    error = await codex_bridge.fail()

    assert error.code is ErrorCode.PROTOCOL
    assert error.details["outcome"] == "unknown"  # accepted, so maybe billed: never retried
    assert codex_bridge.backend.calls("responses") == 1


async def test_an_image_repeated_in_many_events_is_one_output(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.script("repeated_image")
    events, sink = collecting_sink()

    response = await codex_bridge.run(
        parameters={"partial_images": 2}, context=ExecutionContext(events=sink)
    )

    assert len(response.data) == 1
    partials = [event for event in events if isinstance(event, PartialImageEvent)]
    assert len(partials) == 1


# -- the image's own usage, in response.tool_usage.image_gen ----------------------------------

IMAGE_GEN_USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"image_tokens": 100, "text_tokens": 20},
    "output_tokens": 7024,
    "output_tokens_details": {"image_tokens": 7024},
    "total_tokens": 7144,
}


async def test_image_usage_from_tool_usage_is_reported_under_usage_provider(
    codex_bridge: CodexBridge,
) -> None:
    codex_bridge.backend.image_gen_usage = IMAGE_GEN_USAGE

    response = await codex_bridge.run()

    usage = response.to_wire()["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (2, 3, 5)
    assert usage["provider"] == {
        "image_gen_images": 1,
        "image_gen_input_image_tokens": 100,
        "image_gen_input_text_tokens": 20,
        "image_gen_input_tokens": 120,
        "image_gen_output_image_tokens": 7024,
        "image_gen_output_tokens": 7024,
        "image_gen_total_tokens": 7144,
    }
    Usage.model_validate(usage)  # still the contract's Usage shape: no new top-level key


async def test_image_usage_sums_over_a_fan_out(codex_bridge: CodexBridge) -> None:
    codex_bridge.backend.image_gen_usage = {"output_tokens": 1000}

    response = await codex_bridge.run(parameters={"n": 3})

    assert response.usage is not None
    assert response.usage.provider == {"image_gen_images": 3, "image_gen_output_tokens": 3000}
    assert response.usage.total_tokens == 15
