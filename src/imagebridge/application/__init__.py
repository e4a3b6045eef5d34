"""Wiring: the only place besides the surfaces that reads configuration.

It builds the providers (:mod:`.codex`, :mod:`.openai`, :mod:`.codex_app_server`), the
own logins (:mod:`.logins`), the image bounds and the engine's input loader
(:mod:`.inputs`), the engine with its artifact store and limits (:mod:`.wiring`) and
the job services on their stores (:mod:`.job_services`) from a validated
:class:`~imagebridge.config.model.BridgeConfig`. The surfaces (server, CLI,
MCP) call :func:`build_application` and use the result.
"""

from imagebridge.application.inputs import image_limits
from imagebridge.application.wiring import (
    PROVIDER_FACTORIES,
    Application,
    CallLogProvider,
    StoreSink,
    build_application,
    build_providers,
    request_limits,
)

__all__ = [
    "PROVIDER_FACTORIES",
    "Application",
    "CallLogProvider",
    "StoreSink",
    "build_application",
    "build_providers",
    "image_limits",
    "request_limits",
]
