"""Small encoded test images and a decompression-bomb builder."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
from PIL import Image

from tests.support.images import png_bytes


def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def png(width: int, height: int, color: tuple[int, ...] = (0, 0, 0, 0)) -> bytes:
    return png_bytes(width, height, color, mode="RGBA")


def jpeg(width: int, height: int, color: tuple[int, int, int] = (10, 20, 30)) -> bytes:
    return encode(Image.new("RGB", (width, height), color), "JPEG")


def webp(width: int, height: int, *, lossless: bool = True, alpha: bool = True) -> bytes:
    mode = "RGBA" if alpha else "RGB"
    return encode(Image.new(mode, (width, height)), "WEBP", lossless=lossless)


def noise(width: int, height: int, *, seed: int = 0, alpha: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    channels = 4 if alpha else 3
    return rng.integers(0, 256, (height, width, channels), dtype=np.uint8)


def decode_rgba(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.array(image.convert("RGBA"))


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_bomb(width: int = 10_000, height: int = 10_000) -> bytes:
    """A valid 1-bit greyscale PNG whose pixels are all zero: tiny encoded, huge decoded."""
    row = b"\x00" * (1 + (width + 7) // 8)
    compressor = zlib.compressobj(9)
    parts = [compressor.compress(row) for _ in range(height)]
    parts.append(compressor.flush())
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", b"".join(parts))
        + png_chunk(b"IEND", b"")
    )


def keyed_fixture() -> bytes:
    """20×20 #00ff00 with a 10×10 (220, 30, 20) square in the middle (the original's chroma
    test image)."""
    pixels = np.zeros((20, 20, 4), dtype=np.uint8)
    pixels[...] = (0, 255, 0, 255)
    pixels[5:15, 5:15] = (220, 30, 20, 255)
    return encode(Image.fromarray(pixels), "PNG")
