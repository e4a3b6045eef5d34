"""Turn a request's local ``file`` inputs into verified inline images.

The CLI and the MCP server read local files themselves (never a remote bridge, which may not
see them) and send the bytes inline; both do it here, through an :class:`InputLoader` that
confines paths to the configured roots and verifies every image.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.contract.request import ImageInput, ImageRequest

__all__ = ["inline_file_inputs"]


async def inline_file_inputs(request: ImageRequest, loader: InputLoader) -> ImageRequest:
    """Replace ``file`` inputs by verified inline images (the loader enforces the roots).

    A request without file inputs is returned as it is; other inputs are left untouched.
    """
    if not any(item.type == "file" for _, item in request.all_inputs()):
        return request

    async def inline(item: ImageInput) -> ImageInput:
        if item.type != "file":
            return item
        loaded = await loader.aload("file", item.payload, filename=item.filename)
        encoded = await asyncio.to_thread(base64.b64encode, loaded.data)
        return ImageInput.from_payload(
            "base64",
            encoded.decode("ascii"),
            media_type=loaded.info.media_type,
            filename=item.filename,
        )

    update: dict[str, Any] = {}
    if request.images is not None:
        update["images"] = [await inline(item) for item in request.images]
    if request.mask is not None:
        update["mask"] = await inline(request.mask)
    if request.reference_images:
        update["reference_images"] = [await inline(item) for item in request.reference_images]
    return request.model_copy(update=update)
