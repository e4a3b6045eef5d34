"""Token usage one call reports, and its sum over calls.

The image's own cost is not in ``response.usage`` (that is the carrier chat model's
text): the backend reports it in ``response.tool_usage.image_gen`` (sub2api #4399,
#4639). It is kept as ``image_gen_*`` counters, which the bridge reports under the
contract's ``usage.provider`` map (provider-specific numeric counters), so a caller can
count images and their cost without a key the original's clients do not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

IMAGE_GEN_PREFIX: Final = "image_gen_"
"""Prefix of the image-usage counters in ``usage.provider``."""
_TOP_LEVEL: Final = ("input_tokens", "output_tokens", "total_tokens")
_DETAILS: Final = (
    ("input_tokens_details", "image_tokens", "input_image_tokens"),
    ("input_tokens_details", "text_tokens", "input_text_tokens"),
    ("output_tokens_details", "image_tokens", "output_image_tokens"),
)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Token counts one call reported; absent counts stay ``None``.

    ``counters`` are the provider-specific ones (``image_gen_images``,
    ``image_gen_output_tokens`` …), summed like the rest.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    counters: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: object, *, image_gen: object = None) -> TokenUsage | None:
        """``raw`` is a Responses/Images ``usage`` object, ``image_gen`` the
        ``tool_usage.image_gen`` one; ``None`` when neither holds a count."""
        values: dict[str, int] = {}
        if isinstance(raw, Mapping):
            values = {
                name: value for name in _TOP_LEVEL if (value := _count(raw.get(name))) is not None
            }
        counters = image_gen_counters(image_gen)
        if not values and not counters:
            return None
        return cls(**values, counters=counters)

    def plus(self, other: TokenUsage | None) -> TokenUsage:
        """Sum with another call's usage (a count known on either side is kept)."""
        if other is None:
            return self

        def add(left: int | None, right: int | None) -> int | None:
            if left is None:
                return right
            return left if right is None else left + right

        counters = dict(self.counters)
        for key, value in other.counters.items():
            counters[key] = counters.get(key, 0) + value
        return TokenUsage(
            add(self.input_tokens, other.input_tokens),
            add(self.output_tokens, other.output_tokens),
            add(self.total_tokens, other.total_tokens),
            counters,
        )

    def to_dict(self) -> dict[str, object]:
        """Only the known counts (``{}`` when none, as the original reports it); the
        counters under ``provider`` when there are any."""
        body: dict[str, object] = {
            name: value for name in _TOP_LEVEL if (value := getattr(self, name)) is not None
        }
        if self.counters:
            body["provider"] = dict(sorted(self.counters.items()))
        return body


def image_gen_counters(raw: object) -> dict[str, int]:
    """``tool_usage.image_gen`` → ``image_gen_*`` counters (``{}`` when it holds none).

    ``image_gen_images`` is 1 whenever any count is reported, so summed over a fan-out
    it says how many images the token counts cover.
    """
    if not isinstance(raw, Mapping):
        return {}
    counters: dict[str, int] = {}
    for name in _TOP_LEVEL:
        value = _count(raw.get(name))
        if value is not None:
            counters[f"{IMAGE_GEN_PREFIX}{name}"] = value
    for parent, name, label in _DETAILS:
        details = raw.get(parent)
        value = _count(details.get(name)) if isinstance(details, Mapping) else None
        if value is not None:
            counters[f"{IMAGE_GEN_PREFIX}{label}"] = value
    if counters:
        counters[f"{IMAGE_GEN_PREFIX}images"] = 1
    return counters


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        return None
    return value
