"""Our ``/v1/openapi.json`` against the original's document (tests/fixtures/contract).

A client generated from either document must work with both, so paths, operation ids and
component names match the original's; every difference is listed below with its reason,
and an unlisted one fails. Shapes of the original's components that the original's own
clients decode strictly are checked live in tests/server/observability/test_diagnostics.py and
tests/compat/.
"""

from __future__ import annotations

from typing import Any

from tests.compat import original_contract
from tests.server.conftest import ServeFactory

# (METHOD, path) pairs only imagebridge serves, with why.
OUR_OPERATIONS: dict[tuple[str, str], str] = {
    # imagebridge's additions to diagnostics; /v1/diagnostics keeps the original's keys.
    ("GET", "/v1/diagnostics/extended"): "getExtendedDiagnostics",
    # OpenAI's model list, for OpenAI clients' model pickers (docs/api-decisions.md).
    ("GET", "/v1/models"): "listModelsCompatible",
    ("GET", "/v1/models/{model}"): "getModelCompatible",
    # the signed link a `url` output is, fetchable without the bearer (docs/api-decisions.md)
    ("GET", "/v1/artifact-links/{id}/{filename}"): "getSignedArtifact",
    # deleting one's own artifact (its objects too, on S3): the original cannot (api-decisions)
    ("DELETE", "/v1/artifacts/{id}"): "deleteImageArtifact",
    # OpenAI's Responses API with the image_generation tool (docs/api-decisions.md, issue 40)
    ("POST", "/v1/responses"): "createResponse",
    # kept responses: retrieve (and resume), cancel a background one, delete (issue 40)
    ("GET", "/v1/responses/{response_id}"): "getResponse",
    ("POST", "/v1/responses/{response_id}/cancel"): "cancelResponse",
    ("DELETE", "/v1/responses/{response_id}"): "deleteResponse",
    # the history read as images, a cursor page at a time: the dashboard's gallery (issue 41)
    ("GET", "/v1/gallery"): "listGalleryImages",
}

# Components only imagebridge documents, with why (each an addition or a named part the
# original inlines; none replaces one of the original's components).
OUR_COMPONENTS: dict[str, str] = {
    "ExtendedDiagnostics": "body of GET /v1/diagnostics/extended",
    "ExtendedRuntimeDiagnostics": "runtime part of it, with circuit breakers",
    "ExtendedJobManagerDiagnostics": "jobs part of it, with shared-queue state",
    "CircuitBreakerDiagnostics": "one provider's breaker inside ExtendedRuntimeDiagnostics",
    "StorageDiagnostics": "storage part of ExtendedDiagnostics (full disk, I/O errors)",
    "StorageAreaFault": "one faulty write area inside StorageDiagnostics",
    "SizeMatchDiagnostics": "one transport's size-match rate inside ExtendedRuntimeDiagnostics",
    "SizeMismatchPolicy": "values of policies.size_mismatch (issue 32)",
    "RoutingPreference": "values of routing.prefer (issue 32)",
    "DisconnectPolicy": "values of policies.on_disconnect (issue 39)",
    "LiveStatus": "GET /health/live body, which the original leaves undocumented",
    "CompatImage": "an item of CompatibleImagesResponse.data, inlined by the original",
    "CompatResponseExtension": "CompatibleImagesResponse.imagegen_bridge, inlined by the original",
    "CompatUsage": "CompatibleImagesResponse.usage in OpenAI's shape (issue 30)",
    "CompatTokenDetails": "CompatUsage's input/output token split",
    "CompatModel": "an entry of GET /v1/models (OpenAI's Model)",
    "CompatModelList": "body of GET /v1/models (OpenAI's list shape)",
    "ResponsesCreateRequest": "body of POST /v1/responses (OpenAI's ResponseCreateParams)",
    "ResponsesBridgeExtension": "ResponsesCreateRequest.imagegen_bridge",
    "ResponsesStreamOptions": "ResponsesCreateRequest.stream_options",
    "ResponsesTextConfig": "ResponsesCreateRequest.text",
    "GalleryPage": "body of GET /v1/gallery (issue 41)",
    "GalleryItem": "one image (or imageless history row) of a GalleryPage",
    "GalleryImage": "the stored image a GalleryItem shows",
    "GalleryJob": "what a GalleryPage shows of one history row",
    "GalleryError": "a failed row's error code and message inside GalleryJob",
    # The four ProviderEvent variants, which the original inlines in its oneOf.
    "StartedEvent": "ProviderEvent variant",
    "ProgressEvent": "ProviderEvent variant",
    "PartialImageEvent": "ProviderEvent variant",
    "CompletedEvent": "ProviderEvent variant",
}

_METHODS = {"get", "put", "post", "patch", "delete", "head", "options"}


