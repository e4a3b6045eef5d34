"""The Codex wire functions, alone and against the real bytes of the loopback mock."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import io
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import pytest
from PIL import Image

from imagebridge.contract.enums import Background, Moderation, OutputFormat, Quality
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex.auth import CODEX_LOGIN_SUGGESTION, CodexCredentials
from imagebridge.providers.codex.wire import (
    MAX_ERROR_BODY_BYTES,
    SUPPORTED_IMAGE_MODELS,
    CodexPartialImage,
    ResponsesResult,
    ResponsesStreamState,
    TokenUsage,
    backend_urls,
    build_images_request,
    build_responses_body,
    build_responses_headers,
    check_backend_url,
    classify_http_error,
    classify_upstream_code,
    decode_image_base64,
    derive_usage_url,
    encode_json_body,
    parse_images_response,
    parse_json_body,
    parse_responses_events,
    sanitize_upstream_code,
    stream_failure_error,
    transport_error,
    wrap_prompt,
)
from imagebridge.providers.sse import SseEvent, aiter_sse_events, iter_sse_events
from tests.support.codex_backend import (
    FIXTURE_SSE_PATH,
    Behaviour,
    CodexBackend,
    codex_backend_fixture,  # noqa: F401 - registers the `codex_backend` fixture
)
from tests.support.fixture_files import CODEX_ADVANCED_REQUEST

ADVANCED_REQUEST = CODEX_ADVANCED_REQUEST
TOKEN = "tok-SECRET-wire-5b1e2f9a"
ACCOUNT = "acct-SECRET-wire-77"
CREDENTIALS = CodexCredentials(TOKEN, ACCOUNT)
NOW = 1_800_000_000.0
PNG = b"\x89PNG\r\n\x1a\nfake"
JPEG = b"\xff\xd8\xffjpeg"
WEBP = b"RIFF....WEBPVP8 "


def events(*payloads: Mapping[str, Any], name: str | None = None) -> list[SseEvent]:
    return [SseEvent(name, json.dumps(payload)) for payload in payloads]


def completed(output: list[Any] | None = None, usage: Any = None) -> dict[str, Any]:
    response: dict[str, Any] = {"status": "completed"}
    if output is not None:
        response["output"] = output
    if usage is not None:
        response["usage"] = usage
    return {"type": "response.completed", "response": response}


def image_done(result: str = "QUJD", **extra: Any) -> dict[str, Any]:
    item = {"type": "image_generation_call", "status": "completed", "result": result, **extra}
    return {"type": "response.output_item.done", "item": item}


def fold(*payloads: Mapping[str, Any], **kwargs: Any) -> ResponsesResult:
    return parse_responses_events(events(*payloads), clock=lambda: NOW, **kwargs)


def fold_error(*payloads: Mapping[str, Any], **kwargs: Any) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        fold(*payloads, **kwargs)
    return caught.value


def rendered(error: BridgeError) -> str:
    return f"{error} {error!r} {json.dumps(error.to_dict())}"


# -- URLs --------------------------------------------------------------------------------------


def test_default_backend_urls() -> None:
    urls = backend_urls()
    assert urls.responses == "https://chatgpt.com/backend-api/codex/responses"
    assert urls.images_generations == "https://chatgpt.com/backend-api/codex/images/generations"
    assert urls.images_edits == "https://chatgpt.com/backend-api/codex/images/edits"
    assert urls.usage == "https://chatgpt.com/backend-api/wham/usage"


@pytest.mark.parametrize(
    ("endpoint", "usage"),
    [
        (
            "https://chatgpt.com/backend-api/codex/responses",
            "https://chatgpt.com/backend-api/wham/usage",
        ),
        (
            "https://chatgpt.com/backend-api/codex/responses/",
            "https://chatgpt.com/backend-api/wham/usage",
        ),
        (
            "http://127.0.0.1:9/backend-api/codex/responses?x=1",
            "http://127.0.0.1:9/backend-api/wham/usage",
        ),
        ("https://proxy.example/v1/responses", "https://proxy.example/v1/wham/usage"),
    ],
)
def test_usage_url_is_derived_from_the_responses_endpoint(endpoint: str, usage: str) -> None:
    assert derive_usage_url(endpoint) == usage


def test_usage_url_override_wins() -> None:
    urls = backend_urls(usage_url="https://usage.example/wham/usage")
    assert urls.usage == "https://usage.example/wham/usage"


@pytest.mark.parametrize(
    "url",
    [
        "https://chatgpt.com/backend-api/codex/responses",
        "http://127.0.0.1:8080/x",
        "http://localhost/x",
        "http://[::1]:1/x",
        "http://127.0.0.2/x",
    ],
)
def test_backend_url_accepts_https_and_loopback_http(url: str) -> None:
    assert check_backend_url(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "http://chatgpt.com/backend-api/codex/responses",
        "http://10.0.0.1/x",
        "https://user:pass@chatgpt.com/x",
        "https://chatgpt.com/x#frag",
        "ftp://chatgpt.com/x",
        "/relative/path",
        "https://chatgpt.com:99999/x",
    ],
)
def test_backend_url_refuses_places_a_token_must_not_go(url: str) -> None:
    with pytest.raises(BridgeError) as caught:
        check_backend_url(url, field="endpoint")
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details == {"field": "endpoint"}


def test_bad_usage_override_names_its_own_field() -> None:
    with pytest.raises(BridgeError) as caught:
        backend_urls(usage_url="http://example.com/wham/usage")
    assert caught.value.details == {"field": "usage_endpoint"}


# -- request body ------------------------------------------------------------------------------


def test_advanced_request_fixture_is_reproduced_exactly() -> None:
    expected = json.loads(ADVANCED_REQUEST.read_text(encoding="utf-8"))
    body = build_responses_body(
        "test",
        size="1536x1024",
        quality="high",
        output_format="webp",
        background="opaque",
        moderation="low",
        output_compression=80,
        partial_images=2,
    )
    assert body == expected
    assert list(body["tools"][0]) == list(expected["tools"][0])
    assert json.loads(encode_json_body(body)) == expected


def test_contract_enums_are_accepted_and_serialise_as_strings() -> None:
    body = build_responses_body(
        "test",
        quality=Quality.HIGH,
        output_format=OutputFormat.WEBP,
        background=Background.OPAQUE,
        moderation=Moderation.LOW,
    )
    tool = json.loads(encode_json_body(body))["tools"][0]
    assert (tool["quality"], tool["output_format"], tool["background"], tool["moderation"]) == (
        "high",
        "webp",
        "opaque",
        "low",
    )


def test_defaults_send_only_the_required_tool_keys() -> None:
    body = build_responses_body(
        "a red fox",
        quality="auto",
        background="auto",
        moderation="auto",
        action="auto",
        partial_images=0,
    )
    assert body == {
        "model": "gpt-5.5",
        "instructions": "You are an image generation assistant.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "a red fox"}],
            }
        ],
        "tools": [
            {
                "type": "image_generation",
                "model": "gpt-image-2",
                "size": "auto",
                "output_format": "png",
            }
        ],
        "tool_choice": {"type": "image_generation"},
        "stream": True,
        "store": False,
    }


def test_models_and_action_are_passed_through() -> None:
    body = build_responses_body(
        "p", image_model="gpt-image-1", responses_model="gpt-x", action="edit"
    )
    assert body["model"] == "gpt-x"
    assert body["tools"][0]["model"] == "gpt-image-1"
    assert body["tools"][0]["action"] == "edit"


@pytest.mark.parametrize(
    ("model", "sent"), [("gpt-image-2", False), ("gpt-image-1", True), ("gpt-image-1.5", True)]
)
def test_input_fidelity_only_for_models_other_than_gpt_image_2(model: str, sent: bool) -> None:
    tool = build_responses_body("p", image_model=model, input_fidelity="high")["tools"][0]
    assert ("input_fidelity" in tool) is sent


def test_output_compression_zero_is_sent() -> None:
    assert build_responses_body("p", output_compression=0)["tools"][0]["output_compression"] == 0


def test_edit_sends_sources_then_references_as_data_urls() -> None:
    body = build_responses_body(
        "make it blue",
        operation="edit",
        sources=[("image/png", PNG), ("image/jpeg", JPEG)],
        references=[("image/webp", WEBP)],
    )
    content = body["input"][0]["content"]
    assert content[0] == {
        "type": "input_text",
        "text": "Edit the first 2 attached source image(s) according to the prompt. The following "
        "1 attached image(s) are visual references only. Prompt: make it blue",
    }
    assert [part["image_url"] for part in content[1:]] == [
        "data:image/png;base64," + base64.b64encode(PNG).decode(),
        "data:image/jpeg;base64," + base64.b64encode(JPEG).decode(),
        "data:image/webp;base64," + base64.b64encode(WEBP).decode(),
    ]
    assert all(part["type"] == "input_image" and part["detail"] == "auto" for part in content[1:])


@pytest.mark.parametrize(
    ("operation", "sources", "references", "text"),
    [
        ("generate", 0, 0, "P"),
        (
            "generate",
            0,
            2,
            "Generate an image using the 2 attached image(s) as visual references. Prompt: P",
        ),
        ("edit", 1, 0, "P"),
        (
            "edit",
            3,
            1,
            "Edit the first 3 attached source image(s) according to the prompt. The following 1 "
            "attached image(s) are visual references only. Prompt: P",
        ),
    ],
)
def test_prompt_wrapping_rules(operation: str, sources: int, references: int, text: str) -> None:
    assert wrap_prompt("P", operation, sources, references) == text
    body = build_responses_body(
        "P",
        operation=operation,
        sources=[("image/png", PNG)] * sources,
        references=[("image/png", PNG)] * references,
    )
    assert body["input"][0]["content"][0]["text"] == text
    assert len(body["input"][0]["content"]) == 1 + sources + references


def test_unsupported_image_model_is_refused_with_the_supported_list() -> None:
    with pytest.raises(BridgeError) as caught:
        build_responses_body("p", image_model="dall-e-3")
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert caught.value.details == {
        "field": "routing.model",
        "requested_model": "dall-e-3",
        "supported_models": list(SUPPORTED_IMAGE_MODELS),
    }


@pytest.mark.parametrize(("media", "data"), [("image/gif", b"GIF89a"), ("image/png", b"")])
def test_unusable_input_images_are_input_errors(media: str, data: bytes) -> None:
    with pytest.raises(BridgeError) as caught:
        build_responses_body("p", references=[(media, data)])
    assert caught.value.code is ErrorCode.INPUT


@pytest.mark.parametrize(
    "kwargs",
    [
        {"partial_images": 4},
        {"partial_images": -1},
        {"output_compression": 101},
        {"output_compression": True},
        {"size": "big"},
        {"size": "0x10"},
        {"quality": "ultra"},
        {"output_format": "gif"},
        {"moderation": "high"},
        {"operation": "upscale"},
        {"sources": [("image/png", PNG)]},
    ],
)
def test_out_of_contract_values_are_invalid_requests(kwargs: dict[str, Any]) -> None:
    with pytest.raises(BridgeError) as caught:
        build_responses_body("p", **kwargs)
    assert caught.value.code is ErrorCode.INVALID_REQUEST


def test_blank_prompt_is_refused() -> None:
    with pytest.raises(BridgeError) as caught:
        build_responses_body("   ")
    assert caught.value.details["field"] == "prompt"


# -- headers -----------------------------------------------------------------------------------


def test_responses_headers_are_exactly_those_of_the_original() -> None:
    assert list(build_responses_headers(CREDENTIALS).items()) == [
        ("Authorization", f"Bearer {TOKEN}"),
        ("ChatGPT-Account-Id", ACCOUNT),
        ("originator", "imagegen-bridge"),
        ("Accept", "text/event-stream"),
        ("Content-Type", "application/json"),
    ]


def test_account_header_is_left_out_without_an_account_id() -> None:
    headers = build_responses_headers(CodexCredentials(TOKEN))
    assert "ChatGPT-Account-Id" not in headers
    assert len(headers) == 4


# -- stream folding ----------------------------------------------------------------------------


def test_recorded_fixture_folds_into_its_result() -> None:
    result = parse_responses_events(iter_sse_events([FIXTURE_SSE_PATH.read_bytes()]))
    assert result.image_b64 == "final"
    assert result.revised_prompt == "revised"
    assert result.usage == TokenUsage(2, 3, 5)
    assert result.partial_images == (CodexPartialImage(index=0, partial_index=0, b64="partial"),)
    assert result.output_item_types == frozenset({"image_generation_call"})


def test_partial_images_are_returned_as_progress_with_the_output_index() -> None:
    state = ResponsesStreamState(output_index=3)
    first = state.handle(
        SseEvent(
            None,
            json.dumps(
                {"type": "response.image_generation_call.partial_image", "partial_image": "AA"}
            ),
        )
    )
    second = state.handle(
        SseEvent(
            None,
            json.dumps(
                {"type": "response.image_generation_call.partial_image", "partial_image_b64": "BB"}
            ),
        )
    )
    third = state.handle(
        SseEvent(
            None,
            json.dumps(
                {
                    "type": "response.image_generation_call.partial_image",
                    "partialImageIndex": 7,
                    "partial_image_b64": "CC",
                }
            ),
        )
    )
    assert [first, second, third] == [
        CodexPartialImage(3, 0, "AA"),
        CodexPartialImage(3, 1, "BB"),
        CodexPartialImage(3, 7, "CC"),
    ]
    assert state.partial_images == (first, second, third)
    assert state.handle(SseEvent(None, json.dumps(image_done()))) is None


@pytest.mark.parametrize("index", [256, -1, "1", True])
def test_partial_index_must_fit_a_byte(index: object) -> None:
    partial = {
        "type": "response.image_generation_call.partial_image",
        "partial_image_b64": "AA",
        "partial_image_index": index,
    }
    assert fold_error(partial, image_done(), completed()).code is ErrorCode.PROTOCOL


async def test_large_events_are_parsed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    offloaded: list[int] = []
    real_to_thread = asyncio.to_thread

    async def spy(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        offloaded.append(len(args[0].data))
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", spy)
    state = ResponsesStreamState()
    big = image_done("A" * 2_000)
    assert await state.ahandle(SseEvent(None, json.dumps(big)), offload_over=1_000) is None
    assert await state.ahandle(SseEvent(None, json.dumps(completed()))) is None
    assert offloaded == [len(json.dumps(big))]
    assert state.finish().image_b64 == "A" * 2_000


def test_event_name_is_ignored_and_json_type_decides() -> None:
    stream = [
        SseEvent("response.completed", json.dumps(image_done())),
        SseEvent("error", json.dumps(completed())),
    ]
    assert parse_responses_events(stream).image_b64 == "QUJD"


def test_unknown_events_are_ignored() -> None:
    result = fold(
        {"type": "response.created"}, {"type": "x.future"}, {"nope": 1}, image_done(), completed()
    )
    assert result.image_b64 == "QUJD"


def test_final_image_can_come_only_with_response_completed() -> None:
    item = image_done(revisedPrompt="camel")["item"]
    result = fold(completed([item], usage={"input_tokens": 1, "total_tokens": 9}))
    assert result.image_b64 == "QUJD"
    assert result.revised_prompt == "camel"
    assert result.usage == TokenUsage(input_tokens=1, total_tokens=9)


def test_repeated_final_image_is_tolerated_but_a_different_one_is_not() -> None:
    item = image_done()["item"]
    assert fold(image_done(), completed([item])).image_b64 == "QUJD"
    error = fold_error(image_done(), completed([{**item, "result": "WFla"}]))
    assert error.code is ErrorCode.PROTOCOL
    assert "multiple final images" in error.message


def test_oversized_revised_prompt_is_dropped() -> None:
    result = fold(image_done(revised_prompt="r" * (128 * 1024 + 1)), completed())
    assert result.revised_prompt is None
    assert (
        fold(image_done(revised_prompt="é" * (64 * 1024)), completed()).revised_prompt is not None
    )


def test_base64_size_cap_applies_to_final_and_partial_images() -> None:
    assert (
        fold_error(image_done("A" * 9), completed(), max_base64_chars=8).code is ErrorCode.PROTOCOL
    )
    partial = {"type": "response.image_generation_call.partial_image", "partial_image_b64": "A" * 9}
    assert fold_error(partial, max_base64_chars=8).details["limit"] == "max_base64_chars"


def test_stream_that_ends_before_completed_without_an_image_is_a_protocol_error() -> None:
    partial = {"type": "response.image_generation_call.partial_image", "partial_image_b64": "AA"}
    for payloads in ((partial,), (image_done(result=""),), ()):
        error = fold_error(*payloads)
        assert error.code is ErrorCode.PROTOCOL
        assert error.message == (
            "The Codex stream ended before response.completed without a complete image."
        )


def test_a_final_image_still_generating_is_delivered_without_completed() -> None:
    """openai/codex PR #28656: the last item carries the whole image, status generating."""
    result = fold(image_done(status="generating", id="ig_1", revised_prompt="r"))
    assert result.image_b64 == "QUJD"
    assert result.revised_prompt == "r"
    assert result.image_call_statuses == frozenset({"generating"})
    assert result.usage is None


