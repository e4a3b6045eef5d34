"""Intrinsic validation, and the behaviours the original's core/validation.rs tests check."""

from __future__ import annotations

import dataclasses
import tomllib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.validation import (
    RequestLimits,
    is_safe_directory,
    is_safe_filename,
    parse_key_color,
    validate_request,
    validation_issues,
)
from tests.support.fixture_files import ORIGINAL_CONFIG

LIMITS = RequestLimits()
IMAGE = {"type": "base64", "data": "iVBORw0KGgo="}


def request(**fields: Any) -> ImageRequest:
    body: dict[str, Any] = {"operation": "generate", "prompt": "a paper fox"}
    body.update(fields)
    return ImageRequest.model_validate(body)


def edit(**fields: Any) -> ImageRequest:
    return request(operation="edit", images=[IMAGE], **fields)


def pairs(req: ImageRequest, limits: RequestLimits = LIMITS) -> list[tuple[str, str]]:
    return [(issue.field, issue.code) for issue in validation_issues(req, limits)]


# -- the behaviour statements of core/validation.rs -------------------------------------


def test_default_generation_request_is_valid() -> None:
    validate_request(request(), LIMITS)


def test_validation_accumulates_and_sorts_issues() -> None:
    req = request(
        prompt="   ",
        parameters={"n": 0, "output_compression": 80},
        timeout_ms=0,
    )
    with pytest.raises(BridgeError) as caught:
        validate_request(req, LIMITS)
    error = caught.value
    assert error.code is ErrorCode.INVALID_REQUEST
    assert error.message == "request validation failed"
    assert error.field is None
    fields = [issue["field"] for issue in error.details["issues"]]
    assert fields == ["parameters.n", "parameters.output_compression", "prompt", "timeout_ms"]
    assert all(set(issue) == {"field", "code", "message"} for issue in error.details["issues"])


def test_validation_bounds_issue_and_input_amplification() -> None:
    bad = [{"type": "base64", "data": ""}] * 10_000
    issues = pairs(request(operation="edit", images=bad))
    assert len(issues) == 64
    assert ("operation", "too_many_inputs") in issues
    # As in the original: the overflow marker sorts first ("$" before every letter).
    assert issues[0] == ("$", "too_many_issues")


def test_persistent_session_requires_only_a_key() -> None:
    issues = pairs(request(session={"mode": "persistent", "thread_id": "t"}))
    assert ("session.key", "required") in issues
    assert ("session.thread_id", "incompatible") in issues


def test_edit_requires_an_image() -> None:
    assert pairs(request(operation="edit", images=[])) == [("images", "required")]


def test_unsafe_logical_filename_is_rejected() -> None:
    issues = pairs(edit(reference_images=[{**IMAGE, "filename": "../escape.png"}]))
    assert issues == [("reference_images[0]", "invalid_filename")]


def test_fidelity_and_edit_action_require_image_context() -> None:
    issues = pairs(request(parameters={"input_fidelity": "high", "action": "edit"}))
    assert issues == [
        ("parameters.action", "incompatible"),
        ("parameters.input_fidelity", "incompatible"),
    ]
    assert pairs(edit(parameters={"input_fidelity": "high"})) == []
    assert pairs(request(reference_images=[IMAGE], parameters={"action": "edit"})) == []
    assert pairs(edit(parameters={"action": "generate"})) == [("parameters.action", "incompatible")]


def test_artifact_paths_are_portable_and_match_the_image_format() -> None:
    issues = pairs(
        request(
            output={
                "response_format": "artifact",
                "directory": "../outside",
                "filename": "portrait.jpg",
            }
        )
    )
    assert issues == [("output.directory", "invalid"), ("output.filename", "invalid")]


def test_exact_filename_requires_one_image_and_controls_collision() -> None:
    assert pairs(
        request(parameters={"n": 2}, output={"response_format": "artifact", "filename": "a.png"})
    ) == [("output.filename", "incompatible")]
    assert pairs(request(output={"response_format": "artifact", "collision": "suffix"})) == [
        ("output.collision", "incompatible")
    ]


def test_metadata_sidecars_require_artifact_delivery() -> None:
    assert pairs(request(output={"metadata": "sidecar"})) == [("output.metadata", "incompatible")]
    for policy in ("sidecar", "sidecar_and_embedded"):
        assert pairs(request(output={"response_format": "artifact", "metadata": policy})) == []


