"""A plain PNG's pixels proven decodable without building them.

Verifying an image normally means decoding it: a pixel buffer of 4 bytes a pixel (Pillow
keeps RGB as RGBX). For the common PNG (non-interlaced, its image data in consecutive
IDAT chunks) the same verdict costs one inflate of the image data and a look at each
row's filter byte, in bounded memory and with the GIL released. Anything unusual is left
to Pillow, so the verdict is always the one Pillow would give.
"""

from __future__ import annotations

import deflate
from zlib_ng import zlib_ng

from imagebridge.imaging.headers import PngLayout

__all__ = ["WHOLE_INFLATE_MAX_BYTES", "png_pixels_verified"]

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


def png_pixels_verified(data: bytes, layout: PngLayout) -> bool:
    """``True`` proves every scanline of this PNG decodes; ``False`` leaves it to Pillow.

    A non-interlaced PNG's image data is one zlib stream holding, for each of ``height``
    rows, a filter-type byte (0–4) and the row's packed samples. Inflating that whole
    stream (zlib checks every Huffman code, distance and the Adler-32), finding that it
    ends exactly after the last row and that every filter byte is valid is all a decoder
    can fail on: unfiltering and unpacking such rows cannot fail. That inflate is also
    most of Pillow's decode time; done here it builds no pixel buffer (Pillow keeps RGB at
    4 bytes a pixel), holds a small image's rows (under :data:`WHOLE_INFLATE_MAX_BYTES`)
    or :data:`_INFLATE_OUTPUT` bytes of a larger one's, and runs with the GIL released
    (libdeflate or zlib-ng: 20–30% faster than the stdlib's zlib here). Every chunk's
    CRC was checked by :func:`imagebridge.imaging.headers.png_layout`. Anything else
    (interlacing, an unusual chunk layout, any anomaly in the stream) returns ``False``
    and Pillow's full decode decides, so the verdict is always the one Pillow would give.
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
    """The check of :func:`png_pixels_verified` for image data inflating to ``expected``
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
