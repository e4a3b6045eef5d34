"""Hypothesis over everything that reads upstream bytes: only ``BridgeError`` escapes.

* the Codex Responses stream: SSE text (any event mix, any field values, any chunking)
  → :func:`iter_sse_events` → :func:`parse_responses_events`;
* HTTP error answers of the Codex backend and of OpenAI-compatible servers (any status,
  any headers, any body) → their ``classify_http_error`` (which must *return* an error);
* success bodies of the images routes (Codex and OpenAI) and the quota endpoint/headers.

Upstream text is hostile by assumption: a planted canary (standing in for the user's
token) must never appear in an error's message, details or suggestions, whatever field
of the upstream answer it was placed in.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from imagebridge.contract.errors import BridgeError
from imagebridge.providers.codex.wire import (
    classify_http_error,
    parse_images_response,
    parse_rate_limit_headers,
    parse_responses_events,
    parse_usage_payload,
)
from imagebridge.providers.openai import wire as openai_wire
from imagebridge.providers.sse import SseLimits, iter_sse_events
from tests.support.images import png_b64

FUZZ: Final = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SECRET: Final = "tok-CANARY-93b1e0"
NOW: Final = 1_800_000_000.0
REQUEST_ID: Final = re.compile(r"[A-Za-z0-9._:/+=-]{1,256}")


PNG_B64: Final = png_b64(2, 2, (9, 9, 9))

texts = st.text(max_size=30) | st.sampled_from(
    [
        "",
        SECRET,
        f"code_{SECRET}",
        "usage_limit_reached",
        "rate_limit_exceeded",
        "content_policy_violation",
        "moderation_blocked",
        "server_error",
        "server_is_overloaded",
        "invalid_model",
        "insufficient_quota",
        "token_expired",
        "failed",
        "completed",
        "in_progress",
        "generating",
        "refusal",
        "output_text",
        "image_generation_call",
        "message",
        PNG_B64,
        "not-base64!!",
        "A" * 5_000,
        "1e308",
        "-1",
        "NaN",
    ]
)
numbers = (
    st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, -1, 1, 2**31, 2**53 + 1, 1e300, -1e300])
)
leaves = st.none() | st.booleans() | numbers | texts
json_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "code",
                    "message",
                    "error",
                    "status",
                    "result",
                    "item",
                    "response",
                    "output",
                    "content",
                    "refusal",
                    "text",
                    "usage",
                    "resets_at",
                    "resets_in_seconds",
                    "partial_image_b64",
                    "partial_image_index",
                    "revised_prompt",
                    "moderation_details",
                    "stage",
                    "categories",
                    "data",
                    "b64_json",
                    "rate_limit",
                    "primary_window",
                    "secondary_window",
                    "used_percent",
                    "limit_window_seconds",
                    "reset_after_seconds",
                    "reset_at",
                    "plan_type",
                    "input_tokens",
                    "output_tokens",
                    "total_tokens",
                ]
            )
            | st.text(max_size=10),
            inner,
            max_size=6,
        )
    ),
    max_leaves=30,
)
EVENT_TYPES: Final = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.output_item.done",
    "response.image_generation_call.partial_image",
    "response.image_generation_call.in_progress",
    "response.completed",
    "response.failed",
    "response.incomplete",
    "error",
    "future.unknown_event",
]


@st.composite
def responses_events(draw: st.DrawFn) -> dict[str, Any]:
    """One Responses event: a known type with plausible, then arbitrary, fields."""
    event: dict[str, Any] = {"type": draw(st.sampled_from(EVENT_TYPES) | texts)}
    item = {
        "type": draw(st.sampled_from(["image_generation_call", "message"]) | texts),
        "status": draw(st.sampled_from(["completed", "failed", "generating"]) | texts),
        "result": draw(st.sampled_from([PNG_B64, ""]) | texts),
        "content": draw(
            st.lists(
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["output_text", "refusal"]) | texts, "text": texts}
                ),
                max_size=2,
            )
            | json_values
        ),
        "revised_prompt": draw(texts),
    }
    error = {
        "code": draw(texts),
        "message": draw(texts),
        "resets_at": draw(numbers | texts),
        "moderation_details": draw(json_values),
    }
    optional: dict[str, Any] = {
        "item": item,
        "response": {"status": draw(texts), "error": error, "output": [item]},
        "error": error,
        "partial_image_b64": draw(st.sampled_from([PNG_B64]) | texts),
        "partial_image_index": draw(numbers),
        "usage": draw(json_values),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=3)):
        event[key] = optional[key]
    for key, value in draw(st.dictionaries(texts, json_values, max_size=2)).items():
        event.setdefault(key, value)
    return event


@st.composite
def sse_streams(draw: st.DrawFn) -> list[bytes]:
    blocks: list[str] = []
    for event in draw(st.lists(responses_events() | json_values, max_size=8)):
        data = json.dumps(event)
        if draw(st.integers(0, 9)) == 0:
            data = data[: len(data) // 2]  # a cut-off JSON document
        name = event.get("type") if isinstance(event, dict) else None
        prefix = f"event: {name}\n" if isinstance(name, str) and draw(st.booleans()) else ""
        blocks.append(f"{prefix}data: {data}\n\n")
    if draw(st.booleans()):
        blocks.append("data: [DONE]\n\n")
    raw = "".join(blocks).encode()
    cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=6)))
    return [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]


def _assert_clean(error: BridgeError) -> None:
    """The error is well-formed and repeats nothing secret from upstream."""
    assert isinstance(error, BridgeError)
    shown = error.to_dict()
    # An upstream request id is passed through on purpose, but only in a safe shape.
    request_id = shown.pop("upstream_request_id", None)
    assert request_id is None or REQUEST_ID.fullmatch(request_id), request_id
    body = json.dumps(shown, default=str)
    assert SECRET not in body, body
    assert len(error.message) < 1_000
    json.loads(body)


LIMITS: Final = SseLimits(max_line_bytes=64 * 1024, max_event_bytes=64 * 1024, max_events=64)


@pytest.mark.slow
@FUZZ
@given(chunks=sse_streams())
@example(chunks=[b'data: {"type": []}\n\n', b'data: {"type": {"a": 1}}\n\n'])
def test_responses_streams_end_in_a_result_or_a_clean_error(chunks: list[bytes]) -> None:
    try:
        result = parse_responses_events(
            iter_sse_events(chunks, LIMITS), clock=lambda: NOW, secrets=[SECRET]
        )
    except BridgeError as error:
        _assert_clean(error)
    else:
        assert result.image_b64
        assert SECRET not in repr(result)


headers = st.dictionaries(
    st.sampled_from(
        [
            "retry-after",
            "Retry-After",
            "x-request-id",
            "x-oai-request-id",
            "x-codex-primary-used-percent",
            "x-codex-primary-window-minutes",
            "x-codex-primary-reset-after-seconds",
            "x-codex-primary-reset-at",
            "x-codex-secondary-used-percent",
            "x-codex-plan-type",
            "content-type",
        ]
    )
    | st.text(max_size=12),
    texts | numbers.map(str),
    max_size=6,
)
bodies = (
    st.binary(max_size=512)
    | json_values.map(lambda value: json.dumps(value).encode())
    | st.builds(
        lambda code, message, kind, extra: json.dumps(
            {"error": {"code": code, "message": message, "type": kind, **extra}}
        ).encode(),
        texts,
        texts,
        texts,
        st.dictionaries(st.sampled_from(["resets_at", "resets_in_seconds", "param"]), leaves),
    )
)


@FUZZ
@given(status=st.integers(100, 599), head=headers, body=bodies)
def test_http_errors_always_classify_to_a_clean_error(
    status: int, head: dict[str, str], body: bytes
) -> None:
    codex = classify_http_error(status, head, body, now=NOW, secrets=[SECRET])
    _assert_clean(codex)
    compatible = openai_wire.classify_http_error(status, head, body, secrets=[SECRET], now=NOW)
    _assert_clean(compatible)
    for error in (codex, compatible):
        retry_after = error.details.get("retry_after_ms")
        assert retry_after is None or (isinstance(retry_after, int) and retry_after >= 0)


@FUZZ
@given(payload=json_values)
def test_success_bodies_parse_or_fail_cleanly(payload: Any) -> None:
    for parse in (
        lambda: parse_images_response(payload),
        lambda: openai_wire.parse_images_payload(payload, max_base64_chars=1 << 20),
        lambda: parse_usage_payload(payload, now=NOW),
    ):
        try:
            parsed = parse()
        except BridgeError as error:
            _assert_clean(error)
        else:
            assert SECRET not in repr(parsed)


@FUZZ
@given(head=headers)
def test_rate_limit_headers_never_raise(head: dict[str, str]) -> None:
    snapshot = parse_rate_limit_headers(head, now=NOW)
    if snapshot is not None:
        json.dumps(snapshot.to_dict())


def test_an_event_type_that_is_not_a_string_is_ignored_like_an_unknown_event() -> None:
    """Found by the fuzz above: ``{"type": []}`` raised TypeError inside the fold."""
    image = {"type": "image_generation_call", "status": "completed", "result": PNG_B64}
    events = [
        {"type": []},
        {"type": {"nested": True}},
        {"type": "response.output_item.done", "item": image},
        {"type": "response.completed", "response": {}},
    ]
    chunks = [f"data: {json.dumps(event)}\n\n".encode() for event in events]
    result = parse_responses_events(iter_sse_events(chunks), clock=lambda: NOW)
    assert result.image_b64 == PNG_B64