def test_one_image_in_many_events_counts_once() -> None:
    """kittors/CliRelay PR #954: the same image under several events and item ids."""
    state = ResponsesStreamState(keep_partials=False)
    image = "QUJD" * 1000
    partial = {"type": "response.image_generation_call.partial_image", "partial_image_b64": "AA"}
    forwarded = [
        state.handle_payload(payload)
        for payload in (
            partial,
            {**partial, "partial_image_index": 1},  # the same preview again
            image_done(image, id="ig_1"),
            image_done(image, id="ig_2"),  # another id, the same bytes
            image_done(image, id="ig_1"),
            {**partial, "partial_image_b64": image},  # a late preview of the final
            completed([image_done(image, id="ig_1")["item"], image_done(image)["item"]]),
        )
    ]
    assert [p.b64 if p else None for p in forwarded] == ["AA", None, None, None, None, None, None]
    assert state.duplicate_images == 6
    assert state.retained_chars == len(image)  # one image, not five
    assert state.finish().image_b64 == image


def test_the_same_item_id_replaces_its_image_but_a_new_id_and_content_is_a_second_image() -> None:
    assert fold(
        image_done("AAAA", id="ig"), image_done("QUJD", id="ig"), completed()
    ).image_b64 == ("QUJD")
    error = fold_error(image_done("AAAA", id="ig_1"), image_done("QUJD", id="ig_2"))
    assert "multiple final images" in error.message


