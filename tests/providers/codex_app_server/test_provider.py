"""The codex-app-server provider through the engine, against the fake codex.

Every test builds the real application (``build_application``) with the fake codex as
``providers.codex_app_server.executable`` and checks what a caller sees plus what the
fake received; the ``bridge`` fixture fails a test whose fake process outlives it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time

import pytest

from imagebridge.application.codex_app_server import STAGING_DIR_NAME
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import PartialImageEvent
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.provider import ProviderContext, ProviderEventT
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.server.metrics import BridgeMetrics
from tests.support.fake_codex import FINAL_PNG, PARTIAL_PNG, make_png

from .bridge import PROVIDER, BridgeHarness, decoded, image_request
from .support import assert_reaped

# -- a plain generation ---------------------------------------------------------------------


async def test_isolated_generation_returns_the_image_and_archives_its_thread(
    bridge: BridgeHarness,
) -> None:
    app = bridge.app()
    response = await app.runtime.execute(image_request())

    assert response.provider == PROVIDER
    assert response.model == "gpt-image-2"
    (image,) = response.data
    assert decoded(image.b64_json) == FINAL_PNG
    assert (image.format.value, image.width, image.height) == ("png", 4, 4)
    assert response.revised_prompt == "a tiny blue square (fake)"
    assert response.usage is None
    assert response.session is not None
    assert response.session.reused is False and response.session.key is None
    thread_id = response.session.thread_id

    await bridge.settle(app)
    (start,) = bridge.received("thread/start")
    assert start["params"]["ephemeral"] is True
    assert start["params"]["approvalPolicy"] == "never"
    assert start["params"]["sandbox"] == "read-only"
    assert start["params"]["cwd"] == str(bridge.workdir)
    (turn,) = bridge.received("turn/start")
    assert turn["params"]["threadId"] == thread_id
    assert turn["params"]["input_types"] == ["text"]
    assert [a["params"]["threadId"] for a in bridge.received("thread/archive")] == [thread_id]
    assert bridge.provider(app).restart_count() == 0


@pytest.mark.parametrize("mode", ["saved_path", "file_id"])
async def test_images_saved_under_codex_home_are_read_from_there(
    bridge: BridgeHarness, mode: str
) -> None:
    bridge.scenario(turns=[{"mode": mode}])
    app = bridge.app()
    response = await app.runtime.execute(image_request())
    assert decoded(response.data[0].b64_json) == FINAL_PNG


async def test_a_saved_path_outside_codex_home_is_refused(bridge: BridgeHarness) -> None:
    outside = bridge.tmp_path / "elsewhere" / "secret.png"
    bridge.scenario(turns=[{"mode": "saved_path_outside", "outside_path": str(outside)}])
    app = bridge.app()
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    error = caught.value
    assert error.code is ErrorCode.PROTOCOL
    assert error.details["reason"] == "outside_generated_images"
    assert error.outcome_unknown  # the image was generated upstream: never retried
    assert str(outside) not in json.dumps(error.to_dict())


def _turn_events(bridge: BridgeHarness) -> list[str]:
    return [e["event"] for e in bridge.log() if e.get("event") in ("turn_start", "turn_end")]


async def test_n_3_fans_out_into_three_parallel_turns(bridge: BridgeHarness) -> None:
    bridge.scenario(default_turn={"mode": "result", "delay_seconds": 0.2})
    app = bridge.app()
    response = await app.runtime.execute(image_request(parameters={"n": 3}))
    assert [image.index for image in response.data] == [0, 1, 2]
    assert all(decoded(image.b64_json) == FINAL_PNG for image in response.data)
    assert "emulated_multi_image_fanout" in response.warnings
    await bridge.settle(app)
    # isolated + auto: the chunks run at once (as in the original)
    assert _turn_events(bridge)[:3] == ["turn_start"] * 3
    threads = {turn["params"]["threadId"] for turn in bridge.received("turn/start")}
    assert len(threads) == 3  # isolated: one ephemeral thread per output
    assert len(bridge.received("thread/archive")) == 3


async def test_a_persistent_batch_runs_its_turns_one_after_the_other_on_one_thread(
    bridge: BridgeHarness,
) -> None:
    bridge.scenario(default_turn={"mode": "result", "delay_seconds": 0.1})
    app = bridge.app()
    response = await app.runtime.execute(
        image_request(parameters={"n": 2}, session={"mode": "persistent", "key": "batch"})
    )
    assert [image.index for image in response.data] == [0, 1]
    await bridge.settle(app)
    assert _turn_events(bridge) == ["turn_start", "turn_end", "turn_start", "turn_end"]
    threads = {turn["params"]["threadId"] for turn in bridge.received("turn/start")}
    assert len(threads) == 1
    assert response.session is not None and response.session.thread_id in threads


async def test_capabilities_are_fanned_out_and_codex_shaped(bridge: BridgeHarness) -> None:
    app = bridge.app("providers.codex_app_server.max_parallel_outputs=2")
    caps = await app.runtime.registry.capabilities(PROVIDER, None)
    assert caps.model == "gpt-image-2"
    assert (caps.count.min, caps.count.max) == (1, 255)
    assert caps.batching.mode.value == "fan_out"
    assert (caps.batching.native_count.min, caps.batching.native_count.max) == (1, 1)
    assert caps.batching.max_parallel_outputs == 2
    assert caps.sizes.auto and not caps.sizes.arbitrary and not caps.sizes.allowed
    assert [f.value for f in caps.output_formats] == ["png"]
    assert caps.transparent_background.value == "emulated"
    assert caps.masks.support.value == "emulated"  # composited by the engine (issue 32)
    assert (caps.partial_images.min, caps.partial_images.max) == (0, 0)
    assert caps.persistent_sessions and caps.explicit_threads
    with pytest.raises(BridgeError) as caught:
        await app.runtime.registry.capabilities(PROVIDER, "gpt-image-1")
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert bridge.fake_pids() == set()  # discovery never starts codex


async def test_a_configured_codex_model_is_advertised_and_sent(bridge: BridgeHarness) -> None:
    app = bridge.app('providers.codex_app_server.codex_model="gpt-5.5"')
    (descriptor,) = app.runtime.registry.descriptors()
    assert descriptor.models == ["gpt-5.5"]
    response = await app.runtime.execute(image_request())
    assert response.model == "gpt-5.5"
    assert bridge.received("thread/start")[0]["params"]["model"] == "gpt-5.5"


# -- readiness ------------------------------------------------------------------------------


async def test_readiness_reads_the_account_and_image_capability(bridge: BridgeHarness) -> None:
    app = bridge.app()
    (ready,) = await app.runtime.registry.readiness(timeout=10)
    assert ready.provider == PROVIDER and ready.error is None
    methods = [entry["received"]["method"] for entry in bridge.log() if "received" in entry]
    assert methods[-2:] == ["account/read", "modelProvider/capabilities/read"]


@pytest.mark.parametrize(
    ("scenario", "code"),
    [
        ({"account": None}, ErrorCode.AUTHENTICATION),
        ({"image_generation": False}, ErrorCode.UNSUPPORTED_CAPABILITY),
        ({"no_answer": ["account/read"]}, ErrorCode.TIMEOUT),
    ],
)
async def test_readiness_reports_what_is_missing(
    bridge: BridgeHarness, scenario: dict[str, object], code: ErrorCode
) -> None:
    bridge.scenario(**scenario)
    app = bridge.app("providers.codex_app_server.rpc_timeout_ms=500")
    (ready,) = await app.runtime.registry.readiness(timeout=10)
    assert ready.error is not None
    assert ready.error.code is code
    assert ready.error.provider == PROVIDER


# -- upstream failures ----------------------------------------------------------------------


async def test_a_content_policy_failure_is_safety_rejected(bridge: BridgeHarness) -> None:
    bridge.scenario(turns=[{"mode": "policy"}])
    app = bridge.app()
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    error = caught.value
    assert error.code is ErrorCode.SAFETY_REJECTED
    assert error.http_status == 422
    assert error.details["terminal_status"] == "failed"
    assert error.details["upstream_message"] == (
        "Your request was rejected as a result of our safety system."
    )
    assert "safety system" not in error.message


async def test_a_429_is_rate_limited_and_retryable(bridge: BridgeHarness) -> None:
    bridge.scenario(turns=[{"mode": "rate_limit"}])
    app = bridge.app()
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    error = caught.value
    assert error.code is ErrorCode.RATE_LIMITED
    assert error.retryable and not error.outcome_unknown
    assert error.details["upstream_status"] == 429


async def test_an_image_usage_limit_is_rate_limited_with_a_retry_hint(
    bridge: BridgeHarness,
) -> None:
    bridge.scenario(turns=[{"mode": "usage_limit"}])
    app = bridge.app()
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    assert caught.value.code is ErrorCode.RATE_LIMITED
    assert 0 < caught.value.details["retry_after_ms"] <= 120_000


async def test_a_turn_without_an_image_is_upstream_with_content_safe_diagnostics(
    bridge: BridgeHarness,
) -> None:
    bridge.scenario(turns=[{"mode": "no_image"}])
    app = bridge.app()
    prompt = "zebra-umbrella-quartz"
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request(prompt))
    error = caught.value
    assert error.code is ErrorCode.UPSTREAM
    assert error.message == "Codex turn completed without an image"
    assert error.details["upstream_code"] == "completed_without_image"
    diagnostics = error.details["turn_diagnostics"]
    assert diagnostics["turn_status"] == "completed"
    assert diagnostics["image_items"] == 0
    assert diagnostics["item_types"] == {"agentMessage": 1, "userMessage": 1}
    serialized = json.dumps(error.to_dict())
    assert prompt not in serialized and "Image generated." not in serialized


async def test_an_approval_request_is_declined_and_the_turn_still_completes(
    bridge: BridgeHarness,
) -> None:
    bridge.scenario(turns=[{"mode": "approval"}])
    app = bridge.app()
    response = await app.runtime.execute(image_request())
    assert decoded(response.data[0].b64_json) == FINAL_PNG
    (answered,) = bridge.events("server_request_answered")
    assert answered["verdict"] == "ok"
    assert answered["answer"]["result"] == {"decision": "decline"}


# -- the child process ----------------------------------------------------------------------


async def test_a_child_crash_fails_that_request_and_a_fresh_child_serves_the_next(
    bridge: BridgeHarness,
) -> None:
    bridge.scenario(turns=[{"mode": "crash"}])
    app = bridge.app()
    provider = bridge.provider(app)
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    error = caught.value
    assert error.code is ErrorCode.UPSTREAM
    assert error.outcome_unknown and not error.retryable
    await bridge.settle(app)
    assert provider.restart_count() == 0  # restarts are lazy: nothing spawned yet

    response = await app.runtime.execute(image_request())
    assert decoded(response.data[0].b64_json) == FINAL_PNG
    assert provider.restart_count() == 1
    first_pid, second_pid = provider.client.spawned_pids
    assert_reaped([first_pid])
    assert [entry["pid"] for entry in bridge.events("started")] == [first_pid, second_pid]
    metrics = BridgeMetrics(app.runtime, app.runtime.registry.providers).render().decode()
    assert f'imagegen_bridge_provider_restarts_total{{provider="{PROVIDER}"}} 1.0' in metrics


async def test_the_childs_stderr_reaches_the_log_redacted_and_never_the_caller(
    bridge: BridgeHarness, caplog: pytest.LogCaptureFixture
) -> None:
    marker = "panicked at codex-internal-marker-7f3a"
    token = "sekrit-stderr-token-value"
    bridge.scenario(
        stderr_text=f"{marker}\nrequest failed: Authorization: Bearer {token}\n",
        turns=[{"mode": "crash"}],
    )
    app = bridge.app()
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    await bridge.settle(app)
    with caplog.at_level("INFO"):
        response = await app.runtime.execute(image_request())  # restarts: logs the old tail

    seen_by_caller = json.dumps(caught.value.to_dict()) + response.model_dump_json()
    assert marker not in seen_by_caller and token not in seen_by_caller
    assert marker in caplog.text  # the tail was kept for the operator ...
    assert token not in caplog.text  # ... without the credential in it
    assert bridge.provider(app).restart_count() == 1


async def test_no_codex_process_outlives_the_bridge(bridge: BridgeHarness) -> None:
    app = bridge.app()
    await app.runtime.execute(image_request(parameters={"n": 2}))
    pids = bridge.provider(app).client.spawned_pids
    assert len(pids) == 1
    await app.aclose()
    assert_reaped(pids)
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request())
    assert caught.value.code is ErrorCode.CANCELLED


# -- deadlines and cancellation ---------------------------------------------------------------


async def test_the_answer_does_not_wait_for_a_turn_that_runs_on_after_its_image(
    bridge: BridgeHarness,
) -> None:
    bridge.scenario(default_turn={"mode": "result", "linger_seconds": 30})
    app = bridge.app()
    started = time.monotonic()

    response = await app.runtime.execute(image_request())

    assert decoded(response.data[0].b64_json) == FINAL_PNG
    assert time.monotonic() - started < 10  # not the 30 s the turn would run on
    await bridge.settle(app)
    (turn,) = bridge.events("turn_start")
    assert [i["params"]["turnId"] for i in bridge.received("turn/interrupt")] == [turn["turn"]]
    assert [e["turn"] for e in bridge.events("interrupted")] == [turn["turn"]]
    assert [e["status"] for e in bridge.events("turn_end")] == ["interrupted"]


async def test_a_deadline_interrupts_the_running_turn(bridge: BridgeHarness) -> None:
    bridge.scenario(turns=[{"mode": "hang"}])
    app = bridge.app()
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request(timeout_ms=700))
    error = caught.value
    assert error.code is ErrorCode.TIMEOUT
    assert error.outcome_unknown  # the turn had started: never retried
    await bridge.settle(app)
    (turn,) = bridge.events("turn_start")
    interrupts = bridge.received("turn/interrupt")
    assert [i["params"]["turnId"] for i in interrupts] == [turn["turn"]]
    assert [e["turn"] for e in bridge.events("interrupted")] == [turn["turn"]]


async def test_client_cancellation_interrupts_the_running_turn(bridge: BridgeHarness) -> None:
    bridge.scenario(turns=[{"mode": "hang"}])
    app = bridge.app()
    token = CancelToken()
    running = asyncio.ensure_future(
        app.runtime.execute(image_request(), ExecutionContext(cancellation=token))
    )
    await bridge.wait_for(lambda: bool(bridge.events("turn_start")))
    token.cancel()
    with pytest.raises(BridgeError) as caught:
        await running
    assert caught.value.code is ErrorCode.CANCELLED
    await bridge.settle(app)
    (turn,) = bridge.events("turn_start")
    assert [i["params"]["turnId"] for i in bridge.received("turn/interrupt")] == [turn["turn"]]
    assert [e["turn"] for e in bridge.events("interrupted")] == [turn["turn"]]


async def test_the_provider_reports_a_confirmed_interrupt_as_a_cancelled_outcome(
    bridge: BridgeHarness,
) -> None:
    """Below the engine (which marks every post-dispatch stop unknown), the provider
    says what codex confirmed: the turn stopped, nothing was delivered."""
    bridge.scenario(turns=[{"mode": "hang"}])
    app = bridge.app()
    provider = bridge.provider(app)
    token = CancelToken()
    context = ProviderContext("direct-1", Deadline.after(10), cancellation=token)
    running = asyncio.ensure_future(provider.execute(image_request(), context))
    await bridge.wait_for(lambda: bool(bridge.events("turn_start")))
    token.cancel()
    with pytest.raises(BridgeError) as caught:
        await running
    error = caught.value
    assert error.code is ErrorCode.CANCELLED
    assert error.details["outcome"] == "cancelled"
    assert error.details["terminal_status"] == "interrupted"
    assert error.provider == PROVIDER


# -- inputs ---------------------------------------------------------------------------------


def _inline(png: bytes) -> dict[str, str]:
    return {"type": "base64", "data": base64.b64encode(png).decode(), "media_type": "image/png"}


async def test_edit_sources_and_references_are_staged_as_local_images(
    bridge: BridgeHarness,
) -> None:
    app = bridge.app()
    source, reference = make_png(6, 6, (250, 0, 0, 255)), make_png(5, 5, (0, 250, 0, 255))
    request = image_request(
        operation="edit", images=[_inline(source)], reference_images=[_inline(reference)]
    )
    response = await app.runtime.execute(request)
    assert decoded(response.data[0].b64_json) == FINAL_PNG
    (turn,) = bridge.received("turn/start")
    assert turn["params"]["input_types"] == ["text", "localImage", "localImage"]
    await bridge.settle(app)
    staging = bridge.data_dir / STAGING_DIR_NAME
    assert staging.is_dir()
    assert list(staging.iterdir()) == []  # the turn's folder is gone


async def test_staging_folders_left_by_a_crash_are_swept_on_first_use(
    bridge: BridgeHarness,
) -> None:
    staging = bridge.data_dir / STAGING_DIR_NAME
    stale, recent = staging / "turn-stale", staging / "turn-recent"
    for folder in (stale, recent):
        folder.mkdir(parents=True)
        (folder / "input.png").write_bytes(FINAL_PNG)
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    app = bridge.app()
    await app.runtime.execute(image_request())
    assert not stale.exists()
    assert recent.is_dir()  # may belong to a turn still running elsewhere


async def test_an_input_that_is_not_an_image_is_an_input_error(bridge: BridgeHarness) -> None:
    app = bridge.app()
    bad = {"type": "base64", "data": base64.b64encode(b"not an image").decode()}
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(image_request(reference_images=[bad]))
    assert caught.value.code is ErrorCode.INPUT
    assert caught.value.details["field"] == "reference_images[0]"
    assert bridge.received("turn/start") == []


async def test_a_mask_is_refused_before_codex_is_asked(bridge: BridgeHarness) -> None:
    app = bridge.app()
    request = image_request(
        operation="edit", images=[_inline(FINAL_PNG)], mask=_inline(make_png(4, 4))
    )
    with pytest.raises(BridgeError) as caught:
        await app.runtime.execute(request)
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert caught.value.details["codex_code"] == "CODEX_RASTER_MASK_UNSUPPORTED"
    assert bridge.fake_pids() == set()


# -- partial images -------------------------------------------------------------------------


async def test_in_progress_previews_become_partial_image_events(bridge: BridgeHarness) -> None:
    """codex 0.169 sends none and the capabilities say 0, so this is the provider alone:
    a request that asks for previews gets each in-progress image as an event."""
    bridge.scenario(turns=[{"mode": "partial"}, {"mode": "partial"}])
    app = bridge.app()
    provider = bridge.provider(app)
    seen: list[ProviderEventT] = []

    async def sink(event: ProviderEventT) -> None:
        seen.append(event)

    request = image_request(parameters={"partial_images": 1})
    context = ProviderContext("direct-partial", Deadline.after(10), events=sink)
    response = await provider.execute(request, context)
    assert decoded(response.data[0].b64_json) == FINAL_PNG
    partials = [event for event in seen if isinstance(event, PartialImageEvent)]
    assert [(p.index, p.partial_index) for p in partials] == [(0, 0)]  # capped at 1
    assert base64.b64decode(partials[0].b64_json) == PARTIAL_PNG
    stages = [getattr(event, "stage", None) for event in seen]
    assert stages[:3] == [None, "preparing_session", "generating"]

    seen.clear()
    await provider.execute(image_request(), ProviderContext("direct-none", Deadline.after(10)))
    assert not [event for event in seen if isinstance(event, PartialImageEvent)]
