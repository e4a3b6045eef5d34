"""The published OpenAPI document."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from imagebridge._version import __version__
from tests.server.conftest import ServeFactory

HEALTH = {"/health/live", "/health/ready"}
PUBLIC = {*HEALTH, "/v1/artifact-links/{id}/{filename}"}  # a signed link is its own permission


def test_document_shape_security_and_schemas(serve: ServeFactory) -> None:
    server = serve("server.metrics.enabled=true")
    with server.client() as client:
        document: dict[str, Any] = client.get("/v1/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"] == "Imagegen Bridge API"
    assert document["info"]["version"] == __version__
    assert document["servers"] == [{"url": "/"}]
    schemes = document["components"]["securitySchemes"]
    assert (
        schemes["bridgeBearer"]["type"] == "http" and schemes["bridgeBearer"]["scheme"] == "bearer"
    )
    assert "/v1/openapi.json" not in document["paths"]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            protected = operation.get("security") == [{"bridgeBearer": []}]
            assert protected == (path not in PUBLIC), (method, path)
            if path not in HEALTH:
                assert "default" in operation["responses"], (method, path)
    schemas = document["components"]["schemas"]
    for name in ("ImageRequest", "ImageResponse", "ProviderCapabilities", "OpenAIErrorEnvelope",
                 "CompatibleGenerationRequest", "OperatorDiagnostics", "ImageJob"):  # fmt: skip
        assert name in schemas, name
    images = document["paths"]["/v1/images"]["post"]
    body = images["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ImageRequest"}
    assert {p["name"] for p in images["parameters"]} == {"Idempotency-Key"}
    stream = document["paths"]["/v1/images/stream"]["post"]["responses"]["200"]["content"]
    assert list(stream) == ["text/event-stream"]
    assert document["paths"]["/v1/jobs"]["post"]["responses"]["202"]


def test_metrics_route_is_documented_only_when_mounted(serve: ServeFactory) -> None:
    server = serve()
    with server.client() as client:
        paths = client.get("/v1/openapi.json").json()["paths"]
    assert "/metrics" not in paths
    assert "/v1/images" in paths


def _walk(node: Any, path: str = "#") -> Any:
    """Yield (json-pointer, value) for every node of the document."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}/{index}")


def test_document_is_structurally_valid_openapi_3_1(serve: ServeFactory) -> None:
    """Every schema is valid JSON Schema 2020-12 (the OpenAPI 3.1 dialect), every ``$ref``
    resolves inside the document, operation ids are unique and every operation documents
    its responses."""
    server = serve("server.metrics.enabled=true")
    with server.client() as client:
        document: dict[str, Any] = client.get("/v1/openapi.json").json()
    assert set(document) >= {"openapi", "info", "paths", "components"}
    assert {"title", "version"} <= set(document["info"])
    for name, schema in document["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)  # raises SchemaError when invalid
        assert isinstance(schema, dict), name

    def resolve(pointer: str) -> Any:
        assert pointer.startswith("#/"), pointer
        node: Any = document
        for part in pointer[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    refs = [
        value["$ref"] for _, value in _walk(document) if isinstance(value, dict) and "$ref" in value
    ]
    assert refs
    for ref in refs:
        resolve(ref)  # KeyError when dangling
    operation_ids: list[str] = []
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    for path, item in document["paths"].items():
        assert path.startswith("/"), path
        for method, operation in item.items():
            assert method in methods, (path, method)
            assert operation["responses"], (path, method)
            operation_ids.append(operation["operationId"])
            for parameter in operation.get("parameters", []):
                assert parameter["in"] in {"query", "header", "path", "cookie"}
                if parameter["in"] == "path":
                    assert parameter["required"] is True
                    assert "{" + parameter["name"] + "}" in path
                Draft202012Validator.check_schema(parameter.get("schema", {}))
    assert len(operation_ids) == len(set(operation_ids))
