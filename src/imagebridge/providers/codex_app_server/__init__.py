"""The ``codex app-server`` transport: child process, JSON-RPC link, turns and images.

Layers, bottom up: :mod:`.process` (spawn, drain stderr into :mod:`.stderr_tail`, restart,
bounded stop), :mod:`.framing` + :mod:`.rpc` (JSONL JSON-RPC "lite" with size limits, server
requests declined by :mod:`.server_requests`, bounded :mod:`.notifications` channels),
:mod:`.client` (handshake, health, typed methods, turns built by :mod:`.threads`),
:mod:`.images` (image capture), :mod:`.failures` (codex's turn and image failures as
``BridgeError``, with :mod:`.diagnostics` for "no image") and :mod:`.staging` (input images
as files). :mod:`.provider` (with :mod:`.accounts`,
:mod:`.session_threads`, :mod:`.session_locks`, :mod:`.capture`, :mod:`.deadlines`,
:mod:`.turn_cleanup`, :mod:`.partials`, :mod:`.capabilities`) is the provider class built
on :class:`AppServerClient`; :mod:`imagebridge.application.codex_app_server` builds it.
"""

from imagebridge.providers.codex_app_server.client import (
    AccountInfo,
    ActiveTurn,
    AppServerClient,
    ClientInfo,
    ModelProviderCapabilities,
    ServerInfo,
)
from imagebridge.providers.codex_app_server.images import (
    CapturedImage,
    CaptureLimits,
    TurnImageCollector,
    TurnImages,
    collect_turn_images,
    read_generated_image,
)
from imagebridge.providers.codex_app_server.notifications import Notification, NotificationChannel
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.process import AppServerProcess, ChildProcess
from imagebridge.providers.codex_app_server.provider import (
    AppServerProviderSettings,
    CodexAppServerProvider,
)
from imagebridge.providers.codex_app_server.rpc import RpcConnection
from imagebridge.providers.codex_app_server.staging import StagedBatch, StagingArea

__all__ = [
    "AccountInfo",
    "ActiveTurn",
    "AppServerClient",
    "AppServerOptions",
    "AppServerProcess",
    "AppServerProviderSettings",
    "CaptureLimits",
    "CapturedImage",
    "ChildProcess",
    "ClientInfo",
    "CodexAppServerProvider",
    "ModelProviderCapabilities",
    "Notification",
    "NotificationChannel",
    "RpcConnection",
    "ServerInfo",
    "StagedBatch",
    "StagingArea",
    "TurnImageCollector",
    "TurnImages",
    "collect_turn_images",
    "read_generated_image",
]