def _operations(document: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {
        (method.upper(), path): operation["operationId"]
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in _METHODS
    }


def _served(serve: ServeFactory) -> dict[str, Any]:
    server = serve("server.metrics.enabled=true")  # /metrics is documented when mounted
    with server.client() as client:
        document: dict[str, Any] = client.get("/v1/openapi.json").json()
    return document


def test_paths_and_operation_ids_match_the_original(serve: ServeFactory) -> None:
    ours, original = _operations(_served(serve)), _operations(original_contract.document())
    assert set(original) - set(ours) == set(), "operations of the original we do not serve"
    added = {key: value for key, value in ours.items() if key not in original}
    assert added == OUR_OPERATIONS, "an unexplained operation: list it with its reason"
    renamed = {key: (original[key], ours[key]) for key in original if original[key] != ours[key]}
    assert renamed == {}, "operation ids differ from the original's"


def test_component_names_match_the_original(serve: ServeFactory) -> None:
    ours = set(_served(serve)["components"]["schemas"])
    original = set(original_contract.document()["components"]["schemas"])
    assert original - ours == set(), "components of the original we do not document"
    assert ours - original == set(OUR_COMPONENTS), "an unexplained component: list it"


def test_shared_components_keep_the_original_properties(serve: ServeFactory) -> None:
    """The same property names (over every ``oneOf``/``anyOf``/``allOf`` branch) for every
    component both documents have, so a generated client's types carry the same fields.
    Which of them are marked required is not compared: pydantic marks defaulted fields
    optional where the original marks always-sent ones required."""
    ours = _served(serve)["components"]["schemas"]
    original = original_contract.document()["components"]["schemas"]
    differences = []
    for name in sorted(set(ours) & set(original)):
        mine, theirs = _outline(ours[name], ours), _outline(original[name], original)
        theirs |= _OPENAI_FIELDS.get(name, frozenset())
        if mine != theirs and (name, mine, theirs) not in _KNOWN_SHAPES:
            differences.append(f"{name}: ours {mine} vs original {theirs}")
    assert not differences, "\n".join(differences)


def _outline(schema: dict[str, Any], schemas: dict[str, Any]) -> frozenset[str]:
    """Property names of ``schema``, through its branches and their ``$ref``s."""
    names = set(schema.get("properties", {}))
    for keyword in ("oneOf", "anyOf", "allOf"):
        for branch in schema.get(keyword, []):
            ref = branch.get("$ref", "")
            target = schemas[ref.rsplit("/", 1)[1]] if ref else branch
            names |= _outline(target, schemas)
    return frozenset(names)


# Property differences that are decisions, not drift (docs/api-decisions.md).
_OPENAI_FIELDS: dict[str, frozenset[str]] = {
    # The compatible routes speak OpenAI's Images API as its SDKs do in late 2026 (issue 30,
    # docs/api-decisions.md "OpenAI clients"): the request takes every SDK field, the answer
    # carries OpenAI's top-level settings. No client of the original calls these routes.
    "CompatibleGenerationRequest": frozenset(
        {
            "safety_identifier",
            "style",
            "complexity",
            "partial_images",
            "stream",
            "frame_count",
            "frame_duration_ms",
            "svg",
        }
    ),
    "CompatibleImagesResponse": frozenset({"size", "quality", "output_format", "background"}),
    "CompatibleEditRequest": frozenset(
        {
            "safety_identifier",
            "style",
            "complexity",
            "partial_images",
            "stream",
            "frame_count",
            "frame_duration_ms",
            "markup",
        }
    ),
}

_KNOWN_SHAPES: set[tuple[str, frozenset[str], frozenset[str]]] = {
    # `events`: the original emits it and its SDK decodes it; its document omits it
    # (docs/api-decisions.md, quirk 7). We document what we send.
    (
        "OperatorDiagnostics",
        frozenset({"artifact_storage_enabled", "bridge_version", "configuration", "events",
                   "jobs", "providers", "runtime"}),
        frozenset({"artifact_storage_enabled", "bridge_version", "configuration", "jobs",
                   "providers", "runtime"}),
    ),
    # Request additions of issues 32 and 39, omitted from every echo when unset, so a
    # request the original's clients send (nulls for absent fields) is echoed unchanged
    # (docs/api-decisions.md, "Images as asked", "Paid work is kept, retries join it").
    (
        "RequestPolicies",
        frozenset({"batch_execution", "compatibility", "negative_prompt", "on_disconnect",
                   "revised_prompt", "size_mismatch"}),
        frozenset({"batch_execution", "compatibility", "negative_prompt", "revised_prompt"}),
    ),
    (
        "RoutingOptions",
        frozenset({"fallback_policy", "fallbacks", "model", "prefer", "provider"}),
        frozenset({"fallback_policy", "fallbacks", "model", "provider"}),
    ),
}  # fmt: skip
