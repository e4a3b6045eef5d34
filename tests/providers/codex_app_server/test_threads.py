"""Thread and turn parameters are valid by the codex 0.169 schema; prompt texts per B4."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from imagebridge.providers.codex_app_server.threads import (
    DEVELOPER_INSTRUCTIONS,
    thread_resume_params,
    thread_start_params,
    turn_prompt_text,
    turn_start_params,
)

Schema = Callable[[str], dict[str, Any]]


def test_thread_start_is_locked_down_and_schema_valid(schema: Schema, tmp_path: Path) -> None:
    params = thread_start_params(cwd=tmp_path, ephemeral=True)
    jsonschema.validate(params, schema("ThreadStartParams.json"))
    assert params == {
        "model": None,
        "cwd": str(tmp_path),
        "approvalPolicy": "never",
        "sandbox": "read-only",
        "ephemeral": True,
        "developerInstructions": DEVELOPER_INSTRUCTIONS,
    }
    assert thread_start_params(cwd=tmp_path, ephemeral=False, model="gpt-5.5")["model"] == "gpt-5.5"


def test_thread_resume_skips_history(schema: Schema) -> None:
    params = thread_resume_params("thread-1")
    jsonschema.validate(params, schema("ThreadResumeParams.json"))
    assert params == {"threadId": "thread-1", "excludeTurns": True}


def test_turn_start_carries_text_and_local_images(schema: Schema, tmp_path: Path) -> None:
    images = [tmp_path / "a.png", tmp_path / "b.png"]
    params = turn_start_params("thread-1", "draw", images)
    jsonschema.validate(params, schema("TurnStartParams.json"))
    assert params["input"][0] == {"type": "text", "text": "draw", "text_elements": []}
    assert params["input"][1:] == [
        {"type": "localImage", "path": str(images[0]), "detail": "original"},
        {"type": "localImage", "path": str(images[1]), "detail": "original"},
    ]


def test_prompt_without_references() -> None:
    assert (
        turn_prompt_text("a red fox")
        == "Generate this image now with image_gen.imagegen: a red fox"
    )


def test_prompt_with_references_lists_every_path() -> None:
    text = turn_prompt_text("a fox", reference_paths=[Path("/s/a.png"), Path("/s/b.png")])
    assert text == (
        "Generate this image now with image_gen.imagegen. Use all 2 referenced_image_paths "
        'as visual references exactly as listed: ["/s/a.png", "/s/b.png"]. Prompt: a fox'
    )


def test_edit_prompt_counts_sources_and_references() -> None:
    text = turn_prompt_text(
        "make it blue",
        reference_paths=[Path("/s/src.png"), Path("/s/ref.png")],
        edit_source_count=1,
    )
    assert text.startswith("Edit the first 1 referenced_image_paths with image_gen.imagegen.")
    assert "The following 1 path(s), if any, are visual references only." in text
    assert text.endswith('["/s/src.png", "/s/ref.png"]. Prompt: make it blue')
