"""Capability negotiation, and the behaviours the original's core/negotiation.rs tests check."""

from __future__ import annotations

from enum import Enum
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.contract.capabilities import ProviderCapabilities
from imagebridge.contract.request import GenerationParameters, ImageRequest
from imagebridge.engine.negotiation import CODEX_MASK_CODE, copy_parameters, negotiate_request
from tests.support.capabilities import capabilities

IMAGE = {"type": "base64", "data": "iVBORw0KGgo="}


def request(**fields: Any) -> ImageRequest:
    body: dict[str, Any] = {"operation": "generate", "prompt": "a paper fox"}
    body.update(fields)
    return ImageRequest.model_validate(body)


def normalize(**policies: Any) -> dict[str, Any]:
    return {"compatibility": "normalize", **policies}


def refused(req: ImageRequest, **caps: Any) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        negotiate_request(req, capabilities(**caps))
    return caught.value


# -- the behaviour statements ------------------------------------------------------------


def test_capability_validation_rejects_inconsistent_batching() -> None:
    error = refused(
        request(),
        batching={
            "mode": "fan_out",
            "native_count": {"min": 1, "max": 2},
            "max_parallel_outputs": 1,
        },
    )
    assert error.code is ErrorCode.PROTOCOL
    error = refused(
        request(),
        batching={
            "mode": "native",
            "native_count": {"min": 1, "max": 2},
            "max_parallel_outputs": 0,
        },
    )
    assert error.code is ErrorCode.PROTOCOL


def _batching(mode: str, low: int, high: int, parallel: int) -> dict[str, Any]:
    return {
        "mode": mode,
        "native_count": {"min": low, "max": high},
        "max_parallel_outputs": parallel,
    }


@pytest.mark.parametrize(
    ("caps", "message"),
    [
        ({"count": {"min": 0, "max": 2}}, "count range is invalid"),
        ({"batching": _batching("native", 0, 2, 2)}, "native batch range is invalid"),
        (
            {"count": {"min": 1, "max": 4}, "batching": _batching("fan_out", 1, 5, 2)},
            "native batch range lies outside its count range",
        ),
        ({"batching": _batching("native", 1, 2, 3)}, "max_parallel_outputs is outside"),
        ({"batching": _batching("native", 1, 1, 1)}, "native count to equal the count range"),
        ({"batching": _batching("fan_out", 1, 2, 2)}, "native count below the count range"),
        ({"backgrounds": ["auto", "transparent"]}, "contradicts the background set"),
        ({"transparent_background": "native"}, "contradicts the background set"),
        (
            {"transparent_background": "emulated", "backgrounds": ["transparent"]},
            "contradicts the background set",
        ),
        (
            {"transparent_background": "emulated", "output_formats": ["jpeg"]},
            "needs a PNG or WebP output format",
        ),
    ],
)
def test_every_capability_consistency_rule(caps: dict[str, Any], message: str) -> None:
    for mode in ("strict", "normalize", "best_effort"):
        error = refused(request(policies={"compatibility": mode}), **caps)
        assert error.code is ErrorCode.PROTOCOL
        assert message in error.message
        assert error.provider == "test-provider"


def test_emulated_transparency_needs_an_auto_or_opaque_background() -> None:
    from imagebridge.contract.capabilities import ProviderCapabilities

    caps = capabilities(transparent_background="emulated")
    broken = ProviderCapabilities.model_construct(
        **{**dict(caps), "backgrounds": []}  # no background at all: not even auto
    )
    with pytest.raises(BridgeError) as caught:
        negotiate_request(request(), broken)
    assert "auto or opaque background" in caught.value.message


def test_codex_mask_rejection_has_stable_transport_code() -> None:
    req = request(operation="edit", images=[IMAGE], mask=IMAGE)
    error = refused(req, provider="codex-responses")
    assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert error.details["field"] == "mask"
    assert error.details["codex_code"] == CODEX_MASK_CODE
    assert error.provider == "codex-responses"
    plain = refused(req)
    assert "codex_code" not in plain.details


def test_strict_mode_rejects_unsupported_quality() -> None:
    error = refused(request(parameters={"quality": "high"}))
    assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert error.field == "parameters.quality"
    assert error.details["model"] == "test-image"


def test_explicit_model_mismatch_is_never_silently_normalized() -> None:
    error = refused(request(routing={"model": "other"}, policies={"compatibility": "best_effort"}))
    assert error.field == "routing.model"
    assert error.details["requested_model"] == "other"
    assert error.details["effective_model"] == "test-image"


def test_unsupported_user_attribution_is_never_silently_dropped() -> None:
    error = refused(request(user="u1", policies={"compatibility": "best_effort"}))
    assert error.field == "user"


