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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import deflate
from PIL import Image, JpegImagePlugin, PngImagePlugin, WebPImagePlugin
from zlib_ng import zlib_ng

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
    "examine_image",
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


@dataclass(frozen=True, slots=True)
class _PngLayout:
    """What one walk over a PNG's chunks (framing and every CRC checked) found."""

    width: int
    height: int
    idat: tuple[tuple[int, int], ...]
    """``(start, end)`` of every IDAT chunk's data, in file order."""
    plain: bool
    """The IDAT chunks are consecutive, IEND follows them directly, no APNG chunk and a
    PLTE wherever a palette is needed: the layout :func:`_png_pixels_verified` decides on."""


def _png_layout(data: bytes) -> _PngLayout:
    """Dimensions from IHDR, after proving the chunk stream is complete.

    Pillow decodes a PNG whose IEND chunk is cut off, so the framing and CRC of every
    chunk up to IEND are checked here (:func:`_crc32`: 0.07 ms for a 3 MB PNG).
    """
    if len(data) < 33 or data[12:16] != b"IHDR" or struct.unpack(">I", data[8:12])[0] != 13:
        raise _input_error("could not read image dimensions")
    width, height = struct.unpack(">II", data[16:24])
    view = memoryview(data)
    idat: list[tuple[int, int]] = []
    plain = True
    palette = False
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
        if _crc32(view[position + 4 : end - 4]) != expected_crc:
            raise _input_error("image payload is malformed or incomplete")
        if kind == b"IEND":
            return _PngLayout(width, height, tuple(idat), plain and bool(idat))
        if kind == b"IDAT":
            if idat and idat[-1][1] + 4 != position:
                plain = False  # IDAT chunks split by another chunk
            idat.append((position + 8, end - 4))
        elif idat or kind in (b"acTL", b"fcTL", b"fdAT"):
            plain = False  # a chunk after the image data, or an animation
        elif kind == b"PLTE":
            palette = True
        if kind == b"IDAT" and data[25] == 3 and not palette:
            plain = False
        position = end
    raise _input_error("image container has too many chunks")


_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
"""Samples per pixel of each PNG colour type."""
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_PNG_FILTER_TYPES = bytes(range(5))
_ZLIB_ERROR: type[Exception] = zlib_ng.error  # type: ignore[assignment]  # stub: an instance
_INFLATE_INPUT = 256 * 1024
"""Compressed bytes fed to zlib at a time (what it has not consumed is copied once)."""
_INFLATE_OUTPUT = 1024 * 1024
"""Decompressed bytes alive at a time while a large PNG's scanlines are checked."""
WHOLE_INFLATE_MAX_BYTES = 8 * 1024 * 1024
"""Image data that inflates to less than this (a 1536×1024 RGBA image: 6.3 MB) is joined
(a copy of its compressed size: 0.06 ms for 3 MB) and inflated in one call
(:func:`_whole_rows_valid`). An inflate releases the GIL, and while another thread runs
Python each re-take waits up to the interpreter's 5 ms switch interval: chunk by chunk
(Pillow writes 64 KiB IDAT chunks, 49 for bench/gateway.py's 1024² noise PNG) the check
took 105-112 ms beside a thread running Python, in one zlib call 44 ms, in one libdeflate
call 11 ms (alone 7.7 -> 6.7 ms). Larger images keep zlib's bounded steps (the memory
bound of bench/memory.py)."""


def _png_pixels_verified(data: bytes, layout: _PngLayout) -> bool:
    """``True`` proves every scanline of this PNG decodes; ``False`` leaves it to Pillow.

    A non-interlaced PNG's image data is one zlib stream holding, for each of ``height``
    rows, a filter-type byte (0–4) and the row's packed samples. Inflating that whole
    stream (zlib checks every Huffman code, distance and the Adler-32), finding that it
    ends exactly after the last row and that every filter byte is valid is all a decoder
    can fail on: unfiltering and unpacking such rows cannot fail. That inflate is also
    most of Pillow's decode time; done here it builds no pixel buffer (Pillow keeps RGB at
    4 bytes a pixel), holds a small image's rows (under :data:`WHOLE_INFLATE_MAX_BYTES`)
    or :data:`_INFLATE_OUTPUT` bytes of a larger one's, and runs with the GIL released
    (libdeflate or zlib-ng: 20–30% faster than the stdlib's zlib here). Every
    chunk's CRC was checked by :func:`_png_layout`. Anything else (interlacing, an unusual
    chunk layout, any anomaly in the stream) returns ``False`` and Pillow's full decode
    decides, so the verdict is always the one Pillow would give.
    """
    if not layout.plain:
        return False
    depth, color, compression, filtering, interlace = data[24:29]
    channels = _PNG_CHANNELS.get(color)
    if channels is None or depth not in _PNG_DEPTHS[color] or compression or filtering:
        return False
    if interlace:
        return False
    stride = 1 + (layout.width * channels * depth + 7) // 8
    expected = stride * layout.height
    view = memoryview(data)
    if expected < WHOLE_INFLATE_MAX_BYTES:
        idat = b"".join(view[start:end] for start, end in layout.idat)
        return _whole_rows_valid(idat, stride, expected)
    inflater = zlib_ng.decompressobj()
    produced = 0
    pieces = (
        view[offset : min(end, offset + _INFLATE_INPUT)]
        for start, end in layout.idat
        for offset in range(start, end, _INFLATE_INPUT)
    )
    try:
        for piece in pieces:
            pending: bytes | memoryview = piece
            while pending:
                if inflater.eof:
                    return False  # image data after the end of the zlib stream
                rows = inflater.decompress(pending, _INFLATE_OUTPUT)
                pending = inflater.unconsumed_tail
                if produced + len(rows) > expected:
                    return False
                if rows[-produced % stride :: stride].translate(None, _PNG_FILTER_TYPES):
                    return False  # a filter type other than 0-4
                produced += len(rows)
    except _ZLIB_ERROR:
        return False
    return inflater.eof and not inflater.unused_data and produced == expected


