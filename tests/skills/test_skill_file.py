"""The shipped SKILL.md is well formed, and every flag, command and JSON field it names
exists in this CLI and in the v1 contract (so the prose cannot drift either)."""

from __future__ import annotations

import re
import subprocess
import types
import typing
from typing import Any

from pydantic import BaseModel

from imagebridge.contract.capabilities import ProviderCapabilities
from imagebridge.contract.enums import SupportLevel
from imagebridge.contract.response import ImageResponse
from tests.skills import skill_doc
from tests.skills.conftest import BIN_DIR, Sandbox

SKILL = skill_doc.load()
SECRET_WORDS = ("auth.json", "OPENAI_API_KEY", "token")


def test_front_matter_names_the_skill_after_its_directory_and_says_when_to_use_it() -> None:
    assert set(SKILL.front_matter) == {"name", "description"}
    assert SKILL.front_matter["name"] == skill_doc.SKILL_DIR.name
    description = SKILL.front_matter["description"]
    assert 80 <= len(description) <= 1024  # the skills format's bound on descriptions
    assert "Use when" in description and not description.startswith(("'", '"'))


def _help(sandbox: Sandbox, *words: str) -> str:
    ran = sandbox.run(" ".join(["COLUMNS=200", "imagegen-bridge", *words, "--help"]))
    assert ran.code == 0, (words, ran.stderr)
    return ran.stdout


def test_every_flag_the_skill_names_exists_in_the_cli(sandbox: Sandbox) -> None:
    helps = "\n".join(
        _help(sandbox, *words)
        for words in [
            (),
            ("generate",),
            ("edit",),
            ("providers", "capabilities"),
            ("config", "check"),
        ]
    )
    offered = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", helps))
    named = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)(?=[\s`\"=]|$)", SKILL.body))
    assert named, "the skill names flags"
    assert named <= offered, f"flags the CLI does not have: {sorted(named - offered)}"


def test_every_command_the_skill_mentions_exists(sandbox: Sandbox) -> None:
    mentioned = {
        tuple(span.split()[1:3])
        for span in skill_doc.backticked(SKILL.body)
        if span.startswith("imagegen-bridge ")
    }
    assert ("doctor",) in {m[:1] for m in mentioned}
    for words in mentioned:
        command = [word for word in words if not word.startswith("-")]
        ran = sandbox.run(" ".join(["imagegen-bridge", *command, "--help"]))
        assert ran.code == 0, (command, ran.stderr)
    assert _help(sandbox, "auth-doctor")


def _field(model: type[BaseModel], path: str) -> Any:
    """Resolve ``a.b[].c`` through pydantic models; fail when a segment does not exist."""
    current: Any = model
    for segment in path.replace("[]", "").split("."):
        assert isinstance(current, type) and issubclass(current, BaseModel), (path, segment)
        assert segment in current.model_fields, f"{path}: no field {segment!r} in {current}"
        current = _model_in(current.model_fields[segment].annotation)
    return current


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside ``X | None`` or ``list[X]``, else the annotation itself."""
    for arg in typing.get_args(annotation) or ():
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        inner = _model_in(arg) if typing.get_args(arg) else None
        if inner is not None and isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner
    if isinstance(annotation, types.UnionType):
        return None
    return annotation


def test_every_response_field_the_skill_reports_is_in_the_contract() -> None:
    spans = skill_doc.backticked(SKILL.section("5. Read the result"))
    fields = [span for span in spans if span.startswith("response.")]
    assert len(fields) >= 8
    for span in fields:
        _field(ImageResponse, span.removeprefix("response."))
    for required in ("revised_prompt", "warnings", "normalizations", "failures", "attempts"):
        assert f"response.{required}" in fields
    assert "response.timings.total_ms" in fields
    assert {"artifacts[].path", "artifacts[].metadata_path"} <= set(spans)


def test_every_capability_field_the_option_table_relies_on_exists() -> None:
    rows = SKILL.table_rows("2. Find the provider")
    spans = [
        span
        for row in rows
        for span in skill_doc.backticked(row[1])
        if re.fullmatch(r"[a-z_]+(\.[a-z_]+)?", span)
    ]
    levels = {level.value for level in SupportLevel}
    fields = [span for span in spans if span not in levels]
    assert len(fields) >= 12 and "unsupported" in spans
    for span in fields:
        _field(ProviderCapabilities, span)
    assert "transparent_background" in skill_doc.backticked(SKILL.section("2. Find the provider"))


def test_the_skill_never_tells_an_agent_to_touch_credentials() -> None:
    for command in SKILL.commands():
        assert not any(word in command for word in SECRET_WORDS), command
        assert "cat " not in command and "~/.codex" not in command
    never = " ".join(SKILL.section("Never").split())
    assert "auth.json" in never and "OPENAI_API_KEY" in never and "OAuth tokens" in never


def test_the_console_script_the_skill_calls_is_installed() -> None:
    done = subprocess.run(
        [str(BIN_DIR / "imagegen-bridge"), "--version"], capture_output=True, check=False
    )
    assert done.returncode == 0 and done.stdout.startswith(b"imagegen-bridge ")
