"""The answer of a Codex HTTP call: an image is passed on only once verified, and the response
says how the call went (a repeated call, the accounts that refused it, the one that served)."""

from __future__ import annotations

import base64
import time

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.cancellation import Deadline
from imagebridge.engine.provider import ProviderContext
from imagebridge.engine.served import served_by
from imagebridge.imaging.inspect import ImageLimits
from imagebridge.providers.codex.account_failover import Served
from imagebridge.providers.codex.answer import image_response, verified_image
from imagebridge.providers.codex.guarded_call import CallResult
from imagebridge.providers.codex.pool import Tried
from imagebridge.providers.codex.wire import TokenUsage
from tests.support.images import png_bytes

PROVIDER = "codex-responses"
LIMITS = ImageLimits()


def request() -> ImageRequest:
    return ImageRequest.model_validate({"operation": "generate", "prompt": "a fox"})


def context() -> ProviderContext:
    return ProviderContext(request_id="req_answer", deadline=Deadline.after(5.0))


async def test_a_verified_image_says_what_its_bytes_are() -> None:
    data = png_bytes(3, 2)
    image = await verified_image(
        " " + base64.b64encode(data).decode() + "\n", max_base64_chars=10_000, limits=LIMITS
    )
    assert (image.format, image.width, image.height, image.bytes) == ("png", 3, 2, len(data))


async def test_bytes_that_are_not_an_image_are_a_protocol_error() -> None:
    with pytest.raises(BridgeError) as caught:
        await verified_image(
            base64.b64encode(b"not an image at all").decode(),
            max_base64_chars=10_000,
            limits=LIMITS,
        )
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.details["stage"] == "image"


async def test_an_image_longer_than_the_bound_is_refused_before_decoding() -> None:
    with pytest.raises(BridgeError) as caught:
        await verified_image(
            base64.b64encode(png_bytes(64, 64)).decode(), max_base64_chars=16, limits=LIMITS
        )
    assert caught.value.code is ErrorCode.PROTOCOL


async def served(*, repeated: bool = False, tried: tuple[Tried, ...] = ()) -> Served:
    image = await verified_image(
        base64.b64encode(png_bytes()).decode(), max_base64_chars=10_000, limits=LIMITS
    )
    usage = TokenUsage(input_tokens=3, output_tokens=5, total_tokens=8)
    result = CallResult(image=image, revised_prompt="a red fox", usage=usage)
    return Served(
        result, calls=2 if repeated else 1, repeated=repeated, account="beta", tried=tried
    )


async def test_a_response_carries_the_image_prompt_usage_and_serving_account() -> None:
    response = image_response(
        request(),
        context(),
        provider=PROVIDER,
        model="gpt-image-2",
        served=await served(),
        started=time.monotonic(),
    )
    assert (response.id, response.provider, response.model) == (
        "req_answer",
        PROVIDER,
        "gpt-image-2",
    )
    assert response.revised_prompt == "a red fox"
    assert response.usage.total_tokens == 8
    assert response.warnings == []
    assert served_by(response) == {"beta": 1}


async def test_a_repeated_call_and_a_failover_are_said_in_the_response() -> None:
    refusal = BridgeError(ErrorCode.RATE_LIMITED, "limit", details={"quota_exhausted": True})
    response = image_response(
        request(),
        context(),
        provider=PROVIDER,
        model="gpt-image-2",
        served=await served(repeated=True, tried=(Tried("alpha", refusal, "quota", 12),)),
        started=time.monotonic(),
    )
    assert "transient_provider_retry_used" in response.warnings
    assert "account_failover_used" in response.warnings
    (moved,) = response.normalizations
    assert (moved.field, moved.requested, moved.effective) == ("routing.account", "alpha", "beta")
    assert [attempt.error_code for attempt in response.attempts] == [ErrorCode.RATE_LIMITED]