def _whole_rows_valid(stream: bytes, stride: int, expected: int) -> bool:
    """The check of :func:`_png_pixels_verified` for image data inflating to ``expected``
    bytes, under :data:`WHOLE_INFLATE_MAX_BYTES`: one libdeflate call into a buffer of
    exactly that size.

    One call releases and retakes the GIL once. zlib's output buffer grows block by block,
    five inflate calls for a 1024² RGB image, and each retake waits up to the 5 ms switch
    interval while another thread runs Python: beside a spinning thread 43 -> 11 ms (alone
    7.2 -> 6.7 ms). libdeflate checks every code, distance and the Adler-32 as zlib does;
    more output than ``expected`` fails and Pillow decides. Bytes after the end of the
    zlib stream are ignored, as Pillow ignores them (the chunked path hands such an image
    to Pillow, which accepts it).
    """
    try:
        rows = deflate.zlib_decompress(stream, expected)
    except deflate.DeflateError:
        return False
    return len(rows) == expected and not rows[::stride].translate(None, _PNG_FILTER_TYPES)


_CRC_SLICE = 1024 * 1024
"""A chunk's CRC-32 is computed this much at a time, so the GIL is never held long."""


def _crc32(data: memoryview) -> int:
    """CRC-32 of ``data`` keeping the GIL: libdeflate's takes ~23 µs a MiB.

    zlib's releases the GIL for anything over 5 KiB and retakes it after: a 3 MB PNG's 49
    chunks cost 0.07 ms alone but 45-62 ms beside a thread running Python (each retake
    waits up to the 5 ms switch interval).
    """
    crc = 0
    for offset in range(0, len(data), _CRC_SLICE):
        crc = deflate.crc32(data[offset : offset + _CRC_SLICE], crc)
    return crc


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


def _header_dimensions(
    data: bytes, image_format: OutputFormat
) -> tuple[int, int, _PngLayout | None]:
    if image_format is OutputFormat.PNG:
        layout = _png_layout(data)
        return layout.width, layout.height, layout
    if image_format is OutputFormat.JPEG:
        return (*_jpeg_dimensions(data), None)
    return (*_webp_dimensions(data), None)


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


@dataclass(slots=True)
class _Opened:
    format: OutputFormat
    image: Image.Image
    png: _PngLayout | None


def _opened(data: bytes, limits: ImageLimits) -> _Opened:
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
    width, height, png = _header_dimensions(data, image_format)
    _check_limits(width, height, limits)
    try:
        image = _PLUGINS[image_format](io.BytesIO(data))
    except Exception as exc:  # any decoder failure is a malformed input, never a crash
        raise _input_error("image payload is malformed or incomplete") from exc
    if image.size != (width, height):
        image.close()
        raise _input_error("image headers and decoded dimensions disagree")
    return _Opened(image_format, image, png)


def _load(image: Image.Image) -> None:
    """Decode every pixel of an opened image; on failure the image is closed."""
    size = image.size
    try:
        image.load()
    except Exception as exc:  # any decoder failure is a malformed input, never a crash
        image.close()
        raise _input_error("image payload is malformed or incomplete") from exc
    if image.size != size:
        image.close()
        raise _input_error("image headers and decoded dimensions disagree")


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
        if opened.png is not None and _png_pixels_verified(data, opened.png):
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
    scanline without building the image (:func:`_png_pixels_verified`: the same verdict,
    in bounded memory). ``sha256``: see :func:`decode_verified`. ``before_pixel_buffer``
    is called just before Pillow allocates the pixels, if it does: a caller keeping another
    copy of the image (its base64) alive only while that is cheap releases it there.
    """
    opened = _opened(data, limits or ImageLimits())
    image = opened.image
    try:
        digest = _digest_alongside(data, sha256)
        if opened.png is None or not _png_pixels_verified(data, opened.png):
            if before_pixel_buffer is not None:
                before_pixel_buffer()
            _load(image)
        return _info(data, opened.format, image, digest)
    finally:
        image.close()


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