@pytest.mark.parametrize("data", ["{not json", "[1, 2]", '"text"'])
def test_event_that_is_not_a_json_object_is_a_protocol_error(data: str) -> None:
    with pytest.raises(BridgeError) as caught:
        parse_responses_events([SseEvent(None, data)])
    assert caught.value.code is ErrorCode.PROTOCOL


def test_recorded_failure_wins_over_a_later_image() -> None:
    failed = {"type": "response.failed", "response": {"error": {"code": "server_error"}}}
    error = fold_error(failed, image_done(), completed())
    assert (error.code, error.retryable) == (ErrorCode.UPSTREAM, True)
    state = ResponsesStreamState()
    state.handle(SseEvent(None, json.dumps(failed)))
    assert state.failure is not None and state.failure.details["upstream_code"] == "server_error"


def test_completed_with_refusal_is_a_safety_rejection() -> None:
    message = {
        "type": "message",
        "content": [{"type": "refusal", "refusal": "no"}, {"type": "output_text"}],
    }
    error = fold_error(completed([message]))
    assert error.code is ErrorCode.SAFETY_REJECTED
    assert error.retryable is False
    assert error.details["upstream_code"] == "completed_with_refusal"
    assert error.details["message_content_types"] == ["output_text", "refusal"]
    assert error.details["recovery"] == "revise_prompt_or_inputs"


