"""Parameters of the thread and turn requests the bridge sends, and the turn prompt text.

Kept apart from the transport so the provider and the tests build exactly the same
messages. Shapes follow the codex 0.169 schema (``text_elements`` is snake_case there;
``approvalPolicy: never`` and a ``read-only`` sandbox keep codex from asking anything).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DEVELOPER_INSTRUCTIONS",
    "thread_resume_params",
    "thread_start_params",
    "turn_prompt_text",
    "turn_start_params",
]

DEVELOPER_INSTRUCTIONS = (
    "For each request, call image_gen.imagegen exactly once and do not use unrelated tools."
)


def thread_start_params(
    *,
    cwd: Path,
    ephemeral: bool,
    model: str | None = None,
    developer_instructions: str = DEVELOPER_INSTRUCTIONS,
) -> dict[str, Any]:
    """``thread/start``: an isolated (ephemeral) or persistent thread that cannot act."""
    return {
        "model": model,
        "cwd": str(cwd.absolute()),
        "approvalPolicy": "never",
        "sandbox": "read-only",
        "ephemeral": ephemeral,
        "developerInstructions": developer_instructions,
    }


def thread_resume_params(thread_id: str) -> dict[str, Any]:
    """``thread/resume`` without replaying the history (which would carry every old image)."""
    return {"threadId": thread_id, "excludeTurns": True}


def turn_prompt_text(
    prompt: str,
    *,
    reference_paths: Sequence[Path] = (),
    edit_source_count: int = 0,
) -> str:
    """The user message that makes codex call ``image_gen.imagegen`` once.

    ``reference_paths`` lists edit sources first (``edit_source_count`` of them), then
    visual references, exactly as they are passed in ``referenced_image_paths``.
    """
    paths = json.dumps([str(path) for path in reference_paths])
    if edit_source_count > 0:
        references = len(reference_paths) - edit_source_count
        return (
            f"Edit the first {edit_source_count} referenced_image_paths with "
            f"image_gen.imagegen. The following {references} path(s), if any, are visual "
            f"references only. Use the paths exactly as listed: {paths}. Prompt: {prompt}"
        )
    if reference_paths:
        return (
            "Generate this image now with image_gen.imagegen. Use all "
            f"{len(reference_paths)} referenced_image_paths as visual references exactly as "
            f"listed: {paths}. Prompt: {prompt}"
        )
    return f"Generate this image now with image_gen.imagegen: {prompt}"


def turn_start_params(
    thread_id: str, text: str, image_paths: Sequence[Path] = ()
) -> dict[str, Any]:
    """``turn/start`` with the text and each staged image as a ``localImage`` input."""
    items: list[dict[str, Any]] = [{"type": "text", "text": text, "text_elements": []}]
    items.extend(
        {"type": "localImage", "path": str(path), "detail": "original"} for path in image_paths
    )
    return {"threadId": thread_id, "input": items}
