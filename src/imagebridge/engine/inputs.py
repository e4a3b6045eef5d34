"""The input port: a request's input images, loaded and verified once, before any provider.

The engine loads every input of a logical request through an :class:`ImageInputLoader`
(the application hands it one built from ``[inputs]`` and ``[artifacts.image]``) and gives
providers the result as :class:`LoadedInputs` on their context. A provider never loads an
input itself; it holds the loaded images to its own bounds (counts, bytes, formats).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageInput, ImageRequest

if TYPE_CHECKING:  # the pixel layer (Pillow) stays unloaded for the interface alone
    from imagebridge.imaging.inspect import ImageInfo

__all__ = ["ImageInputLoader", "LoadedImage", "LoadedInputs", "load_request_inputs"]


@dataclass(frozen=True, slots=True)
class LoadedImage:
    """Verified image bytes plus what inspection proved, and the caller's logical name."""

    data: bytes
    info: ImageInfo
    filename: str | None = None

    def __repr__(self) -> str:  # never print image bytes
        return f"LoadedImage(info={self.info!r}, filename={self.filename!r})"


class ImageInputLoader(Protocol):
    """Loads one ``ImageInput`` (file, URL, data URL, base64) into a verified image.

    Implementations enforce where inputs may come from (local roots, the remote fetch
    policy), the image bounds, full inspection and the declared media type; failures are
    ``BridgeError(code=input)``. Blocking work must not run on the event loop.
    """

    async def aload_input(self, value: ImageInput, /) -> LoadedImage: ...


@dataclass(frozen=True, slots=True)
class LoadedInputs:
    """A request's inputs by slot: edit ``images`` in order, ``mask``, ``reference_images``."""

    images: tuple[LoadedImage, ...] = ()
    mask: LoadedImage | None = None
    reference_images: tuple[LoadedImage, ...] = ()

    @property
    def present(self) -> bool:
        return bool(self.images or self.reference_images or self.mask is not None)

    def named(self) -> Iterator[tuple[str, LoadedImage]]:
        """Every image with the request field it came from: images, mask, references."""
        for index, image in enumerate(self.images):
            yield f"images[{index}]", image
        if self.mask is not None:
            yield "mask", self.mask
        for index, image in enumerate(self.reference_images):
            yield f"reference_images[{index}]", image

    def require_for(self, request: ImageRequest, provider: str) -> LoadedInputs:
        """These inputs, once it is certain they are ``request``'s (a wiring fault if not).

        The engine loads before it calls a provider; a provider called another way (with
        inputs missing) must not send a request without its images.
        """
        if (
            len(self.images) != len(request.edit_images)
            or (self.mask is None) != (request.mask is None)
            or len(self.reference_images) != len(request.reference_images)
        ):
            raise BridgeError(
                ErrorCode.INTERNAL,
                "the request's input images were not loaded before the provider ran",
                provider=provider,
            )
        return self

    def __repr__(self) -> str:  # never print image bytes
        total = sum(len(image.data) for _, image in self.named())
        return (
            f"LoadedInputs(images={len(self.images)}, mask={self.mask is not None}, "
            f"reference_images={len(self.reference_images)}, bytes={total})"
        )


async def load_request_inputs(request: ImageRequest, loader: ImageInputLoader) -> LoadedInputs:
    """Load every input of ``request``, one at a time (so memory stays within its bounds).

    A failure names the input in ``details.field`` (``images[0]``, ``mask``,
    ``reference_images[1]``) and stops: nothing after it is loaded.
    """
    images: list[LoadedImage] = []
    references: list[LoadedImage] = []
    mask: LoadedImage | None = None
    for field, item in request.all_inputs():
        loaded = await _load(loader, item, field)
        if field == "mask":
            mask = loaded
        elif field.startswith("images["):
            images.append(loaded)
        else:
            references.append(loaded)
    return LoadedInputs(tuple(images), mask, tuple(references))


async def _load(loader: ImageInputLoader, item: ImageInput, field: str) -> LoadedImage:
    try:
        return await loader.aload_input(item)
    except BridgeError as error:
        error.details.setdefault("field", field)
        raise
