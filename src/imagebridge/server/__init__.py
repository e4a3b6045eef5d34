"""The HTTP surface: the v1 API, SSE, OpenAI-compatible routes, auth and telemetry.

``create_app`` builds the ASGI app from configuration; ``run_server`` serves it with
uvicorn (what ``imagegen-bridge serve`` and ``python -m imagebridge.server`` call).
"""

from imagebridge.server.app import create_app
from imagebridge.server.serve import run_server
from imagebridge.server.state import BridgeState, ServerOptions

__all__ = ["BridgeState", "ServerOptions", "create_app", "run_server"]
