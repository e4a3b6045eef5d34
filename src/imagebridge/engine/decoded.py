"""Bytes a provider already decoded, handed to the materializer with what was proved.

A provider that decodes an output's base64 (to check it) would otherwise leave the
materializer to decode and hash the same payload again, and to run the full pixel decode
only after the slowest call of a fan-out has answered. :class:`DecodedPayload` travels on
the image (a private attribute, never serialized): the exact bytes, the facts computed over
them in this process, and the limits under which the pixels were fully decoded, if they
were. The materializer reuses a full verification only when it ran under its own limits.
"""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.contract.response import GeneratedImage
from imagebridge.imaging.inspect import ImageInfo, ImageLimits

__all__ = ["DecodedPayload", "attach_decoded", "take_decoded"]


@dataclass(frozen=True, slots=True)
class DecodedPayload:
    """``data`` is the decoded ``b64_json``; ``info`` was computed over exactly it."""

    data: bytes
    info: ImageInfo
    verified_under: ImageLimits | None = None
    """The limits of the full pixel decode (``inspect_image``); ``None``: header checks only."""


def attach_decoded(image: GeneratedImage, payload: DecodedPayload) -> None:
    image._decoded = payload


def take_decoded(image: GeneratedImage) -> DecodedPayload | None:
    """The payload attached to ``image``, detached so it is not held twice."""
    payload = image._decoded
    image._decoded = None
    return payload if isinstance(payload, DecodedPayload) else None
