"""Decoding rules of the native ImageRequest, as the original decodes it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract._base import decode_model
from imagebridge.contract.enums import Operation
from imagebridge.contract.request import ImageInput, ImageRequest, parse_aspect_ratio, parse_size

BODY_ERROR = "request body must be valid ImageRequest JSON"


def decode(body: dict[str, Any]) -> ImageRequest:
    return decode_model(ImageRequest, json.dumps(body), BODY_ERROR)


def base(**extra: Any) -> dict[str, Any]:
    return {"operation": "generate", "prompt": "a paper fox", **extra}


def assert_body_rejected(body: dict[str, Any]) -> None:
    with pytest.raises(BridgeError) as caught:
        decode(body)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.message == BODY_ERROR
    assert caught.value.details == {}


def test_minimal_request_takes_every_default() -> None:
    request = decode(base())
    assert request.version == "1"
    wire = request.to_wire()
    assert wire["parameters"] == {
        "n": 1,
        "size": "auto",
        "quality": "auto",
        "output_format": "png",
        "background": "auto",
        "moderation": "auto",
        "partial_images": 0,
        "failure_policy": "fail_fast",
        "action": "auto",
    }
    assert wire["policies"] == {
        "compatibility": "strict",
        "negative_prompt": "auto",
        "revised_prompt": "include",
        "batch_execution": "auto",
    }
    assert wire["session"] == {"mode": "isolated"}
    assert wire["routing"] == {"fallback_policy": "on_unavailable"}
    assert "images" not in wire and "mask" not in wire and "reference_images" not in wire


@pytest.mark.parametrize(
    "body",
    [
        {"operation": "generate"},  # missing prompt
        {"prompt": "x"},  # missing operation
        base(surprise=True),
        base(images=[]),
        {"operation": "edit", "prompt": "x"},  # edit needs the images key, even empty
        base(version=1),
        base(operation="paint"),
        base(parameters={"size": "1024X1024"}),
        base(parameters={"size": "0x1024"}),
        base(parameters={"size": "01x1"}),
        base(parameters={"size": "1024"}),
        base(parameters={"size": "99999999999x1"}),
        base(parameters={"aspect_ratio": "0:1"}),
        base(parameters={"aspect_ratio": "16/9"}),
        base(parameters={"n": 256}),
        base(parameters={"n": -1}),
        base(parameters={"n": "1"}),
        base(parameters={"n": 1.0}),
        base(parameters={"n": True}),
        base(parameters={"quality": "ultra"}),
        base(parameters={"bogus": 1}),
        base(output={"transparency": {"despill": "yes"}}),
        base(reference_images=[{"type": "file"}]),
        base(reference_images=[{"type": "file", "path": "a.png", "url": "x"}]),
        base(reference_images=[{"type": "file", "path": None}]),
        base(reference_images=[{"type": "ftp", "path": "a"}]),
        base(reference_images=[{"type": "base64", "data": "AA==", "extra": 1}]),
        base(routing={"fallbacks": [{"model": "m"}]}),
    ],
)
def test_malformed_bodies_are_decode_errors(body: dict[str, Any]) -> None:
    assert_body_rejected(body)


def test_optional_fields_accept_null_as_absent() -> None:
    request = decode(
        base(
            negative_prompt=None,
            idempotency_key=None,
            timeout_ms=None,
            user=None,
            parameters={"aspect_ratio": None, "output_compression": None, "input_fidelity": None},
            routing={"provider": None, "model": None},
            session={"key": None, "thread_id": None},
            output={"filename": None, "transparency": {"key_color": None}},
        )
    )
    assert request.negative_prompt is None and request.routing.provider is None
    # Issue 19: also for fields with a non-null default, whole sections, and a generate
    # request's `mask` (the original's SDKs send a null wherever a value is unset).
    for body in (base(mask=None), base(parameters=None), base(policies={"compatibility": None})):
        assert decode(body) == decode(base())


def test_aspect_ratio_is_reduced_by_gcd() -> None:
    request = decode(base(parameters={"aspect_ratio": "1920:1080"}))
    assert request.parameters.aspect_ratio == "16:9"
    assert parse_aspect_ratio("3:2") == (3, 2)


def test_size_parsing() -> None:
    assert parse_size("auto") is None
    assert parse_size("1536x1024") == (1536, 1024)
    with pytest.raises(ValueError, match="auto or WxH"):
        parse_size("1536 x 1024")


def test_n_boundaries_on_the_wire() -> None:
    assert decode(base(parameters={"n": 255})).parameters.n == 255
    assert decode(base(parameters={"n": 0})).parameters.n == 0  # validation rejects it later
    assert_body_rejected(base(parameters={"n": 256}))


def test_edit_request_keeps_images_and_mask() -> None:
    image = {"type": "base64", "data": "AAAA", "filename": "a.png"}
    request = decode({"operation": "edit", "prompt": "x", "images": [image], "mask": image})
    assert request.operation is Operation.EDIT
    wire = request.to_wire()
    assert wire["images"] == [image] and wire["mask"] == image
    empty = decode({"operation": "edit", "prompt": "x", "images": []})
    assert empty.to_wire()["images"] == []


def test_image_input_payload_accessors() -> None:
    item = ImageInput.from_payload("url", "https://example.com/a.png", filename="a.png")
    assert item.payload == "https://example.com/a.png"
    assert item.to_wire() == {
        "type": "url",
        "url": "https://example.com/a.png",
        "filename": "a.png",
    }


def test_fingerprint_ignores_key_order_defaults_key_and_timeout() -> None:
    first = decode(base(idempotency_key="k1", timeout_ms=5))
    second = decode(
        {"prompt": "a paper fox", "parameters": {"n": 1}, "operation": "generate", "timeout_ms": 9}
    )
    assert first.fingerprint_payload() == second.fingerprint_payload()
    different = decode(base(parameters={"n": 2}))
    assert different.fingerprint_payload() != first.fingerprint_payload()


def test_decode_error_never_echoes_values() -> None:
    secret = "sk-live-very-secret-value"
    with pytest.raises(BridgeError) as caught:
        decode(base(parameters={"quality": secret}))
    assert secret not in repr(caught.value.to_dict())


def test_the_issue_32_additions_are_absent_unless_set() -> None:
    """``policies.size_mismatch`` and ``routing.prefer`` (imagebridge additions): the
    original's clients send nulls for them or nothing, and every echo of such a request
    is the original's shape."""
    from imagebridge.contract.request import ImageRequest

    sent = {
        "operation": "generate",
        "prompt": "x",
        "policies": {"size_mismatch": None},
        "routing": {"prefer": None},
    }
    request = ImageRequest.model_validate(sent)
    assert request.policies.size_mismatch is None and request.routing.prefer is None
    echoed = request.model_dump(mode="json")
    assert "size_mismatch" not in echoed["policies"] and "prefer" not in echoed["routing"]
    chosen = ImageRequest.model_validate(
        {**sent, "policies": {"size_mismatch": "fail"}, "routing": {"prefer": "honour_size"}}
    ).model_dump(mode="json")
    assert chosen["policies"]["size_mismatch"] == "fail"
    assert chosen["routing"]["prefer"] == "honour_size"
