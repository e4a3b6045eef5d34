"""Bounded image inspection: sniff, read header dimensions, fully decode, checksum.

Every image the bridge accepts or emits passes :func:`inspect_image` first. The order
matters: the encoded size is checked, the format is sniffed from magic bytes, the
dimensions are read from the container header *without allocating pixels* and checked
against :class:`ImageLimits`, and only then does Pillow decode the whole image, so a
tiny file that claims 100 000 000 pixels is refused before any pixel buffer exists.

The header dimensions come from :mod:`imagebridge.imaging.headers`, a plain PNG's pixels
are proven by :mod:`imagebridge.imaging.scanlines`; this module puts the steps in order.

Pillow's ``Image.open`` is never used: it guesses formats and applies its own global
``MAX_IMAGE_PIXELS`` policy (with warnings). We construct the format's plugin class for
the sniffed format directly and rely on our own limits.

Failures raise ``BridgeError(code=input)``; callers that verify their own outputs
re-code them (artifact, protocol).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from PIL import Image, JpegImagePlugin, PngImagePlugin, WebPImagePlugin

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.headers import PngLayout, header_dimensions, input_error
from imagebridge.imaging.scanlines import png_pixels_verified

__all__ = [
    "ImageInfo",
    "ImageLimits",
    "ainspect_image",
    "decode_verified",
    "examine_image",
    "inspect_image",
    "sniff_format",
]

MiB = 1024 * 1024
#: Worst-case bytes per decoded pixel in Pillow's in-memory layout (RGBA/RGBX/CMYK).
_DECODED_BYTES_PER_PIXEL = 4

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """Bounds applied to every encoded image (config ``artifacts.image``)."""

    max_encoded_bytes: int = 32 * MiB
    max_edge: int = 16_384
    max_pixels: int = 64 * MiB
    max_decode_alloc: int = 256 * MiB

    def __post_init__(self) -> None:
        for name in ("max_encoded_bytes", "max_edge", "max_pixels", "max_decode_alloc"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    f"image limit {name} must be a positive integer",
                    details={"field": f"artifacts.image.{name}"},
                )


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """What a full inspection proved about one encoded image."""

    format: OutputFormat
    width: int
    height: int
    bytes: int
    sha256: str
    has_alpha: bool

    @property
    def media_type(self) -> str:
        return self.format.media_type

    def to_dict(self) -> dict[str, Any]:
        """The wire fields of a generated image (``format, width, height, bytes, sha256``)."""
        return {
            "format": self.format.value,
            "width": self.width,
            "height": self.height,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }


# -- sniffing ---------------------------------------------------------------------------


def sniff_format(data: bytes) -> OutputFormat | None:
    """PNG, JPEG or WebP from magic bytes alone; ``None`` for anything else."""
    if data.startswith(_PNG_SIGNATURE):
        return OutputFormat.PNG
    if data.startswith(b"\xff\xd8\xff"):
        return OutputFormat.JPEG
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return OutputFormat.WEBP
    return None


def _sniff_other(data: bytes) -> str | None:
    """Name of a recognised image format the bridge does not accept."""
    head = data[:32]
    checks: tuple[tuple[str, bool], ...] = (
        ("gif", head.startswith((b"GIF87a", b"GIF89a"))),
        ("bmp", head.startswith(b"BM") and len(data) >= 26),
        ("tiff", head.startswith((b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"))),
        ("ico", head.startswith((b"\x00\x00\x01\x00", b"\x00\x00\x02\x00"))),
        ("avif", head[4:12] in (b"ftypavif", b"ftypavis")),
        ("heif", head[4:8] == b"ftyp" and head[8:12] in (b"heic", b"heix", b"mif1", b"msf1")),
        ("jxl", head.startswith((b"\xff\x0a", b"\x00\x00\x00\x0cJXL \r\n\x87\n"))),
        ("psd", head.startswith(b"8BPS")),
        ("qoi", head.startswith(b"qoif")),
        ("dds", head.startswith(b"DDS ")),
        ("exr", head.startswith(b"\x76\x2f\x31\x01")),
        ("hdr", head.startswith((b"#?RADIANCE", b"#?RGBE"))),
        ("farbfeld", head.startswith(b"farbfeld")),
        (
            "pnm",
            len(head) >= 3
            and head[0:1] == b"P"
            and head[1:2] in b"1234567"
            and head[2:3] in b" \t\r\n",
        ),
    )
    for name, matched in checks:
        if matched:
            return name
    return None


# -- full inspection ----------------------------------------------------------------------

_PLUGINS: dict[OutputFormat, type[Any]] = {
    OutputFormat.PNG: PngImagePlugin.PngImageFile,
    OutputFormat.JPEG: JpegImagePlugin.JpegImageFile,
    OutputFormat.WEBP: WebPImagePlugin.WebPImageFile,
}


def _check_limits(width: int, height: int, limits: ImageLimits) -> None:
    pixels = width * height
    if (
        width <= 0
        or height <= 0
        or width > limits.max_edge
        or height > limits.max_edge
        or pixels > limits.max_pixels
        or pixels * _DECODED_BYTES_PER_PIXEL > limits.max_decode_alloc
    ):
        raise input_error(
            "image dimensions exceed configured limits",
            width=width,
            height=height,
            max_edge=limits.max_edge,
            max_pixels=limits.max_pixels,
        )


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in _ALPHA_MODES or "transparency" in image.info


@dataclass(slots=True)
class _Opened:
    format: OutputFormat
    image: Image.Image
    png: PngLayout | None


def _opened(data: bytes, limits: ImageLimits) -> _Opened:
    """Size, format, header dimensions and limits checked; the image opened, not decoded."""
    if not data or len(data) > limits.max_encoded_bytes:
        raise input_error(
            "encoded image exceeds the configured size limit",
            max_encoded_bytes=limits.max_encoded_bytes,
        )
    image_format = sniff_format(data)
    if image_format is None:
        other = _sniff_other(data)
        if other is not None:
            raise input_error("input image format is not enabled", detected_format=other)
        raise input_error("input is not a supported PNG, JPEG, or WebP image")
    width, height, png = header_dimensions(data, image_format)
    _check_limits(width, height, limits)
    try:
        image = _PLUGINS[image_format](io.BytesIO(data))
    except Exception as exc:  # any decoder failure is a malformed input, never a crash
        raise input_error("image payload is malformed or incomplete") from exc
    if image.size != (width, height):
        image.close()
        raise input_error("image headers and decoded dimensions disagree")
    return _Opened(image_format, image, png)


def _load(image: Image.Image) -> None:
    """Decode every pixel of an opened image; on failure the image is closed."""
    size = image.size
    try:
        image.load()
    except Exception as exc:  # any decoder failure is a malformed input, never a crash
        image.close()
        raise input_error("image payload is malformed or incomplete") from exc
    if image.size != size:
        image.close()
        raise input_error("image headers and decoded dimensions disagree")


def _info(
    data: bytes,
    image_format: OutputFormat,
    image: Image.Image,
    sha256: str | Callable[[], str] | None = None,
) -> ImageInfo:
    if callable(sha256):
        sha256 = sha256()
    return ImageInfo(
        format=image_format,
        width=image.size[0],
        height=image.size[1],
        bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest() if sha256 is None else sha256,
        has_alpha=_has_alpha(image),
    )


DIGEST_ALONGSIDE_BYTES = 512 * 1024
"""Images at least this large are hashed in a second thread while their pixels are checked."""
_DIGESTS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="imagebridge-sha256")


def _digest_alongside(data: bytes, sha256: str | None) -> str | Callable[[], str] | None:
    """``sha256``, or the digest of ``data`` on its way in another thread (its result).

    hashlib releases the GIL, so the 1.7 ms SHA-256 of a 3 MB image runs beside the
    ~7 ms scanline check instead of after it (bench/gateway.py c1). Two threads at most;
    a digest of an image whose check fails is finished and dropped.
    """
    if sha256 is not None or len(data) < DIGEST_ALONGSIDE_BYTES:
        return sha256
    return _DIGESTS.submit(_hexdigest, data).result


def _hexdigest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode_verified(
    data: bytes, limits: ImageLimits, *, sha256: str | None = None
) -> tuple[ImageInfo, Image.Image]:
    """Run the full inspection and hand back the decoded image as well.

    Callers that need pixels (chroma key, thumbnails, alpha checks) use this so the
    image is decoded once, under the same limits as :func:`inspect_image`. ``sha256``
    is a digest already computed in this process over this very ``data`` (bytes are
    immutable): it is reused instead of hashing the payload a second time.
    """
    opened = _opened(data, limits)
    _load(opened.image)
    return _info(data, opened.format, opened.image, sha256), opened.image


def examine_image(
    data: bytes, limits: ImageLimits, *, max_decoded_pixels: int
) -> tuple[ImageInfo, bool]:
    """The facts of ``data``, and whether they come from a full verification.

    The container, the header dimensions against ``limits``, the checksum and the alpha
    channel are always checked, as :func:`inspect_image` does. The pixels are verified
    too (the flag is ``True``) when that builds no pixel buffer (a plain PNG's scanline
    check) or one of at most ``max_decoded_pixels`` pixels; otherwise the flag is
    ``False`` and the caller leaves the full verification to a later
    :func:`inspect_image`, when less of the image's other copies is alive.
    """
    opened = _opened(data, limits)
    image = opened.image
    try:
        digest = _digest_alongside(data, None)
        if opened.png is not None and png_pixels_verified(data, opened.png):
            return _info(data, opened.format, image, digest), True
        if image.size[0] * image.size[1] > max_decoded_pixels:
            return _info(data, opened.format, image, digest), False
        _load(image)
        return _info(data, opened.format, image, digest), True
    finally:
        image.close()


def inspect_image(
    data: bytes,
    limits: ImageLimits | None = None,
    *,
    sha256: str | None = None,
    before_pixel_buffer: Callable[[], object] | None = None,
) -> ImageInfo:
    """Fully verify ``data`` as a PNG, JPEG or WebP image within ``limits``.

    Every pixel is decoded, by Pillow or, for a plain PNG, by inflating and checking every
    scanline without building the image
    (:func:`imagebridge.imaging.scanlines.png_pixels_verified`: the same verdict, in
    bounded memory). ``sha256``: see :func:`decode_verified`. ``before_pixel_buffer``
    is called just before Pillow allocates the pixels, if it does: a caller keeping another
    copy of the image (its base64) alive only while that is cheap releases it there.
    """
    opened = _opened(data, limits or ImageLimits())
    image = opened.image
    try:
        digest = _digest_alongside(data, sha256)
        if opened.png is None or not png_pixels_verified(data, opened.png):
            if before_pixel_buffer is not None:
                before_pixel_buffer()
            _load(image)
        return _info(data, opened.format, image, digest)
    finally:
        image.close()


async def ainspect_image(data: bytes, limits: ImageLimits | None = None) -> ImageInfo:
    """:func:`inspect_image` in a worker thread."""
    return await asyncio.to_thread(inspect_image, data, limits)
