"""Pure wire mappings of the OpenAI provider: request fields, streams, usage, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.providers.openai.models import (
    CapabilityOverrides,
    apply_overrides,
    profile_for,
)
from imagebridge.providers.openai.wire import (
    StreamState,
    classify_http_error,
    parse_images_payload,
    parse_usage,
    request_fields,
    retry_after_ms,
    sanitize_code,
)

NOW = 1_700_000_000.0


def req(**parameters: Any) -> ImageRequest:
    return ImageRequest.model_validate(
        {"operation": "generate", "prompt": "p", "parameters": parameters}
    )


def event(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


def test_request_fields_leave_defaults_out_and_map_per_family() -> None:
    gpt = profile_for("gpt-image-1")
    assert request_fields(req(), gpt, "gpt-image-1", with_inputs=False) == {
        "model": "gpt-image-1",
        "prompt": "p",
        "n": 1,
    }
    fields = request_fields(
        req(input_fidelity="high", partial_images=2), gpt, "gpt-image-1", with_inputs=True
    )
    assert (fields["input_fidelity"], fields["stream"], fields["partial_images"]) == (
        "high",
        True,
        2,
    )
    assert "input_fidelity" not in request_fields(
        req(input_fidelity="high"), gpt, "gpt-image-1", with_inputs=False
    )
    dalle3 = profile_for("dall-e-3")
    assert (
        request_fields(req(quality="medium"), dalle3, "dall-e-3", with_inputs=False)["quality"]
        == "standard"
    )
    assert "quality" not in request_fields(req(), dalle3, "dall-e-3", with_inputs=False)


def test_profiles_by_name_and_prefix() -> None:
    assert profile_for("gpt-image-7").family == "gpt-image"
    assert profile_for("chatgpt-image-latest").generation is False
    assert profile_for("stable-diffusion-xl").family == "generic"
    assert profile_for("gpt-image-2-2026-04-21") == profile_for("gpt-image-2")


def test_overrides_keep_transparency_and_backgrounds_consistent() -> None:
    gpt = profile_for("gpt-image-1")
    opaque_only = apply_overrides(gpt, CapabilityOverrides(backgrounds=("auto", "opaque")))
    assert opaque_only.transparent_background.value == "unsupported"
    emulated = apply_overrides(gpt, CapabilityOverrides(transparent_background="emulated"))
    assert "transparent" not in emulated.backgrounds
    generic = apply_overrides(
        profile_for("sd"), CapabilityOverrides(transparent_background="native")
    )
    assert "transparent" in generic.backgrounds
    generic.capabilities("x", "sd").validate_consistency()


def test_stream_state_attributes_partials_to_the_output_in_progress() -> None:
    state = StreamState(2, max_base64_chars=1000)
    handled = [
        state.handle(
            None, event("image_generation.partial_image", b64_json="AA", partial_image_index=0)
        ),
        state.handle(
            None, event("image_generation.completed", b64_json="BB", usage={"input_tokens": 1})
        ),
        state.handle(None, event("image_generation.partial_image", b64_json="CC")),
        state.handle(
            None, event("image_generation.completed", b64_json="DD", usage={"input_tokens": 2})
        ),
        state.handle(None, event("image_generation.partial_image", b64_json="EE")),
        state.handle(None, event("some.future.event", opaque=True)),
    ]
    partials = [(p.index, p.partial_index) for p in handled if p is not None]
    assert partials == [(0, 0), (1, 0), (1, 1)]
    assert [image.b64_json for image in state.images] == ["BB", "DD"]
    assert state.usage is not None and state.usage.input_tokens == 3
    with pytest.raises(BridgeError) as caught:
        state.handle(None, event("image_generation.completed", b64_json="FF"))
    assert "more images" in str(caught.value)


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (
            {"type": "error", "error": {"code": "content_policy_violation"}},
            ErrorCode.SAFETY_REJECTED,
        ),
        ({"type": "error", "error": {"type": "server_error"}}, ErrorCode.UPSTREAM),
        ({"error": {"code": "rate_limit_exceeded"}}, ErrorCode.RATE_LIMITED),
    ],
)
def test_stream_errors_are_classified(payload: dict[str, Any], code: ErrorCode) -> None:
    with pytest.raises(BridgeError) as caught:
        StreamState(1, max_base64_chars=10).handle("error", json.dumps(payload))
    assert caught.value.code is code


def test_stream_events_must_be_json_objects() -> None:
    for data in ("not json", "[1, 2]"):
        with pytest.raises(BridgeError) as caught:
            StreamState(1, max_base64_chars=10).handle(None, data)
        assert caught.value.code is ErrorCode.PROTOCOL


def test_oversized_images_are_refused_while_parsing() -> None:
    with pytest.raises(BridgeError) as caught:
        parse_images_payload({"data": [{"b64_json": "A" * 11}]}, max_base64_chars=10)
    assert caught.value.code is ErrorCode.PROTOCOL
    result = parse_images_payload(
        {"data": [{"url": "data:image/png;base64,AAAA", "revised_prompt": "r"}]},
        max_base64_chars=100,
    )
    assert result.images[0].url is not None and result.images[0].revised_prompt == "r"


def test_usage_keeps_the_image_and_text_split() -> None:
    usage = parse_usage(
        {
            "input_tokens": 50,
            "output_tokens": 4160,
            "total_tokens": 4210,
            "input_tokens_details": {"text_tokens": 40, "image_tokens": 10},
            "output_tokens_details": {"image_tokens": 4160},
        }
    )
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (50, 4160, 4210)
    assert usage.provider == {
        "input_image_tokens": 10,
        "input_text_tokens": 40,
        "output_image_tokens": 4160,
    }
    assert parse_usage({"input_tokens": -1, "output_tokens": True}) is None
    assert parse_usage("nope") is None


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7000),
        ({"retry-after": "1.5"}, 1500),
        ({"retry-after-ms": "250", "retry-after": "9"}, 250),
        ({"retry-after": "Tue, 14 Nov 2023 22:13:30 GMT"}, 10_000),
        ({"retry-after": "99999999"}, 86_400_000),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], expected: int | None) -> None:
    assert retry_after_ms(headers, NOW) == expected


def test_error_bodies_are_read_only_up_to_the_bound() -> None:
    body = json.dumps({"error": {"code": "moderation_blocked", "pad": "x" * 70_000}}).encode()
    error = classify_http_error(400, {}, body)
    assert error.code is ErrorCode.INVALID_REQUEST  # the truncated body is not parsed
    small = json.dumps({"error": {"code": "moderation_blocked"}}).encode()
    assert classify_http_error(400, {}, small).code is ErrorCode.SAFETY_REJECTED


@pytest.mark.parametrize(
    ("status", "body", "code", "retryable"),
    [
        (400, b"not json", ErrorCode.INVALID_REQUEST, False),
        (408, b"", ErrorCode.UPSTREAM, True),
        (413, b"", ErrorCode.INPUT, False),
        (409, b"", ErrorCode.UPSTREAM, False),
        (502, b"<html>", ErrorCode.UPSTREAM, True),
        (403, b'{"error": {"code": "billing_hard_limit_reached"}}', ErrorCode.RATE_LIMITED, False),
        (
            400,
            b'{"error": {"message": "Your request was rejected by the safety system"}}',
            ErrorCode.SAFETY_REJECTED,
            False,
        ),
    ],
)
def test_status_table(status: int, body: bytes, code: ErrorCode, retryable: bool) -> None:
    error = classify_http_error(status, {}, body)
    assert (error.code, error.retryable) == (code, retryable)
    assert error.details["http_status"] == status


def test_upstream_text_never_reaches_the_error() -> None:
    body = json.dumps(
        {"error": {"message": "prompt: a cat named Bob", "code": "x y\nz", "param": "p" * 200}}
    ).encode()
    error = classify_http_error(400, {}, body)
    text = json.dumps(error.to_dict())
    assert "Bob" not in text
    assert error.details["upstream_code"] == "xyz"
    assert len(error.details["upstream_param"]) == 64


def test_codes_echoing_a_secret_are_redacted() -> None:
    assert sanitize_code("bad key sk-abcdef123456", ["sk-abcdef123456"]) == "redacted"
    assert sanitize_code("abcdef12", ["xxabcdef12yy"]) == "redacted"
    assert sanitize_code("rate_limit_exceeded", ["sk-abc"]) == "rate_limit_exceeded"
    assert sanitize_code("", []) is None and sanitize_code(5, []) is None


def bridge_body(native: dict[str, Any]) -> bytes:
    return json.dumps(
        {"error": {"message": "m", "type": "api_error", "code": "x", "imagegen_bridge": native}}
    ).encode()


def test_an_upstream_bridges_own_error_is_kept_precise() -> None:
    ambiguous = classify_http_error(
        502,
        {},
        bridge_body(
            {
                "code": "upstream",
                "retryable": False,
                "details": {"outcome": "unknown", "retry_scope": "do_not_retry_full_batch"},
            }
        ),
    )
    assert ambiguous.code is ErrorCode.UPSTREAM
    assert ambiguous.outcome_unknown and not ambiguous.retryable
    assert ambiguous.details["retry_scope"] == "do_not_retry_full_batch"
    limited = classify_http_error(
        429,
        {},
        bridge_body(
            {"code": "rate_limited", "retryable": True, "details": {"retry_after_ms": 4000}}
        ),
    )
    assert (limited.code, limited.retryable, limited.details["retry_after_ms"]) == (
        ErrorCode.RATE_LIMITED,
        True,
        4000,
    )
    refused = classify_http_error(
        422, {}, bridge_body({"code": "safety_rejected", "details": {"secret": "x" * 10}})
    )
    assert refused.code is ErrorCode.SAFETY_REJECTED and "secret" not in refused.details
    unknown_code = classify_http_error(500, {}, bridge_body({"code": "made_up"}))
    assert (unknown_code.code, unknown_code.retryable) == (ErrorCode.UPSTREAM, True)