def test_embedded_metadata_requires_image_bytes_but_not_artifact_delivery() -> None:
    assert pairs(request(output={"metadata": "embedded"})) == []
    assert pairs(request(output={"response_format": "metadata", "metadata": "embedded"})) == [
        ("output.metadata", "incompatible")
    ]
    big = "x" * (12 * 1024 + 1)
    assert pairs(request(prompt=big, output={"metadata": "embedded"})) == [
        ("output.metadata", "too_large")
    ]


def test_validates_fallback_isolation_and_transparency_controls() -> None:
    issues = pairs(
        request(
            routing={"fallbacks": [{"provider": "mock"}]},
            session={"mode": "persistent", "key": "k"},
            output={
                "transparency": {
                    "key_color": "green",
                    "transparent_threshold": 100,
                    "opaque_threshold": 50,
                }
            },
        )
    )
    assert issues == [
        ("output.transparency.key_color", "invalid_format"),
        ("output.transparency.transparent_threshold", "out_of_range"),
        ("routing.fallbacks", "incompatible"),
    ]


# -- every issue code -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"version": "2"}, ("version", "unsupported_version")),
        ({"prompt": ""}, ("prompt", "required")),
        ({"prompt": "x" * 131_073}, ("prompt", "too_large")),
        ({"negative_prompt": " "}, ("negative_prompt", "empty")),
        ({"negative_prompt": "x" * 65_537}, ("negative_prompt", "too_large")),
        (
            {"negative_prompt": "blur", "policies": {"negative_prompt": "reject"}},
            ("policies.negative_prompt", "rejected_by_policy"),
        ),
        ({"parameters": {"n": 0}}, ("parameters.n", "out_of_range")),
        ({"parameters": {"size": "16385x16"}}, ("parameters.size", "out_of_range")),
        (
            {"parameters": {"size": "1536x1024", "aspect_ratio": "3:2"}},
            ("parameters.size", "ambiguous"),
        ),
        (
            {"parameters": {"size": "1024x1024", "resolution": "2k"}},
            ("parameters.size", "ambiguous"),
        ),
        (
            {"parameters": {"output_format": "jpeg", "output_compression": 101}},
            ("parameters.output_compression", "out_of_range"),
        ),
        (
            {"parameters": {"output_compression": 80}},
            ("parameters.output_compression", "incompatible"),
        ),
        ({"parameters": {"partial_images": 4}}, ("parameters.partial_images", "out_of_range")),
        ({"routing": {"provider": "  "}}, ("routing.provider", "empty")),
        ({"routing": {"model": "m" * 257}}, ("routing.model", "too_large")),
        ({"user": "a\nb"}, ("user", "invalid")),
        ({"idempotency_key": ""}, ("idempotency_key", "empty")),
        (
            {"routing": {"fallbacks": [{"provider": "mock", "model": "\x07"}]}},
            ("routing.fallbacks[0].model", "invalid"),
        ),
        (
            {"routing": {"fallbacks": [{"provider": f"p{i}"} for i in range(5)]}},
            ("routing.fallbacks", "too_many"),
        ),
        (
            {"routing": {"fallbacks": [{"provider": "a"}, {"provider": "a"}]}},
            ("routing.fallbacks[1]", "duplicate"),
        ),
        (
            {
                "routing": {
                    "provider": "a",
                    "model": "m",
                    "fallbacks": [{"provider": "a", "model": "m"}],
                }
            },
            ("routing.fallbacks[0]", "duplicate"),
        ),
        (
            {
                "session": {"mode": "persistent", "key": "k"},
                "policies": {"batch_execution": "parallel"},
            },
            ("policies.batch_execution", "incompatible"),
        ),
        ({"session": {"mode": "isolated", "key": "x"}}, ("session", "incompatible")),
        ({"session": {"mode": "persistent"}}, ("session.key", "required")),
        ({"session": {"mode": "thread"}}, ("session.thread_id", "required")),
        (
            {"session": {"mode": "thread", "thread_id": "t", "key": "k"}},
            ("session.key", "incompatible"),
        ),
        ({"timeout_ms": 1_800_001}, ("timeout_ms", "out_of_range")),
        ({"output": {"filename_prefix": "x"}}, ("output.filename_prefix", "incompatible")),
        ({"output": {"directory": "d"}}, ("output", "incompatible")),
        (
            {"output": {"response_format": "artifact", "filename": "a", "filename_prefix": "p"}},
            ("output.filename", "incompatible"),
        ),
        (
            {"output": {"response_format": "url", "directory": ".hidden"}},
            ("output.directory", "invalid"),
        ),
        (
            {"output": {"response_format": "url", "filename": "a b.png"}},
            ("output.filename", "invalid"),
        ),
        ({"reference_images": [{"type": "file", "path": ""}]}, ("reference_images[0]", "empty")),
        ({"reference_images": [{"type": "url", "url": " "}]}, ("reference_images[0]", "empty")),
        (
            {"reference_images": [{"type": "data_url", "data_url": "data:text/plain;base64,AA"}]},
            ("reference_images[0]", "invalid"),
        ),
        ({"reference_images": [{"type": "base64", "data": ""}]}, ("reference_images[0]", "empty")),
        ({"reference_images": [IMAGE] * 17}, ("operation", "too_many_inputs")),
    ],
)
def test_each_issue_code(fields: dict[str, Any], expected: tuple[str, str]) -> None:
    assert expected in pairs(request(**fields))


