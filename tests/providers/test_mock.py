"""The offline mock provider: real, deterministic images through the whole engine."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.enums import Background
from imagebridge.contract.events import PartialImageEvent
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.cancellation import CancelToken, Deadline
from imagebridge.engine.fanout import FanoutProvider
from imagebridge.engine.provider import ProviderContext, ProviderEventT
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.engine.validation import MASK_ALPHA_MESSAGE, MASK_SIZE_MESSAGE, RequestLimits
from imagebridge.providers.mock import MockProvider, MockSettings, render_image
from tests.support.runtime import make_runtime


def mock_runtime(settings: MockSettings | None = None, **runtime: Any) -> tuple[Any, MockProvider]:
    inner = MockProvider(settings)
    provider = FanoutProvider(
        inner, max_outputs=255, max_parallel_outputs=255, limits=RequestLimits()
    )
    return make_runtime(provider, **runtime), inner


def request(prompt: str = "a red fox", **fields: Any) -> ImageRequest:
    body: dict[str, Any] = {
        "operation": "generate",
        "prompt": prompt,
        "parameters": {"size": "64x48"},
    }
    body.update(fields)
    return ImageRequest.model_validate(body)


def decode(b64: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(b64)))


async def test_generates_verified_images_of_the_requested_size_and_format() -> None:
    runtime, _ = mock_runtime()
    for fmt, pil in (("png", "PNG"), ("jpeg", "JPEG"), ("webp", "WEBP")):
        response = await runtime.execute(
            request(parameters={"size": "64x48", "output_format": fmt})
        )
        item = response.data[0]
        assert (item.width, item.height, item.format.value) == (64, 48, fmt)
        image = decode(item.b64_json or "")
        assert image.format == pil and image.size == (64, 48)


async def test_same_input_gives_identical_bytes_and_indices_differ() -> None:
    runtime, _ = mock_runtime()
    first = await runtime.execute(request(parameters={"size": "32x32", "n": 2}))
    second = await runtime.execute(request(parameters={"size": "32x32", "n": 2}))
    assert [i.sha256 for i in first.data] == [i.sha256 for i in second.data]
    assert first.data[0].sha256 != first.data[1].sha256
    other = await runtime.execute(request("a blue fox", parameters={"size": "32x32"}))
    assert other.data[0].sha256 != first.data[0].sha256


async def test_forty_images_in_order_and_one_injected_failure() -> None:
    runtime, inner = mock_runtime()
    response = await runtime.execute(request(parameters={"size": "16x16", "n": 40}))
    assert [i.index for i in response.data] == list(range(40))
    assert inner.calls == 40
    for item in response.data:  # each one is a real, verified 16x16 PNG
        data = base64.b64decode(item.b64_json or "")
        assert hashlib.sha256(data).hexdigest() == item.sha256 and len(data) == item.bytes
        assert decode(item.b64_json or "").size == (16, 16)
    assert len({item.sha256 for item in response.data}) == 40  # pixels follow the index
    assert "emulated_multi_image_fanout" in response.warnings
    partial = await runtime.execute(
        request(
            "a fox [mock:fail-output=13]",
            parameters={"size": "16x16", "n": 40, "failure_policy": "best_effort"},
        )
    )
    assert len(partial.data) == 39
    assert [f.index for f in partial.failures] == [13]
    assert 13 not in [i.index for i in partial.data]
    assert partial.failures[0].error.code is ErrorCode.UPSTREAM
    assert "partial_output_failure" in partial.warnings


async def test_edits_derive_from_the_input_image() -> None:
    runtime, _ = mock_runtime()
    source = render_image("source", 0, 40, 40, _png())
    data_url = "data:image/png;base64," + base64.b64encode(source).decode()
    edit = ImageRequest.model_validate(
        {
            "operation": "edit",
            "prompt": "make it warmer",
            "images": [{"type": "data_url", "data_url": data_url}],
            "parameters": {"size": "40x40"},
        }
    )
    edited = await runtime.execute(edit)
    plain = await runtime.execute(request("make it warmer", parameters={"size": "40x40"}))
    assert edited.data[0].sha256 != plain.data[0].sha256


async def test_partial_images_are_emitted() -> None:
    runtime, _ = mock_runtime()
    events: list[ProviderEventT] = []

    async def sink(event: ProviderEventT) -> None:
        events.append(event)

    await runtime.execute(
        request(parameters={"size": "32x32", "partial_images": 2}), ExecutionContext(events=sink)
    )
    partials = [e for e in events if isinstance(e, PartialImageEvent)]
    assert [(p.index, p.partial_index) for p in partials] == [(0, 0), (0, 1)]
    assert decode(partials[0].b64_json).format == "PNG"


async def test_native_transparency_has_real_alpha() -> None:
    runtime, _ = mock_runtime()
    response = await runtime.execute(
        request(parameters={"size": "64x64", "background": "transparent"})
    )
    image = decode(response.data[0].b64_json or "")
    assert image.mode == "RGBA"
    assert image.getpixel((0, 0))[3] == 0  # type: ignore[index]
    assert any(n.reason == "validated_native_alpha" for n in response.normalizations)


async def test_persistent_sessions_in_memory() -> None:
    runtime, inner = mock_runtime()
    session = {"mode": "persistent", "key": "album"}
    first = await runtime.execute(request(session=session))
    second = await runtime.execute(request(session=session))
    assert first.session is not None and second.session is not None
    assert (first.session.reused, second.session.reused) == (False, True)
    assert first.session.thread_id == second.session.thread_id
    assert (await inner.get_session("album")).thread_id == first.session.thread_id
    await inner.delete_session("album")
    with pytest.raises(BridgeError) as caught:
        await inner.get_session("album")
    assert caught.value.code is ErrorCode.SESSION


async def test_the_least_recently_used_session_is_forgotten_past_the_bound() -> None:
    runtime, inner = mock_runtime(MockSettings(max_sessions=2))
    for key in ("first", "second", "first", "third"):  # "first" used again: "second" is oldest
        await runtime.execute(request(session={"mode": "persistent", "key": key}))
    assert (await inner.get_session("first")).reused
    assert (await inner.get_session("third")).reused
    with pytest.raises(BridgeError) as caught:
        await inner.get_session("second")
    assert caught.value.code is ErrorCode.SESSION
    again = await runtime.execute(request(session={"mode": "persistent", "key": "second"}))
    assert again.session is not None and not again.session.reused  # a new thread


async def test_directive_failures_and_seeded_chaos() -> None:
    runtime, _ = mock_runtime()
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request("x [mock:fail=rate_limited]"))
    assert caught.value.code is ErrorCode.RATE_LIMITED and caught.value.retryable
    with pytest.raises(BridgeError) as safety:
        await runtime.execute(request("x [mock:fail=safety_rejected]"))
    assert safety.value.code is ErrorCode.SAFETY_REJECTED
    chaos, _ = mock_runtime(MockSettings(failure_rate=1.0, seed=7))
    with pytest.raises(BridgeError) as injected:
        await chaos.execute(request())
    assert injected.value.code is ErrorCode.UPSTREAM and injected.value.retryable


async def test_latency_is_cancellable() -> None:
    runtime, inner = mock_runtime(MockSettings(latency_ms=5_000), cancellation_grace_ms=100)
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(request(timeout_ms=50))
    assert caught.value.code is ErrorCode.TIMEOUT
    assert caught.value.details["outcome"] == "unknown"
    assert inner.cancellations == 1


async def test_parallel_fan_out_overlaps_latency() -> None:
    runtime, inner = mock_runtime(MockSettings(latency_ms=100))
    loop = asyncio.get_running_loop()
    started = loop.time()
    await runtime.execute(request(parameters={"size": "8x8", "n": 8}))
    assert loop.time() - started < 0.6
    assert inner.peak_in_flight == 8


async def test_descriptor_says_it_is_a_test_double() -> None:
    descriptor = MockProvider().descriptor
    assert descriptor.experimental is True
    assert "test double" in descriptor.display_name


def _png() -> Any:
    from imagebridge.contract.enums import OutputFormat

    return OutputFormat.PNG


def test_small_renders_are_drawn_once_and_large_ones_every_time() -> None:
    """Under load the same small image is asked for again and again: draw it once."""
    from imagebridge.contract.enums import OutputFormat
    from imagebridge.providers import mock_render as module

    module._render_cached.cache_clear()
    first = render_image("cache fox", 0, 64, 64, OutputFormat.PNG)
    again = render_image("cache fox", 0, 64, 64, OutputFormat.PNG)
    other = render_image("cache fox", 1, 64, 64, OutputFormat.PNG)
    info = module._render_cached.cache_info()
    assert first == again != other
    assert (info.hits, info.misses) == (1, 2)
    big = render_image("cache fox", 0, 300, 300, OutputFormat.PNG)
    assert module._render_cached.cache_info().misses == 2  # beyond the bound: not cached
    assert Image.open(io.BytesIO(big)).size == (300, 300)


async def test_capabilities_are_built_once_and_callers_get_their_own_copy() -> None:
    provider = MockProvider(MockSettings(models=("mock-image-1", "mock-image-2")))
    first = await provider.capabilities(None)
    first.model = "changed by a caller"
    again = await provider.capabilities("mock-image-1")
    assert again.model == "mock-image-1"
    assert (await provider.capabilities("mock-image-2")).model == "mock-image-2"
    with pytest.raises(BridgeError) as caught:
        await provider.capabilities("not-served")
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY


def _direct_context() -> Any:
    from imagebridge.engine.cancellation import CancelToken, Deadline
    from imagebridge.engine.provider import ProviderContext

    return ProviderContext("direct", Deadline.after(30), CancelToken())


async def test_seeded_chaos_is_reproducible() -> None:
    """The same seed fails the same calls, so a chaos run can be replayed."""

    async def pattern(seed: int) -> list[bool]:
        provider = MockProvider(MockSettings(failure_rate=0.5, seed=seed))
        outcome = []
        for _ in range(24):
            try:
                await provider.execute(request(parameters={"size": "4x4"}), _direct_context())
                outcome.append(True)
            except BridgeError as error:
                assert error.code is ErrorCode.UPSTREAM and error.retryable
                outcome.append(False)
        return outcome

    first = await pattern(7)
    assert first == await pattern(7)
    assert True in first and False in first
    assert first != await pattern(8)


async def test_latency_jitter_stays_within_its_bound_and_follows_the_seed() -> None:
    class Recording(MockProvider):
        def __init__(self, settings: MockSettings) -> None:
            super().__init__(settings)
            self.waits: list[float] = []

        async def _sleep(self, seconds: float, context: Any) -> None:
            self.waits.append(seconds)

    async def waits(seed: int) -> list[float]:
        provider = Recording(MockSettings(latency_ms=100, latency_jitter_ms=50, seed=seed))
        for _ in range(12):
            await provider.execute(request(parameters={"size": "4x4"}), _direct_context())
        return provider.waits

    first = await waits(3)
    assert len(first) == 12
    assert all(0.1 <= wait <= 0.15 for wait in first)
    assert len(set(first)) > 1  # jitter actually varies the latency
    assert first == await waits(3)


async def test_a_failing_event_sink_never_fails_the_generation() -> None:
    runtime, _ = mock_runtime()

    async def broken(event: ProviderEventT) -> None:
        raise RuntimeError("the listener went away")

    response = await runtime.execute(
        request(parameters={"size": "16x16", "partial_images": 1}), ExecutionContext(events=broken)
    )
    assert len(response.data) == 1


async def test_reported_parameters_are_independent_copies_of_the_request() -> None:
    provider = MockProvider()
    sent = request(parameters={"size": "32x32", "output_format": "webp", "output_compression": 40})
    context = ProviderContext("copies", Deadline.after(30), CancelToken())
    response = await provider.execute(sent, context)
    assert response.requested == sent.parameters == response.effective
    response.effective.background = Background.OPAQUE  # what the runtime does to its own copy
    response.requested.n = 2
    assert sent.parameters.background is Background.AUTO and sent.parameters.n == 1
    assert response.requested.background is Background.AUTO
    assert response.effective.n == 1


# -- masks: native, as OpenAI's edits -------------------------------------------------------

MASK_W, MASK_H = 40, 30
KEPT, CHANGED, HALF = 255, 0, 128


def _encoded(pixels: np.ndarray, mode: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode).save(buffer, format="PNG")
    return buffer.getvalue()


def _data_url(data: bytes) -> dict[str, str]:
    return {
        "type": "data_url",
        "data_url": "data:image/png;base64," + base64.b64encode(data).decode(),
    }


def _mask_alpha() -> np.ndarray:
    """Opaque (kept) but for a transparent box and a half-transparent column beside it."""
    alpha = np.full((MASK_H, MASK_W), KEPT, dtype=np.uint8)
    alpha[5:20, 10:25] = CHANGED
    alpha[5:20, 25] = HALF
    return alpha


def _mask(alpha: np.ndarray) -> bytes:
    rgba = np.zeros((*alpha.shape, 4), dtype=np.uint8)
    rgba[..., 3] = alpha
    return _encoded(rgba, "RGBA")


def _edit(source: bytes, mask: bytes | None, **parameters: Any) -> ImageRequest:
    body: dict[str, Any] = {
        "operation": "edit",
        "prompt": "paint the box gold",
        "images": [_data_url(source)],
        "parameters": parameters,
    }
    if mask is not None:
        body["mask"] = _data_url(mask)
    return ImageRequest.model_validate(body)


def _pixels(b64: str | None, mode: str) -> np.ndarray:
    return np.asarray(decode(b64 or "").convert(mode), dtype=np.int32)


@pytest.mark.parametrize("output_format", ["png", "webp"])
async def test_a_masked_edit_changes_only_where_the_mask_is_transparent(
    output_format: str,
) -> None:
    runtime, _ = mock_runtime(MockSettings(native_count=2))
    source = render_image("a harbour", 0, MASK_W, MASK_H, _png())
    alpha = _mask_alpha()
    size = f"{MASK_W}x{MASK_H}"
    masked = await runtime.execute(
        _edit(source, _mask(alpha), size=size, n=2, output_format=output_format)
    )
    # the same edit without a mask: what the mock draws over the whole source
    whole = await runtime.execute(_edit(source, None, size=size, n=2, output_format="png"))
    before = _pixels(base64.b64encode(source).decode(), "RGB")
    for item, drawn_item in zip(masked.data, whole.data, strict=True):
        assert (item.width, item.height, item.format.value) == (MASK_W, MASK_H, output_format)
        after, drawn = _pixels(item.b64_json, "RGB"), _pixels(drawn_item.b64_json, "RGB")
        kept, changed, half = alpha == KEPT, alpha == CHANGED, alpha == HALF
        assert np.array_equal(after[kept], before[kept])  # the source, bit for bit
        assert np.array_equal(after[changed], drawn[changed])  # the edit, as drawn
        share = (255 - HALF) / 255  # partial transparency blends in proportion
        blend = np.rint(before[half] + (drawn[half] - before[half]) * share)
        assert np.abs(after[half] - blend).max() <= 1
        assert np.count_nonzero((after != before).any(axis=-1)[changed]) > 0.9 * changed.sum()
    assert masked.data[0].sha256 != masked.data[1].sha256  # outputs still follow the index
    again = await runtime.execute(
        _edit(source, _mask(alpha), size=size, n=2, output_format=output_format)
    )
    assert [i.sha256 for i in again.data] == [i.sha256 for i in masked.data]  # deterministic
    assert not any("mask" in warning for warning in masked.warnings)  # native: no compositing
    assert not any("mask" in n.field for n in masked.normalizations)  # by the bridge


async def test_a_masked_edit_has_the_source_size_and_a_different_ask_is_reported() -> None:
    runtime, _ = mock_runtime()
    source = render_image("a harbour", 0, MASK_W, MASK_H, _png())
    mask = _mask(_mask_alpha())
    auto = await runtime.execute(_edit(source, mask))
    assert (auto.data[0].width, auto.data[0].height) == (MASK_W, MASK_H)
    assert decode(auto.data[0].b64_json or "").size == (MASK_W, MASK_H)
    assert auto.normalizations == []
    other = await runtime.execute(_edit(source, mask, size="64x64"))
    assert decode(other.data[0].b64_json or "").size == (MASK_W, MASK_H)
    [note] = [n for n in other.normalizations if n.field == "parameters.size"]
    assert (note.requested, note.effective) == ("64x64", f"{MASK_W}x{MASK_H}")
    assert "provider_output_size_differed" in other.warnings


@pytest.mark.parametrize("output_format", ["png", "webp"])
async def test_a_see_through_source_keeps_its_alpha_outside_the_mask(output_format: str) -> None:
    runtime, _ = mock_runtime()
    rgba = np.random.default_rng(3).integers(0, 256, (MASK_H, MASK_W, 4), dtype=np.uint8)
    rgba[0, :, 3] = 0  # fully see-through pixels keep their colour too (lossless WebP: exact)
    alpha = _mask_alpha()
    response = await runtime.execute(
        _edit(
            _encoded(rgba, "RGBA"),
            _mask(alpha),
            size=f"{MASK_W}x{MASK_H}",
            output_format=output_format,
        )
    )
    after = _pixels(response.data[0].b64_json, "RGBA")
    assert decode(response.data[0].b64_json or "").mode == "RGBA"
    kept = alpha == KEPT
    assert np.array_equal(after[kept], rgba[kept])
    assert (after[alpha == CHANGED][:, 3] == 255).all()  # the edit drew opaque pixels there


async def test_a_mask_with_nothing_transparent_keeps_the_whole_source() -> None:
    """As OpenAI's rule reads it: only transparent pixels may change, and there are none."""
    runtime, _ = mock_runtime()
    source = render_image("a harbour", 0, MASK_W, MASK_H, _png())
    opaque = _mask(np.full((MASK_H, MASK_W), KEPT, dtype=np.uint8))
    response = await runtime.execute(_edit(source, opaque, size=f"{MASK_W}x{MASK_H}"))
    after = _pixels(response.data[0].b64_json, "RGB")
    assert np.array_equal(after, _pixels(base64.b64encode(source).decode(), "RGB"))


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (_encoded(np.zeros((MASK_H, MASK_W, 3), dtype=np.uint8), "RGB"), MASK_ALPHA_MESSAGE),
        (_mask(np.zeros((MASK_H, MASK_W - 1), dtype=np.uint8)), MASK_SIZE_MESSAGE),
    ],
    ids=["no-alpha", "another-size"],
)
async def test_a_mask_that_cannot_mark_the_source_is_refused(mask: bytes, message: str) -> None:
    runtime, _ = mock_runtime()
    source = render_image("a harbour", 0, MASK_W, MASK_H, _png())
    with pytest.raises(BridgeError) as caught:
        await runtime.execute(_edit(source, mask, size=f"{MASK_W}x{MASK_H}"))
    assert caught.value.code is ErrorCode.INPUT
    assert caught.value.details["field"] == "mask"
    assert message in caught.value.message
    assert caught.value.provider == "mock"
