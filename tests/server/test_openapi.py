"""The published OpenAPI document."""

from __future__ import annotations

from typing import Any

from imagebridge._version import __version__
from tests.server.conftest import ServeFactory

PUBLIC = {"/health/live", "/health/ready"}


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
            if path not in PUBLIC:
                assert "default" in operation["responses"], (method, path)
    schemas = document["components"]["schemas"]
    for name in ("ImageRequest", "ImageResponse", "ProviderCapabilities", "ErrorEnvelope",
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
