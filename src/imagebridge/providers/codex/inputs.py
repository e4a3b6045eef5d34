"""Input images for the Codex providers: bounded before any upstream call.

Edit sources come first, then reference images. The engine has loaded and verified each
one (local roots, remote policy, full inspection, declared media type); here they are
held to the Codex limits: a count per kind, bytes per image and bytes for the whole
request. Nothing is sent until every input has passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from imagebridge.contract.enums import Operation
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.inputs import LoadedImage, LoadedInputs
from imagebridge.providers.codex.wire import InputImage

__all__ = ["CodexInputBounds", "CodexInputs", "codex_inputs"]

MiB: Final = 1024 * 1024
CODEX_MASK_CODE: Final = "CODEX_RASTER_MASK_UNSUPPORTED"


@dataclass(frozen=True, slots=True)
class CodexInputBounds:
    """How many input images one call may carry, and how large they may be."""

    max_count: int = 5
    """Per kind: edit sources, and reference images."""
    max_total_count: int = 10
    """Sources and references together (the images route takes 5)."""
    max_bytes_each: int = 32 * MiB
    max_bytes_total: int = 64 * MiB


@dataclass(frozen=True, slots=True)
class CodexInputs:
    """Verified ``(media type, bytes)`` pairs, sources first."""

    sources: tuple[InputImage, ...] = ()
    references: tuple[InputImage, ...] = ()

    @property
    def present(self) -> bool:
        return bool(self.sources or self.references)

    @property
    def all(self) -> tuple[InputImage, ...]:
        return (*self.sources, *self.references)

    def __repr__(self) -> str:  # never print image bytes
        return f"CodexInputs(sources={len(self.sources)}, references={len(self.references)})"


def _error(code: ErrorCode, message: str, provider: str, **details: object) -> BridgeError:
    return BridgeError(code, message, provider=provider, details=details)


def _check_counts(request: ImageRequest, bounds: CodexInputBounds, provider: str) -> None:
    if request.mask is not None:
        raise _error(
            ErrorCode.UNSUPPORTED_CAPABILITY,
            "provider does not support edit masks",
            provider,
            field="mask",
            codex_code=CODEX_MASK_CODE,
        )
    sources = len(request.edit_images) if request.operation is Operation.EDIT else 0
    references = len(request.reference_images)
    for field, count in (("images", sources), ("reference_images", references)):
        if count > bounds.max_count:
            raise _error(
                ErrorCode.UNSUPPORTED_CAPABILITY,
                "provider does not accept this many input images",
                provider,
                field=field,
                requested=count,
                supported=bounds.max_count,
            )
    if sources + references > bounds.max_total_count:
        raise _error(
            ErrorCode.UNSUPPORTED_CAPABILITY,
            "provider does not accept this many input images in one call",
            provider,
            field="reference_images",
            requested=sources + references,
            supported=bounds.max_total_count,
        )


def codex_inputs(
    request: ImageRequest,
    loaded: LoadedInputs,
    bounds: CodexInputBounds,
    *,
    provider: str,
) -> CodexInputs:
    """The loaded inputs of ``request`` as Codex sends them, within the Codex bounds."""
    _check_counts(request, bounds, provider)
    loaded = loaded.require_for(request, provider)
    named: list[tuple[str, LoadedImage, bool]] = []
    if request.operation is Operation.EDIT:
        named.extend((f"images[{i}]", image, True) for i, image in enumerate(loaded.images))
    named.extend(
        (f"reference_images[{i}]", image, False) for i, image in enumerate(loaded.reference_images)
    )
    sources: list[InputImage] = []
    references: list[InputImage] = []
    total = 0
    for field, image, is_source in named:
        size = len(image.data)
        if size > bounds.max_bytes_each:
            raise _error(
                ErrorCode.INPUT,
                "an input image is larger than the provider accepts",
                provider,
                field=field,
                maximum_bytes=bounds.max_bytes_each,
            )
        total += size
        if total > bounds.max_bytes_total:
            raise _error(
                ErrorCode.INPUT,
                "the input images together are larger than the provider accepts",
                provider,
                field=field,
                maximum_bytes=bounds.max_bytes_total,
            )
        pair = (image.info.media_type, image.data)
        (sources if is_source else references).append(pair)
    return CodexInputs(tuple(sources), tuple(references))