def test_failed_image_call_is_retryable_upstream() -> None:
    call = {"type": "image_generation_call", "status": "failed", "result": ""}
    error = fold_error(completed([call]))
    assert (error.code, error.retryable) == (ErrorCode.UPSTREAM, True)
    assert error.details["upstream_code"] == "image_call_failed"
    assert error.details["image_call_statuses"] == ["failed"]


def test_completed_without_image_reports_only_closed_diagnostic_sets() -> None:
    output = [
        {
            "type": "message",
            "content": [
                {"type": "output_text", "text": "SECRET PROMPT ECHO"},
                {"x": 1},
                {"type": "audio"},
            ],
        },
        {"type": "reasoning", "summary": ["SECRET"]},
        {"type": "brand_new_item"},
        {"no_type": True},
        "not-an-object",
        {"type": "image_generation_call", "status": "queued"},
        {"type": "image_generation_call"},
    ]
    error = fold_error(completed(output))
    assert (error.code, error.retryable) == (ErrorCode.UPSTREAM, True)
    assert error.details == {
        "upstream_code": "completed_without_image",
        "output_item_types": ["image_generation_call", "message", "missing", "other", "reasoning"],
        "message_content_types": ["missing", "other", "output_text"],
        "image_call_statuses": ["missing", "other"],
    }
    assert "SECRET" not in rendered(error)


# -- in-stream failure classification ----------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "native", "retryable"),
    [
        ("invalid_auth", ErrorCode.AUTHENTICATION, False),
        ("token_expired", ErrorCode.AUTHENTICATION, False),
        ("permission_error", ErrorCode.PERMISSION_DENIED, False),
        ("no_entitlement", ErrorCode.PERMISSION_DENIED, False),
        ("Forbidden", ErrorCode.PERMISSION_DENIED, False),
        ("usage_not_included", ErrorCode.PERMISSION_DENIED, False),
        ("content_policy_violation", ErrorCode.SAFETY_REJECTED, False),
        ("moderation_blocked", ErrorCode.SAFETY_REJECTED, False),
        ("safety_violation", ErrorCode.SAFETY_REJECTED, False),
        ("rate_limit_exceeded", ErrorCode.RATE_LIMITED, True),
        ("insufficient_quota", ErrorCode.RATE_LIMITED, True),
        ("usage_limit_reached", ErrorCode.RATE_LIMITED, True),
        ("unsupported_parameter", ErrorCode.UNSUPPORTED_CAPABILITY, False),
        ("invalid_model", ErrorCode.UNSUPPORTED_CAPABILITY, False),
        ("schema_mismatch", ErrorCode.PROTOCOL, False),
        ("server_is_overloaded", ErrorCode.UPSTREAM, True),
        ("service_unavailable", ErrorCode.UPSTREAM, True),
        ("server_error", ErrorCode.UPSTREAM, True),
        ("something_else", ErrorCode.UPSTREAM, False),
        # word-level matching: these mention neither a rate limit nor a credential
        ("image_generation_user_error", ErrorCode.UPSTREAM, False),
        ("failed_to_generate", ErrorCode.UPSTREAM, False),
        ("moderate_load_retry_later", ErrorCode.UPSTREAM, False),
        ("max_output_tokens", ErrorCode.UPSTREAM, False),
    ],
)
def test_upstream_code_classification(code: str, native: ErrorCode, retryable: bool) -> None:
    assert classify_upstream_code(code) == (native, retryable)
    error = stream_failure_error(
        {"type": "response.failed", "response": {"error": {"code": code}}}, now=NOW
    )
    assert (error.code, error.retryable) == (native, retryable)
    assert error.details["upstream_code"] == code


def test_code_sanitising_truncates_first_then_filters() -> None:
    assert sanitize_upstream_code("a" * 60 + "!!!!" + "bbbb") == "a" * 60
    assert sanitize_upstream_code("rate limit: hit!") == "ratelimithit"
    assert sanitize_upstream_code("???") == "upstream_failure"
    assert sanitize_upstream_code(None) == "upstream_failure"
    assert sanitize_upstream_code("x" * 100) == "x" * 64


@pytest.mark.parametrize(
    ("payload", "upstream_code"),
    [
        ({"type": "error", "code": "rate_limit_exceeded", "message": "m"}, "rate_limit_exceeded"),
        ({"type": "error", "error": {"code": "server_error"}}, "server_error"),
        ({"type": "error", "error": {"type": "usage_limit_reached"}}, "usage_limit_reached"),
        (
            {"type": "response.failed", "response": {"error": {"message": "no code"}}},
            "upstream_failure",
        ),
        ({"type": "response.failed", "code": "top_level"}, "top_level"),
        ({"type": "error", "error": {"type": "error"}}, "upstream_failure"),
        (
            {
                "type": "response.incomplete",
                "response": {"incomplete_details": {"reason": "content_filter"}},
            },
            "content_filter",
        ),
    ],
)
def test_failure_code_is_found_where_the_backend_puts_it(
    payload: dict[str, Any], upstream_code: str
) -> None:
    error = fold_error(payload, image_done(), completed())
    assert error.details["upstream_code"] == upstream_code
    assert error.details["event_type"] == payload["type"]


def test_content_filter_stop_is_a_safety_rejection() -> None:
    incomplete = {
        "type": "response.incomplete",
        "response": {"incomplete_details": {"reason": "content_filter"}},
    }
    assert fold_error(incomplete).code is ErrorCode.SAFETY_REJECTED


def test_safety_rejection_keeps_only_whitelisted_moderation_details() -> None:
    failed = {
        "type": "response.failed",
        "response": {
            "error": {
                "code": "content_policy_violation",
                "message": "SECRET PROMPT",
                "moderation_details": {
                    "stage": "OUTPUT",
                    "categories": [
                        "violence",
                        "self_harm",
                        "made-up",
                        {"category": "sexual"},
                        7,
                        "violence",
                    ],
                },
            }
        },
    }
    error = fold_error(failed)
    assert error.code is ErrorCode.SAFETY_REJECTED
    assert error.details["moderation_stage"] == "output"
    assert error.details["moderation_categories"] == ["self-harm", "sexual", "violence"]
    assert error.details["safety_controls_relaxed"] is False
    assert error.details["retry_same_request"] is False
    # the upstream's words are kept beside the bridge's own message, never inside it
    assert error.details["upstream_message"] == "SECRET PROMPT"
    assert "SECRET" not in error.message


