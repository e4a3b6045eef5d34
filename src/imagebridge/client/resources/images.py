"""``client.images``: native generate/edit, the SSE stream and the OpenAI-compatible routes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict, Unpack, cast

from imagebridge.client._config import TimeoutTypes
from imagebridge.client._constants import IDEMPOTENCY_HEADER
from imagebridge.client._inputs import DEFAULT_MAX_INPUT_BYTES, ImageFile, multipart_files
from imagebridge.client._params import (
    RequestLike,
    call_timeout,
    deadline_read_timeout,
    image_request,
    json_bytes,
    validated,
)
from imagebridge.client._request import (
    FileField,
    RequestSpec,
    check_idempotency_key,
    model_parser,
)
from imagebridge.client._resource import AsyncAPIResource, SyncAPIResource
from imagebridge.client._streaming import AsyncStream, Stream
from imagebridge.contract.enums import Operation
from imagebridge.contract.openai.images import CompatibleGenerationRequest, CompatImagesResponse
from imagebridge.contract.request import ImageRequest
from imagebridge.contract.response import ImageResponse

__all__ = ["AsyncImages", "CompatEditFields", "Images"]


class CompatEditFields(TypedDict, total=False):
    """Text fields of ``POST /v1/images/edits``."""

    model: str
    n: int
    size: str
    quality: str
    output_format: str
    output_compression: int
    background: str
    moderation: str
    input_fidelity: str
    response_format: Literal["b64_json", "url"]
    user: str
    provider: str
    negative_prompt: str
    compatibility: str
    revised_prompt: str
    session_key: str


def _headers(idempotency_key: str | None) -> dict[str, str]:
    if idempotency_key is None:
        return {}
    return {IDEMPOTENCY_HEADER: check_idempotency_key(idempotency_key)}


def native_spec(
    path: str,
    request: RequestLike,
    operation: Operation,
    method: str,
    *,
    idempotency_key: str | None,
    request_id: str | None,
    timeout: TimeoutTypes | None,
) -> RequestSpec[ImageResponse]:
    model = image_request(request, operation, method)
    return RequestSpec(
        "POST",
        path,
        model_parser(ImageResponse, "image response"),
        json_body=json_bytes(model),
        headers=_headers(idempotency_key),
        auto_idempotency=True,
        body_has_idempotency_key=model.idempotency_key is not None,
        request_id=request_id,
        timeout=call_timeout(timeout),
        min_read_timeout=deadline_read_timeout(model),
    )


def stream_spec(
    request: RequestLike,
    *,
    idempotency_key: str | None,
    request_id: str | None,
    timeout: TimeoutTypes | None,
) -> RequestSpec[ImageResponse]:
    model = image_request(request, request_operation(request), "images.stream")
    return RequestSpec(
        "POST",
        "/v1/images/stream",
        model_parser(ImageResponse, "image response"),
        json_body=json_bytes(model),
        headers=_headers(idempotency_key),
        auto_idempotency=True,
        body_has_idempotency_key=model.idempotency_key is not None,
        request_id=request_id,
        timeout=call_timeout(timeout),
        min_read_timeout=deadline_read_timeout(model),
    )


def request_operation(request: RequestLike) -> Operation:
    """A stream carries either operation: the request's own, ``generate`` by default."""
    if isinstance(request, str):
        return Operation.GENERATE
    if isinstance(request, Mapping):
        raw = request.get("operation", Operation.GENERATE.value)
        return Operation.EDIT if raw == Operation.EDIT.value else Operation.GENERATE
    return request.operation


def generations_spec(
    request: CompatibleGenerationRequest | Mapping[str, Any],
    *,
    idempotency_key: str | None,
    request_id: str | None,
    timeout: TimeoutTypes | None,
) -> RequestSpec[CompatImagesResponse]:
    model = validated(CompatibleGenerationRequest, request, "generation request")
    return RequestSpec(
        "POST",
        "/v1/images/generations",
        model_parser(CompatImagesResponse, "images response"),
        json_body=json_bytes(model),
        headers=_headers(idempotency_key),
        auto_idempotency=True,
        request_id=request_id,
        timeout=call_timeout(timeout),
    )


def edits_spec(
    files: Sequence[FileField],
    prompt: str,
    fields: CompatEditFields,
    *,
    idempotency_key: str | None,
    request_id: str | None,
    timeout: TimeoutTypes | None,
) -> RequestSpec[CompatImagesResponse]:
    form = {"prompt": prompt}
    form.update({key: str(value) for key, value in fields.items() if value is not None})
    return RequestSpec(
        "POST",
        "/v1/images/edits",
        model_parser(CompatImagesResponse, "images response"),
        form=form,
        files=list(files),
        headers=_headers(idempotency_key),
        auto_idempotency=True,
        request_id=request_id,
        timeout=call_timeout(timeout),
    )


