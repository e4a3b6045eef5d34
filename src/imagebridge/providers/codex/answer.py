"""The answer of a Codex HTTP call: its image verified, then the normalized response.

The image is decoded and inspected in a worker thread (it can be megabytes); an image that
cannot be verified is a ``protocol`` error, never passed on. The response says how the call
went: the transient-retry warning, the accounts that refused it, the account that served it.
"""

from __future__ import annotations

import asyncio
import time

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import GeneratedImage, ImageResponse, Timings, Usage
from imagebridge.engine.provider import ProviderContext, inline_image
from imagebridge.engine.served import mark_served
from imagebridge.imaging.inspect import ImageLimits, inspect_image
from imagebridge.providers.codex.account_failover import Served
from imagebridge.providers.codex.pool import record_failover
from imagebridge.providers.codex.retries import RETRY_WARNING
from imagebridge.providers.codex.wire import decode_image_base64

__all__ = ["image_response", "verified_image"]


async def verified_image(b64: str, *, max_base64_chars: int, limits: ImageLimits) -> GeneratedImage:
    """Decode and inspect the final image in a worker thread (it can be megabytes)."""

    def decode() -> GeneratedImage:
        text = b64.strip()
        data = decode_image_base64(text, max_chars=max_base64_chars)
        try:
            info = inspect_image(data, limits)
        except BridgeError as error:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "The Codex backend sent an image that could not be verified.",
                details={"stage": "image", "reason": error.message},
            ) from None
        return inline_image(0, text, info)

    return await asyncio.to_thread(decode)


def image_response(
    request: ImageRequest,
    context: ProviderContext,
    *,
    provider: str,
    model: str,
    served: Served,
    started: float,
) -> ImageResponse:
    """The normalized response of a served call started at ``started`` (monotonic)."""
    elapsed = max(0, int((time.monotonic() - started) * 1000))
    result = served.result
    image = result.image
    image.generation_ms = elapsed
    usage = result.usage.to_dict() if result.usage is not None else {}
    response = ImageResponse(
        id=context.request_id,
        created=int(time.time()),
        provider=provider,
        model=model,
        requested=request.parameters.model_copy(deep=True),
        effective=request.parameters.model_copy(deep=True),
        data=[image],
        revised_prompt=result.revised_prompt,
        usage=Usage.model_validate(usage),
        timings=Timings(provider_ms=elapsed, total_ms=elapsed),
        warnings=[RETRY_WARNING] if served.repeated else [],
    )
    if served.tried:
        record_failover(response, served.tried, served.account)
    mark_served(response, served.account)
    return response
