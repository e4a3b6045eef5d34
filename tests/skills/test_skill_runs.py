"""Run every command SKILL.md tells an agent to run, in order, against the mock provider,
and read the JSON the skill tells the agent to read. If the CLI changes a flag, a field or
an exit status the skill relies on, these tests fail."""

from __future__ import annotations

import hashlib
import io
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from imagebridge.contract.capabilities import ProviderCapabilities
from imagebridge.contract.errors import ErrorCode
from imagebridge.contract.response import ImageResponse
from tests.cli.conftest import Result
from tests.skills import skill_doc
from tests.skills.conftest import Sandbox

SKILL = skill_doc.load()
PROMPT = "a small red fox sticker on a plain background"
OUTPUT_DIR = "agent-images"
SOURCE_IMAGE = "source.png"


def _argv(command: str) -> list[str]:
    """The subcommand words of a command (program name and global flags removed)."""
    words = shlex.split(command)
    assert words[0] == "imagegen-bridge", command
    return [word for word in words[1:] if word not in {"--json", "--local-artifact-paths"}]


def _kind(command: str) -> str:
    words = _argv(command)
    return " ".join(words[:2]) if words[0] in {"config", "providers"} else words[0]


def _check_config(_: str, ran: Result, __: Sandbox) -> None:
    assert ran.json() == {"valid": True, "issues": []}


def _check_providers(_: str, ran: Result, __: Sandbox) -> None:
    items = ran.json()["items"]
    assert [item["name"] for item in items] == ["mock"]
    assert items[0]["models"] == ["mock-image-1"]


def _check_capabilities(_: str, ran: Result, __: Sandbox) -> None:
    document = ProviderCapabilities.model_validate(ran.json())
    assert document.provider == "mock"


def _check_images(command: str, ran: Result, sandbox: Sandbox) -> None:
    body = ran.json()
    assert set(body) == {"response", "artifacts"}
    response = ImageResponse.model_validate(body["response"])
    assert response.revised_prompt is not None and response.timings.total_ms >= 0
    artifacts = body["artifacts"]
    assert artifacts, "the skill treats an empty artifacts list as a failure"
    root = sandbox.artifacts.resolve()
    for artifact, image in zip(artifacts, response.data, strict=True):
        path = Path(artifact["path"])
        assert path.is_absolute() and path.is_file() and not path.is_symlink()
        assert path.parent == root / OUTPUT_DIR
        content = path.read_bytes()
        assert hashlib.sha256(content).hexdigest() == image.sha256
        with Image.open(io.BytesIO(content)) as decoded:
            decoded.verify()
        with Image.open(path) as decoded:
            assert decoded.size == (image.width, image.height)
            if "--background transparent" in command:
                alpha = decoded.convert("RGBA").getchannel("A")
                low, high = alpha.getextrema()
                assert low == 0 and high == 255, "a transparent result has clear and solid pixels"
        sidecar = Path(artifact["metadata_path"])
        assert sidecar.is_absolute() and sidecar.is_file() and sidecar.parent == path.parent


CHECKS = {
    "config check": _check_config,
    "providers list": _check_providers,
    "providers capabilities": _check_capabilities,
    "generate": _check_images,
    "edit": _check_images,
}
VALUES = {"prompt": PROMPT, "dir": OUTPUT_DIR, "provider": "mock", "image": SOURCE_IMAGE}


def test_the_skill_names_the_steps_the_issue_asks_for() -> None:
    commands = SKILL.commands()
    kinds = [_kind(command) for command in commands]
    assert kinds[:2] == ["config check", "providers list"], "checks come before generation"
    assert kinds.index("providers capabilities") < kinds.index("generate") < kinds.index("edit")
    images = [c for c in commands if _kind(c) in {"generate", "edit"}]
    for command in images:
        words = shlex.split(command)
        assert words[1:3] == ["--json", "--local-artifact-paths"], command
        assert "--output-dir" in words and words[words.index("--metadata") + 1] == "sidecar"
    assert any("--background transparent --transparency auto" in c for c in images)