def test_moderation_details_in_camel_case_and_as_flags() -> None:
    failed = {
        "type": "error",
        "error": {
            "code": "moderation_blocked",
            "moderationDetails": {
                "stage": "sideways",
                "categories": {"harassment": True, "violence": False},
            },
        },
    }
    error = fold_error(failed)
    assert "moderation_stage" not in error.details
    assert error.details["moderation_categories"] == ["harassment"]


def test_in_stream_usage_limit_carries_retry_after_from_resets_at() -> None:
    failed = {"type": "error", "error": {"type": "usage_limit_reached", "resets_at": int(NOW) + 90}}
    error = fold_error(failed)
    assert (error.code, error.retryable) == (ErrorCode.RATE_LIMITED, True)
    assert error.details["quota_exhausted"] is True
    assert error.details["retry_after_ms"] == 90_000
    assert error.details["resets_at"] == int(NOW) + 90


def test_in_stream_usage_limit_with_resets_in_seconds() -> None:
    failed = {"type": "error", "error": {"code": "usage_limit_reached", "resets_in_seconds": 12.5}}
    error = fold_error(failed)
    assert error.details["retry_after_ms"] == 12_500
    assert error.details["resets_at"] == int(NOW + 12.5)


def test_plain_rate_limit_is_not_a_quota_exhaustion() -> None:
    error = fold_error({"type": "error", "code": "rate_limit_exceeded"})
    assert "quota_exhausted" not in error.details
    assert "retry_after_ms" not in error.details


def test_credential_echoed_in_an_upstream_code_is_redacted() -> None:
    failed = {"type": "error", "error": {"code": f"bad token {TOKEN}"}}
    error = fold_error(failed, secrets=CREDENTIALS.secret_values())
    assert error.details["upstream_code"] == "redacted"
    long_token = "eyJ" + "x" * 200
    truncated = stream_failure_error({"type": "error", "code": long_token}, secrets=[long_token])
    assert truncated.details["upstream_code"] == "redacted"
    assert TOKEN not in rendered(error)


# -- HTTP error classification -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "native", "retryable"),
    [
        (401, ErrorCode.AUTHENTICATION, False),
        (403, ErrorCode.PERMISSION_DENIED, False),
        (408, ErrorCode.TIMEOUT, False),
        (413, ErrorCode.INPUT, False),
        (429, ErrorCode.RATE_LIMITED, True),
        (500, ErrorCode.UPSTREAM, True),
        (502, ErrorCode.UPSTREAM, True),
        (503, ErrorCode.UPSTREAM, True),
        (504, ErrorCode.UPSTREAM, True),
        (400, ErrorCode.UPSTREAM, False),
        (404, ErrorCode.UPSTREAM, False),
        (418, ErrorCode.UPSTREAM, False),
    ],
)
def test_http_status_table(status: int, native: ErrorCode, retryable: bool) -> None:
    error = classify_http_error(status, {}, b"", now=NOW)
    assert (error.code, error.retryable) == (native, retryable)
    assert error.details["http_status"] == status
    assert "outcome" not in error.details


def test_401_suggests_codex_login() -> None:
    assert classify_http_error(401, {}, b"").suggestions == [CODEX_LOGIN_SUGGESTION]


def test_usage_limit_429_is_quota_exhaustion_with_retry_after() -> None:
    body = json.dumps(
        {
            "error": {
                "type": "usage_limit_reached",
                "message": "m",
                "plan_type": "plus",
                "resets_at": int(NOW) + 3600,
            }
        }
    ).encode()
    error = classify_http_error(429, {"Retry-After": "5"}, body, now=NOW)
    assert (error.code, error.retryable) == (ErrorCode.RATE_LIMITED, True)
    assert error.details == {
        "http_status": 429,
        "upstream_code": "usage_limit_reached",
        "upstream_message": "m",
        "quota_exhausted": True,
        "retry_after_ms": 3_600_000,
        "resets_at": int(NOW) + 3600,
    }


def test_resets_at_may_be_an_iso_timestamp_and_past_resets_clamp_to_zero() -> None:
    iso = json.dumps(
        {"error": {"type": "usage_limit_reached", "resets_at": "2027-01-15T08:00:10Z"}}
    ).encode()
    reset = 1_800_000_010  # 2027-01-15T08:00:10Z
    assert (
        classify_http_error(429, {}, iso, now=NOW).details["retry_after_ms"] == (reset - NOW) * 1000
    )
    past = json.dumps(
        {"error": {"type": "usage_limit_reached", "resets_at": int(NOW) - 5}}
    ).encode()
    assert classify_http_error(429, {}, past, now=NOW).details["retry_after_ms"] == 0


def test_usage_limit_on_another_status_is_still_rate_limited() -> None:
    body = b'{"error": {"type": "usage_limit_reached", "resets_in_seconds": 30}}'
    error = classify_http_error(400, {}, body, now=NOW)
    assert (error.code, error.details["quota_exhausted"], error.details["retry_after_ms"]) == (
        ErrorCode.RATE_LIMITED,
        True,
        30_000,
    )


