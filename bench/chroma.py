"""Chroma-key benchmark: the cost of keying an image relative to decoding it.

For a synthetic 1024×1024 and 2048×2048 generated-style image (noisy #00ff00 backdrop,
a textured subject with antialiased edges), encoded as PNG, it prints:

* chroma_key_<n>:      ``apply_chroma_key`` on the decoded RGBA pixels (the matte,
                       despill and zeroing, including the per-channel split and merge)
                       / decoding the same PNG with Pillow             (target <= 1.0)
* remove_chroma_key_<n>: the whole public call — verify+decode, key, validate,
                       re-encode PNG, re-verify — / the same decode     (reported)

Each figure is a ratio of medians of several runs measured in this process, the two
sides sampled alternately. Usage:
``.venv/bin/python bench/chroma.py``
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
from PIL import Image

from imagebridge.imaging.chroma.images import remove_chroma_key
from imagebridge.imaging.chroma.kernel import apply_chroma_key
from imagebridge.imaging.chroma.keys import ChromaOptions


def synthetic_png(size: int, seed: int = 1) -> bytes:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    image = np.empty((size, size, 3), dtype=np.int16)
    image[...] = (0, 255, 0)
    image += rng.integers(-3, 4, (size, size, 3), dtype=np.int16)  # generator noise
    radius = np.hypot(yy - size / 2, xx - size / 2) / (size * 0.35)
    coverage = np.clip((1.0 - radius) * size / 8, 0.0, 1.0)[..., None]  # soft edge
    texture = rng.integers(0, 256, (size, size, 3)) * 0.5 + np.array([150, 60, 40]) * 0.5
    image = (image * (1 - coverage) + texture * coverage).round()
    pixels = np.clip(image, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def median_time(action: Callable[[], object], repeats: int) -> float:
    action()  # warm up caches and lazy imports
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def decode(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return np.array(image.convert("RGBA"))


def measure(size: int, repeats: int) -> list[tuple[str, float, str]]:
    data = synthetic_png(size)

    def decode_only() -> None:
        with Image.open(io.BytesIO(data)) as image:
            image.load()

    decoded = decode(data)
    options = ChromaOptions()
    decode_only()  # warm up
    apply_chroma_key(decoded.copy(), options)
    # Decode and key samples alternate, so a change in machine load (CI, other jobs) hits
    # both sides of the ratio instead of skewing it.
    decode_samples, key_samples = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        decode_only()
        decode_samples.append(time.perf_counter() - started)
        pixels = decoded.copy()  # keying works in place: time it on a fresh copy
        started = time.perf_counter()
        apply_chroma_key(pixels, options)
        key_samples.append(time.perf_counter() - started)
    decode_s = statistics.median(decode_samples)
    key_s = statistics.median(key_samples)
    full_s = median_time(lambda: remove_chroma_key(data, "png", options), max(3, repeats // 3))
    return [
        (f"chroma_key_{size}", key_s / decode_s, "<= 1.0"),
        (f"remove_chroma_key_{size}", full_s / decode_s, "reported"),
    ]


def main() -> int:
    rows = measure(1024, repeats=15) + measure(2048, repeats=7)
    print(f"{'name':<24}  {'ratio':>6}  target")
    for name, ratio, target in rows:
        print(f"{name:<24}  {ratio:6.2f}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
