"""Hypothesis over request decoding and validation: only ``BridgeError`` ever escapes.

Bodies come from three generators: arbitrary bytes, arbitrary JSON values, and a valid
full request mutated at random paths (values replaced by arbitrary JSON, keys dropped or
added from the contract's own vocabulary), which reaches the deep validators rather
than stopping at the first type error. Every body goes through what the server does with
it: decode (``decode_model``), intrinsic validation with the default and with tight
limits, the idempotency fingerprint, negotiation against the mock's capabilities and the
transparency plan. A rejection must be an ``invalid_request`` (decode, validation) or the
negotiation's own codes, carry a stable message and never echo the body.
"""

from __future__ import annotations

import copy
import json
from enum import Enum
from typing import Any, Final

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagebridge.contract import enums
from imagebridge.contract._base import decode_model
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.jobs import ImageJobUpdate
from imagebridge.contract.openai.images import CompatibleGenerationRequest
from imagebridge.contract.presets import ImagePresetCreate
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.idempotency import request_fingerprint
from imagebridge.engine.negotiation import negotiate_request
from imagebridge.engine.transparency import prepare_transparency
from imagebridge.engine.validation import RequestLimits, validate_request
from imagebridge.providers.mock import MockProvider

FUZZ: Final = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MESSAGE: Final = "request body must be valid ImageRequest JSON"
SECRET: Final = "s3cr3t-canary-7f1d"
"""Planted in string values: no error message may ever repeat it."""
TIGHT: Final = RequestLimits(
    max_prompt_bytes=16,
    max_negative_prompt_bytes=8,
    max_outputs=2,
    max_inputs=1,
    max_inline_encoded_bytes=64,
    max_edge=64,
    max_timeout_ms=1_000,
    max_identifier_bytes=8,
)
PIXEL: Final = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42"
    "mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

VALID: Final[dict[str, Any]] = {
    "version": "1",
    "operation": "edit",
    "prompt": "a red fox",
    "negative_prompt": "blur",
    "images": [{"type": "base64", "data": PIXEL, "media_type": "image/png", "filename": "a.png"}],
    "mask": {"type": "data_url", "data_url": f"data:image/png;base64,{PIXEL}"},
    "reference_images": [{"type": "url", "url": "https://example.invalid/r.png"}],
    "parameters": {
        "n": 2,
        "size": "64x64",
        "quality": "high",
        "output_format": "webp",
        "output_compression": 80,
        "background": "transparent",
        "moderation": "low",
        "partial_images": 1,
        "input_fidelity": "high",
        "failure_policy": "best_effort",
        "action": "edit",
    },
    "routing": {
        "provider": "mock",
        "model": "mock-image-1",
        "fallbacks": [{"provider": "mock", "model": "other"}],
        "fallback_policy": "on_error",
    },
    "session": {"mode": "isolated"},
    "output": {
        "response_format": "artifact",
        "filename_prefix": "fox",
        "directory": "a/b",
        "collision": "error",
        "metadata": "sidecar",
        "transparency": {
            "mode": "chroma_key",
            "key_color": "#00ff00",
            "transparent_threshold": 12,
            "opaque_threshold": 96,
            "despill": True,
        },
    },
    "policies": {
        "compatibility": "normalize",
        "negative_prompt": "merge",
        "revised_prompt": "omit",
        "batch_execution": "parallel",
    },
    "idempotency_key": "key-1",
    "user": "u-1",
    "timeout_ms": 60_000,
}

VOCABULARY: Final = sorted(
    {
        *VALID,
        *VALID["parameters"],
        *VALID["routing"],
        *VALID["output"],
        *VALID["output"]["transparency"],
        *VALID["policies"],
        "key",
        "thread_id",
        "mode",
        "type",
        "url",
        "data",
        "path",
        "aspect_ratio",
        "resolution",
        "filename",
        "metadata",
    }
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(
        [
            "",
            " ",
            "auto",
            "0x0",
            "64x64",
            "16385x1",
            "1:1",
            "16:9",
            "png",
            "jpeg",
            "transparent",
            "isolated",
            "persistent",
            "thread",
            "generate",
            "edit",
            "../x",
            "a\x00b",
            "é" * 300,
            SECRET,
            "data:image/png;base64,AAAA",
            f"data:image/png;base64,{PIXEL}",
        ]
    )
)
BOUNDARY_INTS: Final = [
    0,
    -1,
    1,
    2,
    3,
    4,
    5,
    16,
    17,
    100,
    101,
    255,
    256,
    16_384,
    16_385,
    1_800_000,
    1_800_001,
    2**31,
    2**63,
]
ENUM_WORDS: Final = sorted(
    {
        value.value
        for enum in vars(enums).values()
        if isinstance(enum, type) and issubclass(enum, Enum)
        for value in enum
    }
)
plausible_strings = st.sampled_from(ENUM_WORDS) | scalars.filter(lambda v: isinstance(v, str))


