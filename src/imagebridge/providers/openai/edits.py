"""The body of one OpenAI Images call: JSON for generation, multipart for edits.

A request without input images goes to ``/images/generations`` as JSON. Edits, and
generation from reference images, go to ``/images/edits`` as multipart: the images in
repeated ``image[]`` parts (a single ``image`` part for models that take one), the mask in
a ``mask`` part. The images arrive loaded and verified by the engine; here they are held
to the model's own bounds (count, bytes, square PNG sources, the mask's format, size and
alpha) before anything is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imagebridge.contract.enums import Operation, OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.inputs import LoadedImage, LoadedInputs
from imagebridge.engine.validation import check_mask
from imagebridge.imaging.inspect import ImageInfo
from imagebridge.providers.openai.models import ModelProfile
from imagebridge.providers.openai.wire import request_fields

__all__ = ["UpstreamCall", "prepare_call"]


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    """One prepared upstream request (bodies are never shown in reprs)."""

    route: str
    json_body: dict[str, Any] | None = field(default=None, repr=False)
    form: dict[str, str] | None = field(default=None, repr=False)
    files: list[tuple[str, tuple[str, bytes, str]]] | None = field(default=None, repr=False)


def prepare_call(
    request: ImageRequest,
    profile: ModelProfile,
    model: str,
    loaded: LoadedInputs,
    *,
    provider: str,
) -> UpstreamCall:
    """The call for ``request``: its fields, and its loaded images within the model's bounds."""
    loaded = loaded.require_for(request, provider)
    sources: list[tuple[str, LoadedImage]] = []
    if request.operation is Operation.EDIT:
        sources.extend((f"images[{i}]", image) for i, image in enumerate(loaded.images))
    sources.extend(
        (f"reference_images[{i}]", image) for i, image in enumerate(loaded.reference_images)
    )
    if not sources:
        fields = request_fields(request, profile, model, with_inputs=False)
        return UpstreamCall(route="generations", json_body=dict(fields))
    limit = max(profile.max_edit_images, profile.max_reference_images)
    if len(sources) > limit:
        raise BridgeError(
            ErrorCode.UNSUPPORTED_CAPABILITY,
            "the model accepts fewer input images in one call",
            provider=provider,
            details={"field": "reference_images", "requested": len(sources), "limit": limit},
        )
    for name, image in sources:
        _check_size(image, name, profile.max_image_bytes, provider)
    if profile.square_png_sources:
        for name, image in sources:
            info = image.info
            if info.format is not OutputFormat.PNG or info.width != info.height:
                raise _input_error("this model edits square PNG images only", name, provider)
    files: list[tuple[str, tuple[str, bytes, str]]] = []
    part = "image" if limit == 1 else "image[]"
    for index, (_, image) in enumerate(sources):
        info = image.info
        files.append(
            (part, (f"image-{index}.{info.format.extension}", image.data, info.media_type))
        )
    if loaded.mask is not None:
        mask = loaded.mask
        _check_size(mask, "mask", profile.max_mask_bytes, provider)
        _check_mask(mask.info, sources[0][1].info, profile, provider)
        files.append(("mask", ("mask.png", mask.data, mask.info.media_type)))
    fields = request_fields(request, profile, model, with_inputs=True)
    form = {key: _form_value(value) for key, value in fields.items()}
    return UpstreamCall(route="edits", form=form, files=files)


def _input_error(message: str, field_name: str, provider: str, **details: Any) -> BridgeError:
    return BridgeError(
        ErrorCode.INPUT, message, provider=provider, details={"field": field_name, **details}
    )


def _check_size(image: LoadedImage, field_name: str, max_bytes: int, provider: str) -> None:
    if len(image.data) > max_bytes:
        raise _input_error(
            "input image is larger than the model accepts",
            field_name,
            provider,
            maximum_bytes=max_bytes,
        )


def _check_mask(mask: ImageInfo, source: ImageInfo, profile: ModelProfile, provider: str) -> None:
    """The API's own rule (a PNG), then the engine's shared mask rule (size, alpha)."""
    if mask.format is not OutputFormat.PNG:
        raise _input_error("the mask must be a PNG image", "mask", provider)
    try:
        check_mask(mask, source, needs_alpha=profile.mask_needs_alpha)
    except BridgeError as error:
        error.provider = provider
        raise


def _form_value(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
