"""What every provider family shares: two small jobs, written once.

* **Capability pieces.** Each provider states its own capability document field by field (that
  parallel structure is deliberate: it reads as the provider's promise). What repeats is how
  two recurring facts are spelled in the contract: "up to N images per call, natively"
  (:func:`native_batch`) and "N native input images within these byte limits"
  (:func:`native_inputs`).
* **Upstream text.** A plan refusal ("The 'gpt-5.5' model is not supported when using Codex
  with a ChatGPT account.") or a failed turn's message is often the only thing that says
  *why*; dropping it leaves "HTTP 400" and nothing to act on. Such text may still echo a
  credential or a payload, so it is kept only after :func:`upstream_message`: credentials and
  long opaque runs replaced, terminal controls removed, and a hard length bound.

The SSE decoder both HTTP families read is :mod:`imagebridge.providers.sse`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from imagebridge.contract.capabilities import BatchCapabilities, InputCapabilities, U8Range
from imagebridge.contract.enums import BatchMode, SupportLevel

__all__ = [
    "MAX_UPSTREAM_MESSAGE_CHARS",
    "REDACTED",
    "emulated_mask",
    "native_batch",
    "native_inputs",
    "redact",
    "upstream_message",
]


# -- capability pieces -------------------------------------------------------------------------


def native_batch(max_count: int) -> tuple[U8Range, BatchCapabilities]:
    """``count`` and ``batching`` of a provider that makes 1..``max_count`` images per call."""
    count = U8Range(min=1, max=max_count)
    return count, BatchCapabilities(
        mode=BatchMode.NATIVE, native_count=count.model_copy(), max_parallel_outputs=max_count
    )


def native_inputs(max_count: int, max_bytes_each: int, max_bytes_total: int) -> InputCapabilities:
    """Input images the provider takes as they are, within the given bounds."""
    return InputCapabilities(
        support=SupportLevel.NATIVE,
        max_count=max_count,
        max_bytes_each=max_bytes_each,
        max_bytes_total=max_bytes_total,
    )


def emulated_mask(max_bytes: int) -> InputCapabilities:
    """One mask the transport never sees: the engine composites the edit through it
    (``masks: emulated``; strict compatibility refuses it instead)."""
    return InputCapabilities(
        support=SupportLevel.EMULATED,
        max_count=1,
        max_bytes_each=max_bytes,
        max_bytes_total=max_bytes,
    )


# -- upstream text -----------------------------------------------------------------------------

MAX_UPSTREAM_MESSAGE_CHARS: Final = 512
"""Longest upstream message kept (characters); longer ones are cut and end with ``…``."""
REDACTED: Final = "<redacted>"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_SECRETS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    re.compile(r"\b(?:sk|rt|pk|sess)[-_][A-Za-z0-9_-]{8,}"),
    re.compile(
        r"(?i)(\"?(?:access_token|refresh_token|id_token|api_key|authorization|password|"
        r"secret|token)\"?\s*[:=]\s*)(\"[^\"]*\"|[^\s,;]+)"
    ),
    re.compile(r"[A-Za-z0-9+/=_-]{64,}"),
)
# C0/C1 controls, DEL, bidi overrides and isolates, line/paragraph separators.
_CONTROLS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_SPACES = re.compile(r"\s{2,}")


def redact(text: str) -> str:
    """Remove terminal colours and anything that looks like a credential or a payload."""
    text = _ANSI.sub("", text)
    for pattern in _SECRETS:
        if pattern.groups == 2:
            text = pattern.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
        elif pattern.groups == 1:
            text = pattern.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def upstream_message(
    raw: object, *, secrets: Sequence[str] = (), max_chars: int = MAX_UPSTREAM_MESSAGE_CHARS
) -> str | None:
    """``raw`` as one safe line of at most ``max_chars`` characters, or ``None``.

    Every value in ``secrets`` (the login's token and account id) is replaced first, then
    credential-shaped runs; control characters become spaces. Only a prefix of a huge
    input is looked at, so the work is bounded too.
    """
    if not isinstance(raw, str) or max_chars <= 0:
        return None
    text = raw[: max_chars * 4]
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _CONTROLS.sub(" ", redact(text))
    text = _SPACES.sub(" ", text).strip()
    if not text:
        return None
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + "…"
    return text