def _plausible(current: Any) -> st.SearchStrategy[Any]:
    """A value of the same kind as ``current``: where validators, not types, decide."""
    if isinstance(current, bool):
        return st.booleans()
    if isinstance(current, int):
        return st.sampled_from(BOUNDARY_INTS) | st.integers(-5, 300)
    if isinstance(current, str):
        return plausible_strings
    if isinstance(current, list):
        return st.lists(st.just(current[0]) if current else json_values, max_size=20)
    return json_values


json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(VOCABULARY) | st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def mutated_requests(draw: st.DrawFn) -> Any:
    body = copy.deepcopy(VALID)
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        paths = [path for path in _paths(body) if path]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = body
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["tweak", "tweak", "tweak", "replace", "delete", "add"]))
        if action == "tweak":
            parent[path[-1]] = draw(_plausible(parent[path[-1]]))
        elif action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(VOCABULARY))] = draw(json_values)
    return body


def _check_rejection(error: BridgeError, allowed: set[ErrorCode]) -> None:
    assert error.code in allowed, error.to_dict()
    assert error.message and SECRET not in json.dumps(error.to_dict(), default=str)


async def _exercise(raw: bytes) -> None:
    try:
        request = decode_model(ImageRequest, raw, MESSAGE)
    except BridgeError as error:
        _check_rejection(error, {ErrorCode.INVALID_REQUEST})
        assert error.message == MESSAGE
        return
    for limits in (RequestLimits(), TIGHT):
        try:
            validate_request(request, limits)
        except BridgeError as error:
            _check_rejection(error, {ErrorCode.INVALID_REQUEST})
            assert error.details["issues"], "a validation failure names its issues"
            continue
        assert len(request_fingerprint(request)) == 64
        again = decode_model(ImageRequest, request.model_dump_json(), MESSAGE)
        assert request_fingerprint(again) == request_fingerprint(request)
    try:
        validate_request(request, RequestLimits())
        capabilities = await MockProvider().capabilities(None)
        plan = prepare_transparency(request, capabilities)
        negotiate_request(plan.request, capabilities)
    except BridgeError as error:
        _check_rejection(
            error,
            {
                ErrorCode.INVALID_REQUEST,
                ErrorCode.UNSUPPORTED_CAPABILITY,
                ErrorCode.INPUT,
            },
        )


@FUZZ
@given(raw=st.binary(max_size=2_048))
async def test_arbitrary_bytes_are_refused_with_the_body_message(raw: bytes) -> None:
    await _exercise(raw)


@FUZZ
@given(body=json_values)
async def test_arbitrary_json_values_are_refused_or_validated(body: Any) -> None:
    await _exercise(json.dumps(body).encode())


@FUZZ
@given(body=mutated_requests())
async def test_mutated_requests_only_ever_raise_bridge_errors(body: Any) -> None:
    await _exercise(json.dumps(body).encode())


def test_the_seed_request_is_valid() -> None:
    """The mutation seed must itself pass, or the mutations would test nothing deep."""
    request = decode_model(ImageRequest, json.dumps(VALID), MESSAGE)
    validate_request(request, RequestLimits())


@FUZZ
@given(body=json_values | mutated_requests())
def test_other_request_bodies_only_raise_invalid_request(body: Any) -> None:
    raw = json.dumps(body)
    for model in (CompatibleGenerationRequest, ImagePresetCreate, ImageJobUpdate):
        try:
            decoded = decode_model(model, raw, "body rejected")
        except BridgeError as error:
            _check_rejection(error, {ErrorCode.INVALID_REQUEST})
            continue
        if isinstance(decoded, CompatibleGenerationRequest):
            try:
                decoded.to_request()
            except BridgeError as error:
                _check_rejection(
                    error, {ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_CAPABILITY}
                )