def test_explicit_fidelity_is_checked_and_semantic_action_can_use_auto() -> None:
    error = refused(request(reference_images=[IMAGE], parameters={"input_fidelity": "high"}))
    assert error.field == "parameters.input_fidelity"
    assert error.details["requested"] == "high" and error.details["supported"] == []
    result = negotiate_request(request(parameters={"action": "generate"}), capabilities())
    assert result.request.parameters.action.value == "auto"
    assert [(n.field, n.reason) for n in result.normalizations] == [
        ("parameters.action", "provider_uses_automatic_action")
    ]


def test_normalize_mode_reports_every_changed_parameter() -> None:
    req = request(parameters={"n": 3, "quality": "high", "size": "1536x1024"}, policies=normalize())
    result = negotiate_request(req, capabilities())
    effective = result.request.parameters
    assert (effective.n, effective.quality.value, effective.size) == (2, "auto", "auto")
    assert [(n.field, n.requested, n.effective, n.reason) for n in result.normalizations] == [
        ("parameters.n", 3, 2, "clamped_to_provider_range"),
        ("parameters.size", "1536x1024", "auto", "normalized_to_provider_size"),
        ("parameters.quality", "high", "auto", "normalized_to_provider_value"),
    ]
    assert result.requested == req.parameters


def test_emulated_negative_prompt_is_merged_without_echoing_its_text_in_metadata() -> None:
    result = negotiate_request(request(negative_prompt="blurry hands"), capabilities())
    assert result.request.negative_prompt is None
    assert result.request.prompt == (
        "a paper fox\n\nNegative constraints (avoid these elements): blurry hands"
    )
    dumped = [n.model_dump_json() for n in result.normalizations]
    assert len(dumped) == 1 and "blurry" not in dumped[0]
    assert result.normalizations[0].reason == "negative_prompt_prompt_merge"


def test_arbitrary_size_constraints_are_enforced() -> None:
    sizes = {
        "auto": False,
        "arbitrary": True,
        "min_edge": 256,
        "max_edge": 3840,
        "edge_multiple": 16,
        "max_pixels": 8_294_400,
        "max_aspect_ratio": 3.0,
    }
    ok = negotiate_request(request(parameters={"size": "1024x1024"}), capabilities(sizes=sizes))
    assert ok.request.parameters.size == "1024x1024"
    error = refused(request(parameters={"size": "4000x1024"}), sizes=sizes)
    assert error.field == "parameters.size"


def test_malformed_provider_ranges_are_rejected_without_panicking() -> None:
    for mode in ("strict", "normalize", "best_effort"):
        req = request(policies={"compatibility": mode})
        assert refused(req, count={"min": 2, "max": 1}).code is ErrorCode.PROTOCOL
        assert refused(req, partial_images={"min": 2, "max": 1}).code is ErrorCode.PROTOCOL


# -- the remaining rules -------------------------------------------------------------------


def test_operation_support() -> None:
    assert refused(request(), generation=False).field == "operation"
    assert refused(request(operation="edit", images=[IMAGE]), edits=False).field == "operation"


def test_input_counts() -> None:
    few = {"support": "native", "max_count": 1, "max_bytes_each": 10, "max_bytes_total": 10}
    assert refused(request(reference_images=[IMAGE, IMAGE]), reference_images=few).field == (
        "reference_images"
    )
    assert (
        refused(request(operation="edit", images=[IMAGE, IMAGE]), edit_images=few).field == "images"
    )


def test_sessions_need_capabilities() -> None:
    assert refused(request(session={"mode": "persistent", "key": "k"})).field == "session.mode"
    assert refused(request(session={"mode": "thread", "thread_id": "t"})).field == "session.mode"
    ok = negotiate_request(
        request(session={"mode": "persistent", "key": "k"}), capabilities(persistent_sessions=True)
    )
    assert ok.request.session.key == "k"


def test_count_strict_and_clamped() -> None:
    assert refused(request(parameters={"n": 3})).field == "parameters.n"


def test_size_falls_back_to_first_allowed_in_string_order() -> None:
    sizes = {"auto": False, "allowed": ["1536x1024", "1024x1536", "1024x1024"]}
    result = negotiate_request(
        request(parameters={"size": "512x512"}, policies=normalize()), capabilities(sizes=sizes)
    )
    assert result.request.parameters.size == "1024x1024"
    no_fallback = {"auto": False, "allowed": [], "arbitrary": False}
    error = refused(
        request(parameters={"size": "512x512"}, policies=normalize()), sizes=no_fallback
    )
    assert error.message == "provider has no usable size fallback"


