"""Pieces every provider's capability document is built from, written once.

Each provider states its own document field by field (that parallel structure is
deliberate: it reads as the provider's promise). What repeats is how two recurring
facts are spelled in the contract: "up to N images per call, natively" and "N native
input images within these byte limits".
"""

from __future__ import annotations

from imagebridge.contract.capabilities import BatchCapabilities, InputCapabilities, U8Range
from imagebridge.contract.enums import BatchMode, SupportLevel

__all__ = ["native_batch", "native_inputs"]


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
