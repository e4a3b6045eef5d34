"""Flags → request: presets, overrides, implicit delivery, sources and validation."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from imagebridge.cli.context import CliUsageError
from imagebridge.cli.generation.flags import PARAMETER_FLAGS, GenerationFlags
from imagebridge.cli.generation.request import BuildSettings, build_request
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.validation import RequestLimits


def _settings(tmp_path: Path, **changes: Any) -> BuildSettings:
    values: dict[str, Any] = {
        "limits": RequestLimits(),
        "artifact_root": tmp_path / "artifacts",
        "max_body_bytes": 1024 * 1024,
        "cwd": tmp_path,
    }
    values.update(changes)
    return BuildSettings(**values)


def _flags(**values: Any) -> GenerationFlags:
    values.setdefault("operation", "generate")
    return GenerationFlags(**values)


def test_every_parameter_flag_is_a_field() -> None:
    assert set(PARAMETER_FLAGS) <= set(GenerationFlags.__dataclass_fields__)


def test_flags_map_into_the_normalized_request(tmp_path: Path) -> None:
    request = build_request(
        _flags(
            prompt="a fox",
            negative_prompt="blur",
            provider="mock",
            model="mock-image-1",
            fallbacks=["other:m2", "third"],
            fallback_policy="on_error",
            count=2,
            size="64x32",
            quality="high",
            output_format="webp",
            compression=80,
            background="opaque",
            moderation="low",
            partial_images=2,
            failure_policy="best_effort",
            batch_execution="sequential",
            compatibility="normalize",
            negative_prompt_mode="merge",
            revised_prompt="omit",
            idempotency_key="idem-1",
            timeout_ms=5000,
            user="u1",
            transparency="chroma_key",
            chroma_key="#00ff00",
            chroma_transparent_threshold=10,
            chroma_opaque_threshold=90,
            no_despill=True,
        ),
        _settings(tmp_path),
    )
    wire = request.to_wire()
    assert wire["negative_prompt"] == "blur"
    assert wire["routing"] == {
        "provider": "mock",
        "model": "mock-image-1",
        "fallbacks": [{"provider": "other", "model": "m2"}, {"provider": "third"}],
        "fallback_policy": "on_error",
    }
    params = wire["parameters"]
    assert (params["n"], params["size"], params["quality"]) == (2, "64x32", "high")
    assert (params["output_format"], params["output_compression"]) == ("webp", 80)
    assert params["partial_images"] == 2 and params["failure_policy"] == "best_effort"
    assert wire["session"] == {"mode": "isolated"}
    assert wire["policies"] == {
        "compatibility": "normalize",
        "negative_prompt": "merge",
        "revised_prompt": "omit",
        "batch_execution": "sequential",
    }
    assert wire["output"]["transparency"] == {
        "mode": "chroma_key",
        "key_color": "#00ff00",
        "transparent_threshold": 10,
        "opaque_threshold": 90,
        "despill": False,
    }
    assert (wire["idempotency_key"], wire["timeout_ms"], wire["user"]) == ("idem-1", 5000, "u1")


def test_session_key_implies_persistent_mode(tmp_path: Path) -> None:
    request = build_request(_flags(prompt="x", session_key="k1"), _settings(tmp_path))
    assert request.to_wire()["session"] == {"mode": "persistent", "key": "k1"}


def test_thread_id_implies_thread_mode(tmp_path: Path) -> None:
    request = build_request(_flags(prompt="x", thread_id="t-1"), _settings(tmp_path))
    assert request.session.mode.value == "thread" and request.session.thread_id == "t-1"


def test_explicit_session_mode_is_not_overridden(tmp_path: Path) -> None:
    with pytest.raises(BridgeError) as caught:
        build_request(_flags(prompt="x", session="isolated", session_key="k"), _settings(tmp_path))
    assert caught.value.code is ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, "b64_json"),
        ({"output": "a.png"}, "artifact"),
        ({"output_dir": "d"}, "artifact"),
        ({"metadata": "sidecar"}, "artifact"),
        ({"metadata": "sidecar_and_embedded"}, "artifact"),
        ({"metadata": "embedded"}, "b64_json"),
        ({"preview": True}, "artifact"),
        ({"open_viewer": True}, "artifact"),
        ({"response_format": "url", "output_dir": "d"}, "url"),
    ],
)
def test_implicit_artifact_delivery(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    request = build_request(_flags(prompt="x", **changes), _settings(tmp_path))
    assert request.output.response_format.value == expected


def test_human_output_defaults_to_saving_files(tmp_path: Path) -> None:
    request = build_request(_flags(prompt="x"), _settings(tmp_path, implicit_artifact=True))
    assert request.output.response_format.value == "artifact"
    explicit = build_request(
        _flags(prompt="x", response_format="b64_json"), _settings(tmp_path, implicit_artifact=True)
    )
    assert explicit.output.response_format.value == "b64_json"


def test_explicit_incompatible_format_is_not_overridden(tmp_path: Path) -> None:
    with pytest.raises(BridgeError) as caught:
        build_request(
            _flags(prompt="x", output="a.png", response_format="b64_json"), _settings(tmp_path)
        )
    fields = [issue["field"] for issue in caught.value.details["issues"]]
    assert "output" in fields


def test_output_extension_selects_the_format_unless_given(tmp_path: Path) -> None:
    inferred = build_request(_flags(prompt="x", output="fox.webp"), _settings(tmp_path))
    assert inferred.parameters.output_format.value == "webp"
    with pytest.raises(BridgeError):
        build_request(
            _flags(prompt="x", output="fox.webp", output_format="png"), _settings(tmp_path)
        )


def test_preset_is_the_base_and_flags_override_their_fields(tmp_path: Path) -> None:
    preset = {
        "prompt": "stored prompt",
        "operation": "generate",
        "parameters": {"n": 3, "quality": "low"},
        "output": {"response_format": "artifact", "directory": "kept"},
    }
    request = build_request(_flags(preset="p", quality="high"), _settings(tmp_path), preset)
    assert request.prompt == "stored prompt"
    assert request.parameters.n == 3 and request.parameters.quality.value == "high"
    assert request.output.directory == "kept"
    replaced = build_request(_flags(preset="p", prompt="mine"), _settings(tmp_path), preset)
    assert replaced.prompt == "mine"


def test_preset_operation_must_match_the_command(tmp_path: Path) -> None:
    preset = {"prompt": "p", "operation": "generate"}
    with pytest.raises(BridgeError, match="is a generate preset"):
        build_request(
            _flags(operation="edit", preset="p", images=["a.png"]), _settings(tmp_path), preset
        )


def test_prompt_from_stdin_is_bounded(tmp_path: Path) -> None:
    limits = RequestLimits(max_prompt_bytes=3)
    ok = build_request(
        _flags(prompt_option="-"), _settings(tmp_path, limits=limits, stdin=io.BytesIO(b"abc\n"))
    )
    assert ok.prompt == "abc"
    with pytest.raises(BridgeError, match="exceeds the configured byte limit") as caught:
        build_request(
            _flags(prompt_option="-"), _settings(tmp_path, limits=limits, stdin=io.BytesIO(b"abcd"))
        )
    assert caught.value.code is ErrorCode.INPUT


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"prompt": "a", "prompt_option": "b"}, "cannot be used together"),
        ({"prompt": "a", "request_file": "r.json"}, "cannot be used together"),
        ({"request_file": "r.json", "quality": "high"}, "--request is lossless and exclusive"),
        ({"request_file": "r.json", "preset": "p"}, "--preset"),
        ({"prompt": "a", "output": "a.png", "output_dir": "d"}, "--output cannot be used"),
        ({}, "a prompt is required"),
    ],
)
def test_command_line_conflicts_are_usage_errors(
    tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(CliUsageError, match=message):
        build_request(_flags(**values), _settings(tmp_path))


def test_edit_needs_images_and_generate_refuses_them(tmp_path: Path) -> None:
    with pytest.raises(CliUsageError, match="edit needs at least one source image"):
        build_request(_flags(operation="edit", prompt="x"), _settings(tmp_path))
    with pytest.raises(CliUsageError, match="generate takes no --images"):
        build_request(_flags(prompt="x", images=["a.png"]), _settings(tmp_path))


def test_local_files_become_absolute_file_inputs(tmp_path: Path) -> None:
    request = build_request(
        _flags(
            operation="edit", prompt="x", images=["in/a.png"], mask="m.png", references=["r.png"]
        ),
        _settings(tmp_path),
    )
    wire = request.to_wire()
    assert wire["images"] == [
        {"type": "file", "path": str(tmp_path / "in" / "a.png"), "filename": "a.png"}
    ]
    assert wire["mask"]["path"] == str(tmp_path / "m.png")
    assert wire["reference_images"][0]["filename"] == "r.png"


def test_request_file_is_taken_verbatim(tmp_path: Path) -> None:
    body = '{"prompt":"from file","operation":"generate","parameters":{"n":2}}'
    (tmp_path / "r.json").write_text(body)
    request = build_request(_flags(request_file=str(tmp_path / "r.json")), _settings(tmp_path))
    assert request.prompt == "from file" and request.parameters.n == 2
    assert request.output.response_format.value == "b64_json"


def test_request_file_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"prompt": 1}')
    with pytest.raises(BridgeError, match="valid ImageRequest JSON"):
        build_request(_flags(request_file=str(tmp_path / "bad.json")), _settings(tmp_path))
    (tmp_path / "edit.json").write_text('{"prompt":"x","operation":"edit","images":[]}')
    with pytest.raises(BridgeError, match="holds an edit request"):
        build_request(_flags(request_file=str(tmp_path / "edit.json")), _settings(tmp_path))
    (tmp_path / "big.json").write_text(" " * 100)
    with pytest.raises(BridgeError, match="exceeds the configured byte limit"):
        build_request(
            _flags(request_file=str(tmp_path / "big.json")), _settings(tmp_path, max_body_bytes=50)
        )


def test_request_limits_come_from_the_settings(tmp_path: Path) -> None:
    with pytest.raises(BridgeError) as caught:
        build_request(
            _flags(prompt="x", count=5), _settings(tmp_path, limits=RequestLimits(max_outputs=4))
        )
    assert caught.value.details["issues"][0]["field"] == "parameters.n"