def test_unsupported_hints_are_dropped_or_refused() -> None:
    req = request(parameters={"aspect_ratio": "16:9", "resolution": "2k"}, policies=normalize())
    result = negotiate_request(req, capabilities())
    assert result.request.parameters.aspect_ratio is None
    assert result.request.parameters.resolution is None
    reasons = [(n.field, n.requested, n.effective, n.reason) for n in result.normalizations]
    assert reasons == [
        ("parameters.aspect_ratio", "16:9", None, "provider_does_not_support_hint"),
        ("parameters.resolution", "2k", None, "provider_does_not_support_hint"),
    ]
    assert refused(request(parameters={"aspect_ratio": "1:1"})).field == "parameters.aspect_ratio"
    kept = negotiate_request(
        request(parameters={"aspect_ratio": "1:1"}), capabilities(aspect_ratio="emulated")
    )
    assert kept.request.parameters.aspect_ratio == "1:1"


def test_format_and_compression_normalization() -> None:
    req = request(
        parameters={"output_format": "jpeg", "output_compression": 70}, policies=normalize()
    )
    result = negotiate_request(req, capabilities())
    assert result.request.parameters.output_format.value == "png"
    assert result.request.parameters.output_compression is None
    assert [n.reason for n in result.normalizations] == [
        "normalized_to_provider_value",
        "effective_format_has_no_compression",
    ]
    strict = request(parameters={"output_format": "jpeg", "output_compression": 70})
    assert refused(strict).field == "parameters.output_format"


def test_first_supported_value_when_auto_is_not_offered() -> None:
    result = negotiate_request(
        request(parameters={"quality": "low"}, policies=normalize()),
        capabilities(qualities=["high", "medium"]),
    )
    assert result.request.parameters.quality.value == "medium"


def test_background_and_moderation() -> None:
    result = negotiate_request(
        request(parameters={"background": "opaque", "moderation": "low"}, policies=normalize()),
        capabilities(),
    )
    assert result.request.parameters.background.value == "auto"
    assert result.request.parameters.moderation.value == "auto"


def test_partial_images_clamped_or_refused() -> None:
    result = negotiate_request(
        request(parameters={"partial_images": 2}, policies=normalize()), capabilities()
    )
    assert result.request.parameters.partial_images == 0
    assert refused(request(parameters={"partial_images": 2})).field == "parameters.partial_images"


def test_negative_prompt_policies() -> None:
    native_caps = {"negative_prompt": "native"}
    kept = negotiate_request(request(negative_prompt="n"), capabilities(**native_caps))
    assert kept.request.negative_prompt == "n" and kept.normalizations == []
    merged = negotiate_request(
        request(negative_prompt="n", policies={"negative_prompt": "merge"}),
        capabilities(**native_caps),
    )
    assert merged.request.negative_prompt is None
    assert refused(request(negative_prompt="n", policies={"negative_prompt": "native"})).field == (
        "negative_prompt"
    )
    assert (
        refused(request(negative_prompt="n"), negative_prompt="unsupported").field
        == "negative_prompt"
    )


def test_revised_prompt_require() -> None:
    assert (
        refused(request(policies={"revised_prompt": "require"})).field == "policies.revised_prompt"
    )
    negotiate_request(
        request(policies={"revised_prompt": "require"}), capabilities(revised_prompt="native")
    )


def test_action_without_auto_support_is_refused() -> None:
    error = refused(request(parameters={"action": "generate"}), actions=["edit"])
    assert error.field == "parameters.action"


def test_original_request_is_not_mutated() -> None:
    req = request(parameters={"n": 3}, policies=normalize(), negative_prompt="n")
    before = req.model_dump_json()
    negotiate_request(req, capabilities())
    assert req.model_dump_json() == before


# -- idempotence: the fan-out decorator relies on it to skip a second negotiation ----------

SIZES = ["auto", "512x512", "1024x1024", "1024x1536", "1536x1024", "2048x2048"]
SUPPORT = ["native", "emulated", "unsupported"]


