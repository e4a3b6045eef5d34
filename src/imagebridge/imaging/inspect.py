"""Bounded image inspection: sniff, read header dimensions, fully decode, checksum.

Every image the bridge accepts or emits passes :func:`inspect_image` first. The order
matters: the encoded size is checked, the format is sniffed from magic bytes, the
dimensions are read from the container header *without allocating pixels* and checked
against :class:`ImageLimits`, and only then does Pillow decode the whole image, so a
tiny file that claims 100 000 000 pixels is refused before any pixel buffer exists.

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
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from PIL import Image, JpegImagePlugin, PngImagePlugin, WebPImagePlugin

from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "MAX_THUMBNAIL_EDGE",
    "MIN_THUMBNAIL_EDGE",
    "ImageInfo",
    "ImageLimits",
    "ainspect_image",
    "amake_thumbnail",
    "decode_verified",
    "describe_image",
    "inspect_image",
    "make_thumbnail",
    "sniff_format",
]

MiB = 1024 * 1024
MIN_THUMBNAIL_EDGE = 32
MAX_THUMBNAIL_EDGE = 2048
#: Worst-case bytes per decoded pixel in Pillow's in-memory layout (RGBA/RGBX/CMYK).
_DECODED_BYTES_PER_PIXEL = 4
#: Bounds on container walking, so a hostile file cannot make header parsing slow.
_MAX_PNG_CHUNKS = 100_000
_MAX_JPEG_SEGMENTS = 4_096

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


def _input_error(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.INPUT, message, details=details or None)


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


# -- header dimensions (no pixel allocation) --------------------------------------------


def _png_dimensions(data: bytes) -> tuple[int, int]:
    """Width/height from IHDR, after proving the chunk stream is complete.

    Pillow decodes a PNG whose IEND chunk is cut off, so the framing and CRC of every
    chunk up to IEND are checked here (CRC in C, a few ms for the largest images).
    """
    if len(data) < 33 or data[12:16] != b"IHDR" or struct.unpack(">I", data[8:12])[0] != 13:
        raise _input_error("could not read image dimensions")
    width, height = struct.unpack(">II", data[16:24])
    position = 8
    for _ in range(_MAX_PNG_CHUNKS):
        if position + 12 > len(data):
            raise _input_error("image payload is malformed or incomplete")
        (length,) = struct.unpack(">I", data[position : position + 4])
        end = position + 12 + length
        if length > 0x7FFFFFFF or end > len(data):
            raise _input_error("image payload is malformed or incomplete")
        kind = data[position + 4 : position + 8]
        (expected_crc,) = struct.unpack(">I", data[end - 4 : end])
        if zlib.crc32(data[position + 4 : end - 4]) != expected_crc:
            raise _input_error("image payload is malformed or incomplete")
        if kind == b"IEND":
            return width, height
        position = end
    raise _input_error("image container has too many chunks")


_JPEG_SOF = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)


def _jpeg_dimensions(data: bytes) -> tuple[int, int]:
    position = 2
    for _ in range(_MAX_JPEG_SEGMENTS):
        if position >= len(data) or data[position] != 0xFF:
            break
        while position < len(data) and data[position] == 0xFF:
            position += 1
        if position >= len(data):
            break
        marker = data[position]
        position += 1
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            continue
        if marker in (0xD9, 0xDA) or position + 2 > len(data):
            break
        (length,) = struct.unpack(">H", data[position : position + 2])
        if length < 2 or position + length > len(data):
            break
        if marker in _JPEG_SOF:
            if length < 7:
                break
            height, width = struct.unpack(">HH", data[position + 3 : position + 7])
            return width, height
        position += length
    raise _input_error("could not read image dimensions")


def _webp_dimensions(data: bytes) -> tuple[int, int]:
    if len(data) < 30:
        raise _input_error("could not read image dimensions")
    kind = data[12:16]
    if kind == b"VP8 ":
        if data[23:26] != b"\x9d\x01\x2a":
            raise _input_error("could not read image dimensions")
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L":
        if data[20] != 0x2F:
            raise _input_error("could not read image dimensions")
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    raise _input_error("could not read image dimensions")


def _header_dimensions(data: bytes, image_format: OutputFormat) -> tuple[int, int]:
    if image_format is OutputFormat.PNG:
        return _png_dimensions(data)
    if image_format is OutputFormat.JPEG:
        return _jpeg_dimensions(data)
    return _webp_dimensions(data)


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
        raise _input_error(
            "image dimensions exceed configured limits",
            width=width,
            height=height,
            max_edge=limits.max_edge,
            max_pixels=limits.max_pixels,
        )


def _has_alpha(image: Image.Image) -> bool:
    return image.mode in _ALPHA_MODES or "transparency" in image.info


def _opened(data: bytes, limits: ImageLimits) -> tuple[OutputFormat, Image.Image]:
    """Size, format, header dimensions and limits checked; the image opened, not decoded."""
    if not data or len(data) > limits.max_encoded_bytes:
        raise _input_error(
            "encoded image exceeds the configured size limit",
            max_encoded_bytes=limits.max_encoded_bytes,
        )
    image_format = sniff_format(data)
    if image_format is None:
        other = _sniff_other(data)
        if other is not None:
            raise _input_error("input image format is not enabled", detected_format=other)
        raise _input_error("input is not a supported PNG, JPEG, or WebP image")
    width, height = _header_dimensions(data, image_format)
    _check_limits(width, height, limits)
    try:
        image = _PLUGINS[image_format](io.BytesIO(data))
    except Exception as exc:  # any decoder failure is a malformed input, never a crash
        raise _input_error("image payload is malformed or incomplete") from exc
    if image.size != (width, height):
        image.close()
        raise _input_error("image headers and decoded dimensions disagree")
    return image_format, image


def _info(
    data: bytes, image_format: OutputFormat, image: Image.Image, sha256: str | None = None
) -> ImageInfo:
    return ImageInfo(
        format=image_format,
        width=image.size[0],
        height=image.size[1],
        bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest() if sha256 is None else sha256,
        has_alpha=_has_alpha(image),
    )


def decode_verified(
    data: bytes, limits: ImageLimits, *, sha256: str | None = None
) -> tuple[ImageInfo, Image.Image]:
    """Run the full inspection and hand back the decoded image as well.

    Callers that need pixels (chroma key, thumbnails, alpha checks) use this so the
    image is decoded once, under the same limits as :func:`inspect_image`. ``sha256``
    is a digest already computed in this process over this very ``data`` (bytes are
    immutable): it is reused instead of hashing the payload a second time.
    """
    image_format, image = _opened(data, limits)
    size = image.size
    try:
        image.load()
    except Exception as exc:  # any decoder failure is a malformed input, never a crash
        image.close()
        raise _input_error("image payload is malformed or incomplete") from exc
    if image.size != size:
        image.close()
        raise _input_error("image headers and decoded dimensions disagree")
    return _info(data, image_format, image, sha256), image


def describe_image(data: bytes, limits: ImageLimits | None = None) -> ImageInfo:
    """Everything :func:`inspect_image` proves except the pixel decode.

    For a provider describing an output that the materializer is about to verify in
    full anyway: the container, the header dimensions against ``limits``, the checksum
    and the alpha channel come out the same, but the pixels (the largest single cost of
    an image, bench/gateway.py) are decoded once per image, not twice. Never a
    substitute for :func:`inspect_image` where bytes are accepted.
    """
    image_format, image = _opened(data, limits or ImageLimits())
    try:
        return _info(data, image_format, image)
    finally:
        image.close()


def inspect_image(
    data: bytes, limits: ImageLimits | None = None, *, sha256: str | None = None
) -> ImageInfo:
    """Fully verify ``data`` as a PNG, JPEG or WebP image within ``limits``.

    ``sha256``: see :func:`decode_verified`.
    """
    info, image = decode_verified(data, limits or ImageLimits(), sha256=sha256)
    image.close()
    return info


def make_thumbnail(data: bytes, edge: int, limits: ImageLimits | None = None) -> bytes:
    """A PNG that fits inside ``edge``×``edge``, aspect kept, never upscaled."""
    limits = limits or ImageLimits()
    if (
        isinstance(edge, bool)
        or not isinstance(edge, int)
        or not MIN_THUMBNAIL_EDGE <= edge <= MAX_THUMBNAIL_EDGE
    ):
        raise _input_error(
            "thumbnail edge must be between 32 and 2048 pixels",
            field="edge",
            minimum=MIN_THUMBNAIL_EDGE,
            maximum=MAX_THUMBNAIL_EDGE,
        )
    info, image = decode_verified(data, limits)
    try:
        if image.mode not in ("1", "L", "LA", "RGB", "RGBA"):
            image = image.convert("RGBA" if info.has_alpha else "RGB")
        image.thumbnail((edge, edge))
        output = io.BytesIO()
        image.save(output, format="PNG")
    except Exception as exc:
        raise _input_error("thumbnail could not be encoded") from exc
    finally:
        image.close()
    encoded = output.getvalue()
    inspect_image(
        encoded,
        ImageLimits(
            max_encoded_bytes=limits.max_encoded_bytes,
            max_edge=edge,
            max_pixels=edge * edge,
            max_decode_alloc=limits.max_decode_alloc,
        ),
    )
    return encoded


async def ainspect_image(data: bytes, limits: ImageLimits | None = None) -> ImageInfo:
    """:func:`inspect_image` in a worker thread."""
    return await asyncio.to_thread(inspect_image, data, limits)


async def amake_thumbnail(data: bytes, edge: int, limits: ImageLimits | None = None) -> bytes:
    """:func:`make_thumbnail` in a worker thread."""
    return await asyncio.to_thread(make_thumbnail, data, edge, limits)