def _image_list(image: ImageFile | Sequence[ImageFile]) -> list[ImageFile]:
    if isinstance(image, bytes | str | tuple) or not isinstance(image, Sequence):
        return [cast(ImageFile, image)]
    return list(cast(Sequence[ImageFile], image))


class Images(SyncAPIResource):
    def generate(
        self,
        request: RequestLike,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> ImageResponse:
        """``POST /v1/images`` with a ``generate`` request (a prompt string is enough)."""
        spec = native_spec(
            "/v1/images",
            request,
            Operation.GENERATE,
            "images.generate",
            idempotency_key=idempotency_key,
            request_id=request_id,
            timeout=timeout,
        )
        return self._transport.execute(spec)

    def edit(
        self,
        request: ImageRequest | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> ImageResponse:
        """``POST /v1/images`` with an ``edit`` request (``images`` required)."""
        spec = native_spec(
            "/v1/images",
            request,
            Operation.EDIT,
            "images.edit",
            idempotency_key=idempotency_key,
            request_id=request_id,
            timeout=timeout,
        )
        return self._transport.execute(spec)

    def stream(
        self,
        request: RequestLike,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> Stream:
        """``POST /v1/images/stream``: typed events, ``with client.images.stream(...) as s``."""
        spec = stream_spec(
            request, idempotency_key=idempotency_key, request_id=request_id, timeout=timeout
        )
        return self._transport.open_stream(spec)

    def generations(
        self,
        request: CompatibleGenerationRequest | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> CompatImagesResponse:
        """OpenAI-compatible ``POST /v1/images/generations``."""
        spec = generations_spec(
            request, idempotency_key=idempotency_key, request_id=request_id, timeout=timeout
        )
        return self._transport.execute(spec)

    def edits(
        self,
        *,
        image: ImageFile | Sequence[ImageFile],
        prompt: str,
        mask: ImageFile | None = None,
        reference_images: Sequence[ImageFile] = (),
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
        max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
        **fields: Unpack[CompatEditFields],
    ) -> CompatImagesResponse:
        """OpenAI-compatible multipart ``POST /v1/images/edits``."""
        files = multipart_files(
            _image_list(image),
            mask=mask,
            reference_images=reference_images,
            max_bytes=max_input_bytes,
        )
        spec = edits_spec(
            files,
            prompt,
            fields,
            idempotency_key=idempotency_key,
            request_id=request_id,
            timeout=timeout,
        )
        return self._transport.execute(spec)


class AsyncImages(AsyncAPIResource):
    async def generate(
        self,
        request: RequestLike,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> ImageResponse:
        spec = await asyncio.to_thread(
            native_spec,
            "/v1/images",
            request,
            Operation.GENERATE,
            "images.generate",
            idempotency_key=idempotency_key,
            request_id=request_id,
            timeout=timeout,
        )
        return await self._transport.execute(spec)

    async def edit(
        self,
        request: ImageRequest | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> ImageResponse:
        spec = await asyncio.to_thread(
            native_spec,
            "/v1/images",
            request,
            Operation.EDIT,
            "images.edit",
            idempotency_key=idempotency_key,
            request_id=request_id,
            timeout=timeout,
        )
        return await self._transport.execute(spec)

    async def stream(
        self,
        request: RequestLike,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> AsyncStream:
        """``async with await client.images.stream(...) as stream: async for event in …``"""
        spec = await asyncio.to_thread(
            stream_spec,
            request,
            idempotency_key=idempotency_key,
            request_id=request_id,
            timeout=timeout,
        )
        return await self._transport.open_stream(spec)

    async def generations(
        self,
        request: CompatibleGenerationRequest | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
    ) -> CompatImagesResponse:
        spec = generations_spec(
            request, idempotency_key=idempotency_key, request_id=request_id, timeout=timeout
        )
        return await self._transport.execute(spec)

    async def edits(
        self,
        *,
        image: ImageFile | Sequence[ImageFile],
        prompt: str,
        mask: ImageFile | None = None,
        reference_images: Sequence[ImageFile] = (),
        idempotency_key: str | None = None,
        request_id: str | None = None,
        timeout: TimeoutTypes | None = None,
        max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
        **fields: Unpack[CompatEditFields],
    ) -> CompatImagesResponse:
        files = await asyncio.to_thread(
            multipart_files,
            _image_list(image),
            mask=mask,
            reference_images=reference_images,
            max_bytes=max_input_bytes,
        )
        spec = edits_spec(
            files,
            prompt,
            fields,
            idempotency_key=idempotency_key,
            request_id=request_id,
            timeout=timeout,
        )
        return await self._transport.execute(spec)
