"""The parsed ``generate``/``edit`` command line, before it becomes a request."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PARAMETER_FLAGS", "GenerationFlags"]


@dataclass(slots=True)
class GenerationFlags:
    """Every flag of ``generate``/``edit``; ``None`` means "not given on the command line"."""

    operation: str
    prompt: str | None = None
    prompt_option: str | None = None
    request_file: str | None = None
    preset: str | None = None
    images: list[str] = field(default_factory=list)
    mask: str | None = None
    references: list[str] = field(default_factory=list)
    # request parameters
    negative_prompt: str | None = None
    provider: str | None = None
    model: str | None = None
    fallbacks: list[str] = field(default_factory=list)
    fallback_policy: str | None = None
    count: int | None = None
    size: str | None = None
    aspect_ratio: str | None = None
    resolution: str | None = None
    quality: str | None = None
    output_format: str | None = None
    compression: int | None = None
    background: str | None = None
    transparency: str | None = None
    chroma_key: str | None = None
    chroma_transparent_threshold: int | None = None
    chroma_opaque_threshold: int | None = None
    no_despill: bool = False
    moderation: str | None = None
    partial_images: int | None = None
    failure_policy: str | None = None
    batch_execution: str | None = None
    input_fidelity: str | None = None
    action: str | None = None
    response_format: str | None = None
    filename_prefix: str | None = None
    output: str | None = None
    output_dir: str | None = None
    collision: str | None = None
    metadata: str | None = None
    compatibility: str | None = None
    negative_prompt_mode: str | None = None
    revised_prompt: str | None = None
    session: str | None = None
    session_key: str | None = None
    thread_id: str | None = None
    idempotency_key: str | None = None
    timeout_ms: int | None = None
    user: str | None = None
    # behaviour of the command itself
    dry_run: bool = False
    preview: bool = False
    open_viewer: bool = False

    def given_parameters(self) -> list[str]:
        """Command-line names of the request-shaping flags that were given."""
        given: list[str] = []
        for attribute, flag in PARAMETER_FLAGS.items():
            value = getattr(self, attribute)
            if value is None or value is False or value == []:
                continue
            given.append(flag)
        return given


PARAMETER_FLAGS: dict[str, str] = {
    "preset": "--preset",
    "prompt": "PROMPT",
    "prompt_option": "--prompt",
    "images": "--images",
    "mask": "--mask",
    "references": "--reference",
    "negative_prompt": "--negative-prompt",
    "provider": "--provider",
    "model": "--model",
    "fallbacks": "--fallback",
    "fallback_policy": "--fallback-policy",
    "count": "--count",
    "size": "--size",
    "aspect_ratio": "--aspect-ratio",
    "resolution": "--resolution",
    "quality": "--quality",
    "output_format": "--format",
    "compression": "--compression",
    "background": "--background",
    "transparency": "--transparency",
    "chroma_key": "--chroma-key",
    "chroma_transparent_threshold": "--chroma-transparent-threshold",
    "chroma_opaque_threshold": "--chroma-opaque-threshold",
    "no_despill": "--no-despill",
    "moderation": "--moderation",
    "partial_images": "--partial-images",
    "failure_policy": "--failure-policy",
    "batch_execution": "--batch-execution",
    "input_fidelity": "--input-fidelity",
    "action": "--action",
    "response_format": "--response-format",
    "filename_prefix": "--filename-prefix",
    "output": "--output",
    "output_dir": "--output-dir",
    "collision": "--collision",
    "metadata": "--metadata",
    "compatibility": "--compatibility",
    "negative_prompt_mode": "--negative-prompt-mode",
    "revised_prompt": "--revised-prompt",
    "session": "--session",
    "session_key": "--session-key",
    "thread_id": "--thread-id",
    "idempotency_key": "--idempotency-key",
    "timeout_ms": "--timeout-ms",
    "user": "--user",
}
"""Flags that shape the request: ``--request`` is exclusive with every one of them."""