@pytest.mark.parametrize(
    ("headers", "retry_after_ms"),
    [
        ({"Retry-After": "7"}, 7_000),
        ({"retry-after-ms": "1500", "Retry-After": "7"}, 1_500),
        ({"Retry-After": email.utils.formatdate(NOW + 20, usegmt=True)}, 20_000),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_plain_429_uses_retry_after(headers: dict[str, str], retry_after_ms: int | None) -> None:
    error = classify_http_error(429, headers, b'{"error": {"type": "rate_limit"}}', now=NOW)
    assert error.details.get("retry_after_ms") == retry_after_ms
    assert "quota_exhausted" not in error.details
    assert error.details["upstream_code"] == "rate_limit"


def test_other_4xx_is_classified_by_its_body_code() -> None:
    body = b'{"error": {"type": "image_generation_user_error", "code": "moderation_blocked"}}'
    error = classify_http_error(400, {}, body, now=NOW)
    assert error.code is ErrorCode.SAFETY_REJECTED
    assert error.details["http_status"] == 400
    unsupported = classify_http_error(400, {}, b'{"error": {"code": "unsupported_value"}}')
    assert unsupported.code is ErrorCode.UNSUPPORTED_CAPABILITY


def test_403_usage_not_included_is_permission_denied() -> None:
    error = classify_http_error(403, {}, b'{"error": {"type": "usage_not_included"}}')
    assert error.code is ErrorCode.PERMISSION_DENIED
    assert error.details["upstream_code"] == "usage_not_included"


def test_only_the_first_64_kib_of_an_error_body_are_read() -> None:
    padding = b" " * MAX_ERROR_BODY_BYTES
    body = padding + b'{"error": {"type": "usage_limit_reached"}}'
    error = classify_http_error(429, {}, body, now=NOW)
    assert "upstream_code" not in error.details
    assert "quota_exhausted" not in error.details
    larger = classify_http_error(429, {}, body, now=NOW, max_body_bytes=len(body))
    assert larger.details["quota_exhausted"] is True


def test_credentials_never_reach_the_error_and_the_body_text_stays_in_its_detail() -> None:
    body = json.dumps(
        {
            "error": {
                "message": f"prompt 'SECRET PROMPT' with {TOKEN}",
                "type": TOKEN,
                "param": ACCOUNT,
            }
        }
    ).encode()
    for status in (400, 401, 403, 429, 500):
        error = classify_http_error(status, {}, body, now=NOW, secrets=CREDENTIALS.secret_values())
        for secret in (TOKEN, ACCOUNT):
            assert secret not in rendered(error)
        assert error.details["upstream_code"] == "redacted"
        assert error.details["upstream_message"] == "prompt 'SECRET PROMPT' with <redacted>"
        assert "SECRET PROMPT" not in error.message


def test_upstream_request_id_is_taken_from_headers() -> None:
    headers = httpx.Headers({"X-Oai-Request-Id": "req_abc123", "x-request-id": "other"})
    assert classify_http_error(500, headers, b"").upstream_request_id == "req_abc123"
    assert (
        classify_http_error(500, {"x-request-id": "bad id with spaces"}, b"").upstream_request_id
        is None
    )


@pytest.mark.parametrize(
    "body", [b"<html>502</html>", b"\xff\xfe", b"[]", b'{"error": "flat"}', b"null"]
)
def test_odd_error_bodies_are_tolerated(body: bytes) -> None:
    error = classify_http_error(502, {}, body)
    assert (error.code, error.retryable, "upstream_code" in error.details) == (
        ErrorCode.UPSTREAM,
        True,
        False,
    )


# -- transport errors --------------------------------------------------------------------------

_REQUEST = httpx.Request("POST", "https://chatgpt.com/backend-api/codex/responses?token=SECRET")


@pytest.mark.parametrize(
    ("exc", "native", "retryable", "unknown"),
    [
        (httpx.ConnectError("refused SECRET", request=_REQUEST), ErrorCode.UPSTREAM, True, False),
        (httpx.ConnectTimeout("SECRET", request=_REQUEST), ErrorCode.TIMEOUT, False, False),
        (httpx.ReadTimeout("SECRET", request=_REQUEST), ErrorCode.TIMEOUT, False, True),
        (httpx.RemoteProtocolError("SECRET", request=_REQUEST), ErrorCode.UPSTREAM, False, True),
        (httpx.ReadError("SECRET", request=_REQUEST), ErrorCode.UPSTREAM, False, True),
        (httpx.WriteTimeout("SECRET", request=_REQUEST), ErrorCode.TIMEOUT, False, True),
        (TimeoutError("SECRET"), ErrorCode.TIMEOUT, False, True),
    ],
)
def test_transport_errors(
    exc: Exception, native: ErrorCode, retryable: bool, unknown: bool
) -> None:
    error = transport_error(exc)
    assert (error.code, error.retryable, error.outcome_unknown) == (native, retryable, unknown)
    assert "SECRET" not in rendered(error)


def test_stall_past_the_deadline_is_a_timeout_with_unknown_outcome() -> None:
    error = transport_error(TimeoutError(), timed_out=True)
    assert (error.code, error.outcome_unknown) == (ErrorCode.TIMEOUT, True)


# -- usage and base64 --------------------------------------------------------------------------


def test_token_usage_parsing_and_sum() -> None:
    assert TokenUsage.parse(
        {"input_tokens": 1, "output_tokens": -1, "total_tokens": True}
    ) == TokenUsage(1)
    assert TokenUsage.parse({"input_tokens": 1.5}) is None
    assert TokenUsage.parse("nope") is None
    total = TokenUsage(1, 2, 3).plus(TokenUsage(None, 5, 7)).plus(None)
    assert total == TokenUsage(1, 7, 10)
    assert TokenUsage().to_dict() == {}
    assert TokenUsage(1, None, 3).to_dict() == {"input_tokens": 1, "total_tokens": 3}


def test_base64_decoding_is_strict() -> None:
    assert decode_image_base64(" " + base64.b64encode(PNG).decode() + "\n") == PNG
    for bad in ("not base64!", "QUJD\nRA==x", "", "QQ"):
        with pytest.raises(BridgeError) as caught:
            decode_image_base64(bad)
        assert caught.value.code is ErrorCode.PROTOCOL
    with pytest.raises(BridgeError):
        decode_image_base64("QUJD", max_chars=3)


# -- images routes -----------------------------------------------------------------------------


def test_generations_request_matches_what_codex_sends() -> None:
    request = build_images_request(
        CREDENTIALS, "a lighthouse", base_url="https://chatgpt.com/backend-api/codex/"
    )
    assert request.url == "https://chatgpt.com/backend-api/codex/images/generations"
    assert request.route == "generations"
    assert list(request.body.items()) == [
        ("prompt", "a lighthouse"),
        ("background", "auto"),
        ("model", "gpt-image-2"),
        ("quality", "auto"),
        ("size", "auto"),
    ]
    assert list(request.headers.items()) == [
        ("Authorization", f"Bearer {TOKEN}"),
        ("ChatGPT-Account-Id", ACCOUNT),
        ("originator", "imagegen-bridge"),
        ("Accept", "application/json"),
        ("Content-Type", "application/json"),
    ]
    assert json.loads(request.content()) == request.body
    assert TOKEN not in repr(request)


def test_edits_request_carries_data_urls_and_turn_id() -> None:
    request = build_images_request(
        CodexCredentials(TOKEN),
        "remove the table",
        images=[("image/png", PNG), ("image/webp", WEBP)],
        background="transparent",
        turn_id="turn-123",
    )
    assert request.url.endswith("/codex/images/edits")
    assert request.body["background"] == "transparent"
    assert request.body["images"] == [
        {"image_url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
        {"image_url": "data:image/webp;base64," + base64.b64encode(WEBP).decode()},
    ]
    assert request.headers["x-codex-image-turn-id"] == "turn-123"
    assert "ChatGPT-Account-Id" not in request.headers


def test_images_request_limits() -> None:
    with pytest.raises(BridgeError) as too_many:
        build_images_request(CREDENTIALS, "p", images=[("image/png", PNG)] * 6)
    assert too_many.value.code is ErrorCode.INPUT
    with pytest.raises(BridgeError) as insecure:
        build_images_request(CREDENTIALS, "p", base_url="http://example.com/backend-api/codex")
    assert insecure.value.code is ErrorCode.CONFIGURATION
    with pytest.raises(BridgeError) as header_injection:
        build_images_request(CREDENTIALS, "p", turn_id="a\r\nb")
    assert header_injection.value.code is ErrorCode.INTERNAL


def test_images_response_parsing() -> None:
    payload = {
        "data": [
            {"b64_json": "QUJD", "revised_prompt": "r"},
            {"url": "https://x"},
            {"b64_json": "REVG"},
        ],
        "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
    }
    parsed = parse_images_response(payload)
    assert [(image.b64, image.revised_prompt) for image in parsed.images] == [
        ("QUJD", "r"),
        ("REVG", None),
    ]
    assert parsed.usage == TokenUsage(3, 4, 7)


@pytest.mark.parametrize(
    ("payload", "native"),
    [
        ({"data": []}, ErrorCode.UPSTREAM),
        ({"data": [{"b64_json": ""}]}, ErrorCode.UPSTREAM),
        ({"data": "x"}, ErrorCode.PROTOCOL),
        ({}, ErrorCode.PROTOCOL),
        ([], ErrorCode.PROTOCOL),
        ({"data": ["x"]}, ErrorCode.PROTOCOL),
    ],
)
def test_images_response_without_image(payload: Any, native: ErrorCode) -> None:
    with pytest.raises(BridgeError) as caught:
        parse_images_response(payload)
    assert caught.value.code is native
    if native is ErrorCode.UPSTREAM:
        assert caught.value.retryable is True
        assert caught.value.details["upstream_code"] == "completed_without_image"


def test_images_response_size_cap() -> None:
    with pytest.raises(BridgeError) as caught:
        parse_images_response({"data": [{"b64_json": "A" * 10}]}, max_base64_chars=9)
    assert caught.value.code is ErrorCode.PROTOCOL


def test_invalid_json_body_is_a_protocol_error() -> None:
    with pytest.raises(BridgeError) as caught:
        parse_json_body(b'{"data": [')
    assert caught.value.code is ErrorCode.PROTOCOL


# -- against the mock backend's real bytes -----------------------------------------------------


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5.0, follow_redirects=False) as client:
        yield client


class Outcome:
    """What one Responses call produced: a result or an error, plus forwarded partials."""

    def __init__(self) -> None:
        self.result: ResponsesResult | None = None
        self.error: BridgeError | None = None
        self.partials: list[CodexPartialImage] = []


async def run_responses_call(
    http: httpx.AsyncClient,
    backend: CodexBackend,
    body: dict[str, Any] | None = None,
    *,
    read_timeout: float = 5.0,
) -> Outcome:
    """What a provider does: POST, classify a non-2xx, decode SSE, fold events."""
    outcome = Outcome()
    request_body = body if body is not None else build_responses_body("a cat", partial_images=1)
    state = ResponsesStreamState(secrets=CREDENTIALS.secret_values())
    try:
        async with http.stream(
            "POST",
            backend.responses_url,
            headers=build_responses_headers(CREDENTIALS),
            content=encode_json_body(request_body),
            timeout=httpx.Timeout(5.0, read=read_timeout),
        ) as response:
            if not response.is_success:
                body_bytes = await response.aread()
                raise classify_http_error(
                    response.status_code,
                    response.headers,
                    body_bytes,
                    secrets=CREDENTIALS.secret_values(),
                )
            async for event in aiter_sse_events(response.aiter_bytes()):
                partial = await state.ahandle(event)
                if partial is not None:
                    outcome.partials.append(partial)
        outcome.result = state.finish()
    except BridgeError as error:
        outcome.error = error
    except httpx.HTTPError as exc:
        outcome.error = transport_error(exc)
    return outcome


def open_image(b64: str) -> Image.Image:
    image = Image.open(io.BytesIO(decode_image_base64(b64)))
    image.load()
    return image


async def test_mock_success_folds_into_a_verifiable_image(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    body = build_responses_body("a cat", size="1024x1536", partial_images=2)
    outcome = await run_responses_call(http, codex_backend, body)
    assert outcome.error is None and outcome.result is not None
    image = open_image(outcome.result.image_b64)
    assert (image.format, image.size) == ("PNG", (1024, 1536))
    assert outcome.result.revised_prompt == "revised"
    assert outcome.result.usage == TokenUsage(2, 3, 5)
    assert [p.partial_index for p in outcome.partials] == [0, 1]
    assert open_image(outcome.partials[0].b64).size == (1024, 1536)
    (recorded,) = codex_backend.requests
    assert recorded.body == body
    assert recorded.sent_token(TOKEN) and recorded.sent_account_id(ACCOUNT)
    assert sorted(recorded.headers) == sorted(
        [
            *("host", "accept-encoding", "connection", "user-agent", "content-length"),
            *("authorization", "chatgpt-account-id", "originator", "accept", "content-type"),
        ]
    )


async def test_mock_without_content_type_is_still_read_as_sse(http: httpx.AsyncClient) -> None:
    with CodexBackend(sse_content_type=None) as backend:
        outcome = await run_responses_call(http, backend)
    assert outcome.result is not None


async def test_mock_slow_stream_still_succeeds(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    codex_backend.script(Behaviour.slow_ok(0.2))
    outcome = await run_responses_call(http, codex_backend)
    assert outcome.result is not None


FAULTS: dict[str, tuple[ErrorCode, bool, dict[str, Any]]] = {
    "http_401": (
        ErrorCode.AUTHENTICATION,
        False,
        {"http_status": 401, "upstream_code": "token_expired"},
    ),
    "http_403": (
        ErrorCode.PERMISSION_DENIED,
        False,
        {"http_status": 403, "upstream_code": "forbidden"},
    ),
    "http_429": (
        ErrorCode.RATE_LIMITED,
        True,
        {"http_status": 429, "upstream_code": "usage_limit_reached", "quota_exhausted": True},
    ),
    "http_500": (ErrorCode.UPSTREAM, True, {"http_status": 500, "upstream_code": "server_error"}),
    "http_502": (ErrorCode.UPSTREAM, True, {"http_status": 502}),
    "http_503": (
        ErrorCode.UPSTREAM,
        True,
        {"http_status": 503, "upstream_code": "server_is_overloaded"},
    ),
    "stall": (ErrorCode.TIMEOUT, False, {"outcome": "unknown", "transport_error": "ReadTimeout"}),
    "stall_mid_stream": (ErrorCode.TIMEOUT, False, {"outcome": "unknown"}),
    "disconnect_before_first_byte": (
        ErrorCode.UPSTREAM,
        False,
        {"outcome": "unknown", "transport_error": "RemoteProtocolError"},
    ),
    "disconnect_mid_stream": (ErrorCode.UPSTREAM, False, {"outcome": "unknown"}),
    "malformed_json": (ErrorCode.PROTOCOL, False, {"stage": "event"}),
    "failed_image_call": (ErrorCode.UPSTREAM, True, {"upstream_code": "image_call_failed"}),
    "completed_without_image": (
        ErrorCode.UPSTREAM,
        True,
        {"upstream_code": "completed_without_image", "output_item_types": ["message"]},
    ),
    "content_policy_refusal": (
        ErrorCode.SAFETY_REJECTED,
        False,
        {
            "upstream_code": "content_policy_violation",
            "moderation_stage": "input",
            "moderation_categories": ["violence"],
        },
    ),
    "refusal_message": (
        ErrorCode.SAFETY_REJECTED,
        False,
        {"upstream_code": "completed_with_refusal"},
    ),
    "usage_limit_in_stream": (
        ErrorCode.RATE_LIMITED,
        True,
        {"upstream_code": "usage_limit_reached", "quota_exhausted": True},
    ),
}


@pytest.mark.parametrize("kind", sorted(FAULTS))
async def test_mock_faults_classify(
    codex_backend: CodexBackend, http: httpx.AsyncClient, kind: str
) -> None:
    native, retryable, details = FAULTS[kind]
    codex_backend.script(kind)
    read_timeout = 0.3 if kind.startswith("stall") else 5.0
    outcome = await run_responses_call(http, codex_backend, read_timeout=read_timeout)
    codex_backend.release()
    assert outcome.result is None
    error = outcome.error
    assert error is not None
    assert (error.code, error.retryable) == (native, retryable)
    assert {key: error.details.get(key) for key in details} == details
    assert codex_backend.calls("responses") == 1  # exactly one upstream call, never a retry
    for secret in (TOKEN, ACCOUNT):
        assert secret not in rendered(error)


async def test_mock_quota_429_has_retry_after_from_resets_at(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    codex_backend.quota.limit_resets_in_s = 1_800
    codex_backend.script("http_429")
    error = (await run_responses_call(http, codex_backend)).error
    assert error is not None
    assert 1_797_000 <= error.details["retry_after_ms"] <= 1_800_000
    assert error.upstream_request_id is not None and error.upstream_request_id.startswith("req_")


async def test_mock_disconnect_mid_stream_forwarded_the_partial_first(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    codex_backend.script("disconnect_mid_stream")
    outcome = await run_responses_call(http, codex_backend)
    assert len(outcome.partials) == 1
    assert outcome.error is not None and outcome.error.outcome_unknown


async def call_images(
    http: httpx.AsyncClient,
    backend: CodexBackend,
    images: list[tuple[str, bytes]] | None = None,
    read_timeout: float = 5.0,
) -> Any:
    request = build_images_request(
        CREDENTIALS,
        "a lighthouse",
        images=images or [],
        base_url=backend.codex_base_url,
        size="80x40",
    )
    try:
        response = await http.post(
            request.url,
            headers=request.headers,
            content=request.content(),
            timeout=httpx.Timeout(5.0, read=read_timeout),
        )
    except httpx.HTTPError as exc:
        return transport_error(exc)
    if not response.is_success:
        return classify_http_error(response.status_code, response.headers, response.content)
    try:
        return parse_images_response(parse_json_body(response.content))
    except BridgeError as error:
        return error


async def test_mock_images_routes_round_trip(
    codex_backend: CodexBackend, http: httpx.AsyncClient
) -> None:
    generated = await call_images(http, codex_backend)
    assert open_image(generated.images[0].b64).size == (80, 40)
    assert generated.usage == TokenUsage(12, 34, 46)
    png = base64.b64decode(generated.images[0].b64)
    edited = await call_images(http, codex_backend, [("image/png", png)])
    assert len(edited.images) == 1
    assert codex_backend.call_counts["images_generations"] == 1
    (edit_request,) = codex_backend.requests_for("images_edits")
    assert edit_request.body["images"][0]["image_url"].startswith("data:image/png;base64,")
    assert list(edit_request.body)[:5] == ["prompt", "background", "model", "quality", "size"]


@pytest.mark.parametrize(
    ("kind", "native", "retryable"),
    [
        ("http_401", ErrorCode.AUTHENTICATION, False),
        ("http_429", ErrorCode.RATE_LIMITED, True),
        ("http_503", ErrorCode.UPSTREAM, True),
        ("content_policy_refusal", ErrorCode.SAFETY_REJECTED, False),
        ("failed_image_call", ErrorCode.UPSTREAM, True),
        ("completed_without_image", ErrorCode.UPSTREAM, True),
        ("malformed_json", ErrorCode.PROTOCOL, False),
        ("disconnect_mid_stream", ErrorCode.UPSTREAM, False),
        ("stall", ErrorCode.TIMEOUT, False),
    ],
)
async def test_mock_images_faults_classify(
    codex_backend: CodexBackend,
    http: httpx.AsyncClient,
    kind: str,
    native: ErrorCode,
    retryable: bool,
) -> None:
    codex_backend.script(kind, route="images_generations")
    error = await call_images(http, codex_backend, read_timeout=0.3 if kind == "stall" else 5.0)
    codex_backend.release()
    assert isinstance(error, BridgeError)
    assert (error.code, error.retryable) == (native, retryable)
    assert codex_backend.calls("images_generations") == 1


def test_image_usage_comes_from_tool_usage_image_gen() -> None:
    """sub2api #4399/#4639: the image's cost is not in response.usage."""
    done = completed(usage={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6})
    done["response"]["tool_usage"] = {
        "image_gen": {"output_tokens": 272, "output_tokens_details": {"image_tokens": 272}}
    }
    usage = fold(image_done(), done).usage
    assert usage is not None
    assert usage.to_dict() == {
        "input_tokens": 5,
        "output_tokens": 1,
        "total_tokens": 6,
        "provider": {
            "image_gen_images": 1,
            "image_gen_output_image_tokens": 272,
            "image_gen_output_tokens": 272,
        },
    }
    only_images = completed()
    only_images["response"]["tool_usage"] = {"image_gen": {"output_tokens": True, "x": 1}}
    assert fold(image_done(), only_images).usage is None  # nothing countable