def test_every_command_of_the_skill_runs_in_order_and_gives_what_it_promises(
    sandbox: Sandbox,
) -> None:
    ran_kinds: list[str] = []
    for command in SKILL.commands():
        unknown = set(skill_doc.placeholders(command)) - set(VALUES)
        assert not unknown, f"the test has no value for {unknown} in {command}"
        kind = _kind(command)
        assert kind in CHECKS, f"no check for the skill's step {command!r}: add one"
        if kind == "edit":
            # As the skill says: the input image is copied into the working directory.
            previous = sorted((sandbox.artifacts / OUTPUT_DIR).glob("image-*.png"))
            shutil.copyfile(previous[0], sandbox.cwd / SOURCE_IMAGE)
        ran = sandbox.run(skill_doc.fill(command, VALUES))
        assert ran.code == 0, (command, ran.stderr)
        CHECKS[kind](command, ran, sandbox)
        ran_kinds.append(kind)
    assert {"generate", "edit"} <= set(ran_kinds)


def _exit_rows() -> list[tuple[int, str]]:
    rows = SKILL.table_rows("6. When a command fails")
    cases = [(int(row[0]), code) for row in rows for code in skill_doc.backticked(row[1])]
    listed = sorted(code for _, code in cases)
    assert listed == sorted(code.value for code in ErrorCode), "one row for every error code"
    return cases


def _generate_command() -> str:
    return next(c for c in SKILL.commands() if _kind(c) == "generate")


@pytest.mark.parametrize(("status", "code"), _exit_rows(), ids=lambda value: str(value))
def test_each_exit_status_in_the_skill_is_the_one_the_cli_gives(
    sandbox: Sandbox, status: int, code: str
) -> None:
    # The mock fails on request with any error code; the skill's own generate command runs.
    values = {**VALUES, "prompt": f"a fox [mock:fail={code}]"}
    ran = sandbox.run(skill_doc.fill(_generate_command(), values))
    assert ran.code == status, (code, ran.stderr)
    error: dict[str, Any] = ran.error()
    assert error["code"] == code
    assert {"message", "retryable"} <= set(error)
    if code == "rate_limited":
        # The skill says to wait details.retry_after_ms before the one retry.
        assert isinstance(error["details"]["retry_after_ms"], int)
    if code == "timeout":
        assert error["details"]["outcome"] == "unknown"


def test_an_image_outside_the_allowed_roots_is_the_input_error_the_skill_describes(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.png"
    Image.new("RGB", (8, 8), "blue").save(outside)
    edit = next(c for c in SKILL.commands() if _kind(c) == "edit")
    ran = sandbox.run(skill_doc.fill(edit, {**VALUES, "image": str(outside)}))
    assert ran.code == 4
    error = ran.error()
    assert error["code"] == "input" and "outside allowed roots" in error["message"]
    assert "outside allowed roots" in " ".join(SKILL.section("4. Edit").split())


# The command forms the original's skill runs, which the README
# says work unchanged here. Only the prompt is ours.
ORIGINAL_SKILL_COMMANDS = [
    "imagegen-bridge config check --json",
    "imagegen-bridge providers list --json",
    "imagegen-bridge providers capabilities --json",
    "imagegen-bridge --json --local-artifact-paths generate --prompt 'a paper crane on a desk'"
    " --output-dir agent --metadata sidecar",
    "imagegen-bridge --json --local-artifact-paths generate --prompt 'a paper crane'"
    " --background transparent --transparency auto --output-dir agent --metadata sidecar",
]


def test_the_original_skills_command_forms_work_unchanged(sandbox: Sandbox) -> None:
    for command in ORIGINAL_SKILL_COMMANDS:
        ran = sandbox.run(command)
        assert ran.code == 0, (command, ran.stderr)
        body = ran.json()
        if " generate " in command:
            for artifact in body["artifacts"]:
                path = Path(artifact["path"])
                assert path.is_absolute() and path.is_file()
                assert path.parent == sandbox.artifacts.resolve() / "agent"
            assert body["response"]["revised_prompt"]


def test_a_remote_bridge_in_the_environment_gives_the_refusal_the_skill_quotes(
    sandbox: Sandbox,
) -> None:
    sandbox.env["IMAGEGEN_BRIDGE_URL"] = "http://127.0.0.1:9"
    ran = sandbox.run(skill_doc.fill(_generate_command(), VALUES))
    assert ran.code == 2
    message = ran.error()["message"]
    assert message in " ".join(SKILL.section("3. Generate").split())
