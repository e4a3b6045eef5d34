"""A typed Python client for an imagebridge (or imagegen-bridge) HTTP API.

Quick start::

    from imagebridge.client import ImageBridgeClient

    with ImageBridgeClient() as client:          # $IMAGEGEN_BRIDGE_URL or 127.0.0.1:8787
        response = client.images.generate("a paper fox")
        print(response.data[0].sha256)

Everything it returns is a contract model from :mod:`imagebridge.contract`; everything it
raises is a :class:`BridgeAPIError` (a :class:`~imagebridge.contract.errors.BridgeError`).
Streams yield :class:`StartedEvent`, :class:`ProgressEvent`, :class:`PartialImageEvent`
and finally :class:`CompletedEvent` or :class:`StreamError`. See ``docs/sdk.md``.
"""

from imagebridge.client._client import AsyncImageBridgeClient, ImageBridgeClient
from imagebridge.client._config import ClientSettings
from imagebridge.client._constants import (
    DEFAULT_BASE_URL,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_STREAM_BYTES,
    DEFAULT_TIMEOUT,
)
from imagebridge.client._exceptions import BridgeAPIError
from imagebridge.client._inputs import ImageFile, file_input
from imagebridge.client._models import ArtifactFile, JobPartial
from imagebridge.client._retry import RetryPolicy
from imagebridge.client._streaming import AsyncStream, Stream, StreamError, StreamEvent
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.events import (
    CompletedEvent,
    PartialImageEvent,
    ProgressEvent,
    StartedEvent,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_MAX_STREAM_BYTES",
    "DEFAULT_TIMEOUT",
    "ArtifactFile",
    "AsyncImageBridgeClient",
    "AsyncStream",
    "BridgeAPIError",
    "BridgeError",
    "ClientSettings",
    "CompletedEvent",
    "ErrorCode",
    "ImageBridgeClient",
    "ImageFile",
    "JobPartial",
    "PartialImageEvent",
    "ProgressEvent",
    "RetryPolicy",
    "StartedEvent",
    "Stream",
    "StreamError",
    "StreamEvent",
    "file_input",
]