def test_inline_payload_limit_is_configurable() -> None:
    limits = RequestLimits(max_inline_encoded_bytes=8)
    big = {"type": "data_url", "data_url": "data:image/png;base64," + "A" * 8}
    assert ("reference_images[0]", "too_large") in pairs(request(reference_images=[big]), limits)
    assert ("reference_images[0]", "too_large") in pairs(
        request(reference_images=[{"type": "base64", "data": "A" * 9}]), limits
    )


def test_mask_issue_uses_the_mask_field() -> None:
    assert pairs(edit(mask={"type": "base64", "data": ""})) == [("mask", "empty")]


def test_default_limits_are_the_original_configs_runtime_request_values() -> None:
    """Not the original core's smaller hard-coded defaults (n ≤ 16 where the config says 255)."""
    configured = tomllib.loads(ORIGINAL_CONFIG.read_text())["runtime"]["request"]
    defaults = dataclasses.asdict(RequestLimits())
    assert defaults == configured


def test_n_limits_come_from_configuration_not_core_defaults() -> None:
    assert pairs(request(parameters={"n": 255})) == []
    assert pairs(request(parameters={"n": 40}), RequestLimits(max_outputs=16)) == [
        ("parameters.n", "out_of_range")
    ]


def test_helpers() -> None:
    assert parse_key_color("#00FF00") == (0, 255, 0)
    assert parse_key_color("00ff00") == (0, 255, 0)
    assert parse_key_color("#0f0") is None
    assert is_safe_directory("tests/red")
    assert not is_safe_directory("a//b")
    assert not is_safe_directory("a/../b")
    assert is_safe_filename("hero", _png())
    assert is_safe_filename("hero.PNG", _png())
    assert not is_safe_filename("hero.webp", _png())


def _png() -> Any:
    from imagebridge.contract.enums import OutputFormat

    return OutputFormat.PNG


# -- properties ---------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-300, 70_000) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=12,
)
request_keys = st.sampled_from(
    [
        "version",
        "prompt",
        "negative_prompt",
        "operation",
        "reference_images",
        "images",
        "mask",
        "parameters",
        "routing",
        "session",
        "output",
        "policies",
        "idempotency_key",
        "timeout_ms",
        "user",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(request_keys, json_values, max_size=8))
def test_arbitrary_bodies_raise_only_bridge_errors(body: dict[str, Any]) -> None:
    from imagebridge.contract._base import decode_model

    try:
        req = decode_model(ImageRequest, body, "request body must be valid ImageRequest JSON")
        validate_request(req, LIMITS)
    except BridgeError as error:
        assert error.code is ErrorCode.INVALID_REQUEST


valid_parameters = st.fixed_dictionaries(
    {},
    optional={
        "n": st.integers(1, 255),
        "quality": st.sampled_from(["auto", "low", "medium", "high"]),
        "output_format": st.sampled_from(["png", "jpeg", "webp"]),
        "background": st.sampled_from(["auto", "opaque", "transparent"]),
        "moderation": st.sampled_from(["auto", "low"]),
        "partial_images": st.integers(0, 3),
        "failure_policy": st.sampled_from(["fail_fast", "best_effort"]),
        "size": st.sampled_from(["auto", "1024x1024", "1536x1024"]),
    },
)


@settings(max_examples=200)
@given(
    prompt=st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != ""),
    parameters=valid_parameters,
    negative=st.none() | st.text(min_size=1, max_size=20).filter(lambda s: s.strip() != ""),
)
def test_valid_requests_round_trip(
    prompt: str, parameters: dict[str, Any], negative: str | None
) -> None:
    body: dict[str, Any] = {"operation": "generate", "prompt": prompt, "parameters": parameters}
    if negative is not None:
        body["negative_prompt"] = negative
    req = ImageRequest.model_validate(body)
    validate_request(req, LIMITS)
    again = ImageRequest.model_validate_json(req.model_dump_json())
    assert again == req
    assert again.to_wire() == req.to_wire()