def _subset(values: list[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=len(values), unique=True)


@st.composite
def _capability_documents(draw: st.DrawFn) -> ProviderCapabilities:
    top = draw(st.integers(1, 4))
    arbitrary = draw(st.booleans())
    backgrounds = draw(_subset(["auto", "opaque", "transparent"]))
    low_partials = draw(st.integers(0, 2))
    return capabilities(
        count={"min": 1, "max": top},
        batching=_batching("native", 1, top, draw(st.integers(1, top))),
        sizes={
            "auto": draw(st.booleans()),
            "allowed": draw(st.lists(st.sampled_from(SIZES[1:]), max_size=3, unique=True)),
            "arbitrary": arbitrary,
            "max_edge": 1536 if arbitrary else None,
            "edge_multiple": 16 if arbitrary else None,
        },
        aspect_ratio=draw(st.sampled_from(SUPPORT)),
        resolution=draw(st.sampled_from(SUPPORT)),
        qualities=draw(_subset(["auto", "low", "medium", "high"])),
        output_formats=draw(_subset(["png", "jpeg", "webp"])),
        backgrounds=backgrounds,
        transparent_background="native" if "transparent" in backgrounds else "unsupported",
        moderation=draw(_subset(["auto", "low"])),
        negative_prompt=draw(st.sampled_from(SUPPORT)),
        partial_images={"min": low_partials, "max": low_partials + draw(st.integers(0, 2))},
    )


@st.composite
def _requests(draw: st.DrawFn) -> ImageRequest:
    parameters: dict[str, Any] = {
        "n": draw(st.integers(1, 6)),
        "size": draw(st.sampled_from(SIZES)),
        "quality": draw(st.sampled_from(["auto", "low", "medium", "high"])),
        "output_format": draw(st.sampled_from(["png", "jpeg", "webp"])),
        "output_compression": draw(st.none() | st.integers(0, 100)),
        "aspect_ratio": draw(st.sampled_from([None, "1:1", "1920:1080"])),
        "resolution": draw(st.sampled_from([None, "1k", "4k"])),
        "background": draw(st.sampled_from(["auto", "opaque", "transparent"])),
        "moderation": draw(st.sampled_from(["auto", "low"])),
        "partial_images": draw(st.integers(0, 3)),
    }
    return request(
        negative_prompt=draw(st.sampled_from([None, "blurry hands"])),
        parameters={key: value for key, value in parameters.items() if value is not None},
        policies={
            # weighted towards the modes that normalize: strict refuses most draws outright
            "compatibility": draw(st.sampled_from(["normalize", "best_effort", "strict"])),
            "negative_prompt": draw(st.sampled_from(["auto", "native", "merge", "reject"])),
        },
    )


@example(
    req=request(
        negative_prompt="blurry hands",
        parameters={
            "n": 5,
            "size": "2048x2048",
            "quality": "high",
            "output_format": "jpeg",
            "output_compression": 70,
            "aspect_ratio": "16:9",
            "resolution": "2k",
            "partial_images": 3,
        },
        policies=normalize(negative_prompt="merge"),
    ),
    caps=capabilities(),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(req=_requests(), caps=_capability_documents())
def test_negotiating_a_negotiated_request_again_changes_nothing(
    req: ImageRequest, caps: ProviderCapabilities
) -> None:
    try:
        first = negotiate_request(req, caps)
    except BridgeError as error:  # refused up front: nothing to negotiate twice
        assert error.code is ErrorCode.UNSUPPORTED_CAPABILITY
        return
    event("first negotiation normalized" if first.normalizations else "first negotiation kept")
    second = negotiate_request(first.request, caps.model_copy(deep=True))
    assert second.request == first.request
    assert second.normalizations == []
    assert second.requested == first.request.parameters
    assert second.requested is not first.request.parameters


def _immutable_leaves(annotation: Any) -> bool:
    """Whether every type a field annotation admits is an immutable scalar."""
    if get_origin(annotation) is Annotated:  # constraints aside, the type is the first argument
        return _immutable_leaves(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):  # Optional[...]: every member qualifies
        return all(_immutable_leaves(argument) for argument in get_args(annotation))
    return annotation is type(None) or (
        isinstance(annotation, type) and issubclass(annotation, (bool, int, float, str, Enum))
    )


def test_parameters_hold_only_immutable_values_so_a_shallow_copy_is_independent() -> None:
    """The ground of copy_parameters (and the mock's shallow copies): a mutable field
    (a list, a nested model) added to GenerationParameters must make them copy deeply."""
    mutable = [
        name
        for name, info in GenerationParameters.model_fields.items()
        if not _immutable_leaves(info.annotation)
    ]
    assert mutable == []
    original = request(parameters={"n": 2, "aspect_ratio": "16:9"}).parameters
    copy = copy_parameters(original)
    assert copy == original and copy is not original
    copy.n = 1
    assert original.n == 2


def test_an_emulated_mask_is_taken_out_only_when_normalizing() -> None:
    """Issue 32: ``masks: emulated`` means the bridge composites; strict keeps the refusal."""
    from imagebridge.engine.negotiation import negotiate_request
    from tests.support.capabilities import capabilities

    emulated = {"support": "emulated", "max_count": 1, "max_bytes_each": 1, "max_bytes_total": 1}
    caps = capabilities(provider="codex-x", masks=emulated)
    image = {"type": "base64", "data": "AA=="}
    body = {"operation": "edit", "prompt": "p", "images": [image], "mask": image}
    with pytest.raises(BridgeError) as caught:
        negotiate_request(ImageRequest.model_validate(body), caps)
    assert caught.value.details["codex_code"] == "CODEX_RASTER_MASK_UNSUPPORTED"
    normalized = negotiate_request(
        ImageRequest.model_validate({**body, "policies": {"compatibility": "normalize"}}), caps
    )
    assert normalized.mask_emulated and normalized.request.mask is None
    assert [(n.field, n.reason) for n in normalized.normalizations] == [("mask", "mask_emulated")]
