"""A deliberately plain per-pixel implementation of the original's chroma-key rules.

It exists only to prove the vectorised kernel in :mod:`imagebridge.imaging.chroma.kernel`
computes exactly the same pixels. It applies the rules (distance to the key, soft and
dominance alpha, despill, zeroing) one pixel and one step at a time, using Python
integers, and shares no code with the kernel.
"""

from __future__ import annotations


def spill_channels(key: tuple[int, int, int]) -> list[int]:
    top = max(key)
    if top < 128:
        return []
    return [c for c in range(3) if key[c] >= top - 16 and key[c] >= 128]


def reference_pixel(
    pixel: tuple[int, int, int, int],
    key: tuple[int, int, int],
    transparent: int,
    opaque: int,
    despill: bool,
) -> tuple[int, int, int, int]:
    rgb = list(pixel[:3])
    source_alpha = pixel[3]
    distance = max(abs(rgb[c] - key[c]) for c in range(3))
    spill = spill_channels(key)
    others = [c for c in range(3) if c not in spill]
    non_key = max((rgb[c] for c in others), default=0)
    dominance = min(rgb[c] for c in spill) - non_key if spill else 0
    key_like = distance <= 32 or dominance >= 16
    if key_like:
        if distance <= transparent:
            soft = 0
        elif distance >= opaque:
            soft = 255
        else:
            r = (distance - transparent) * 65535 // (opaque - transparent)
            s = r * r * (3 * 65535 - 2 * r) // (65535 * 65535)
            soft = (s * 255 + 32767) // 65535
        if dominance <= 0:
            dominance_alpha = 255
        else:
            denominator = max(max(key) - non_key, 1)
            remaining = denominator - min(dominance, denominator)
            dominance_alpha = (remaining * 255 + denominator // 2) // denominator
        matte = min(soft, dominance_alpha)
    else:
        matte = 255
    alpha = (matte * source_alpha + 127) // 255
    if alpha <= 8:
        alpha = 0
    if alpha == 0:
        return (0, 0, 0, 0)
    if despill and key_like and alpha < 252:
        anchor = max(non_key - 1, 0)
        for c in spill:
            rgb[c] = min(rgb[c], anchor)
    return (rgb[0], rgb[1], rgb[2], alpha)


def reference_key_image(
    pixels: list[tuple[int, int, int, int]],
    key: tuple[int, int, int],
    transparent: int = 12,
    opaque: int = 96,
    despill: bool = True,
) -> list[tuple[int, int, int, int]]:
    return [reference_pixel(p, key, transparent, opaque, despill) for p in pixels]


def reference_border_key(
    pixels: list[tuple[int, int, int, int]], width: int, height: int
) -> tuple[int, int, int]:
    shortest = min(width, height)
    band = min(max(shortest, 1), 6)
    step = max(shortest // 256, 1)
    samples: list[tuple[int, int, int, int]] = []
    for x in range(0, width, step):
        for offset in range(band):
            samples.append(pixels[offset * width + x])
            samples.append(pixels[(height - 1 - offset) * width + x])
    for y in range(0, height, step):
        for offset in range(band):
            samples.append(pixels[y * width + offset])
            samples.append(pixels[y * width + (width - 1 - offset)])
    channels = [sorted(p[c] for p in samples) for c in range(3)]
    middle = len(samples) // 2
    return (channels[0][middle], channels[1][middle], channels[2][middle])
