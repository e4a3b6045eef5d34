"""Real HTTP servers on 127.0.0.1 for the CLI's remote mode: the bridge itself, or a stub.

``serving(app)`` runs any ASGI app with uvicorn in a background thread on a random
loopback port and stops it (bounded) afterwards.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from imagebridge.config import load_config
from tests.cli.conftest import OFFLINE
from tests.support.waiting import STARTUP_S


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` served on ``http://127.0.0.1:<port>`` for the duration of the block."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_S
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        raise RuntimeError("test server did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


@contextmanager
def bridge(
    data_dir: Path, sets: Sequence[str] = (), env: dict[str, str] | None = None
) -> Iterator[str]:
    """The real bridge app (mock provider only) on loopback."""
    from imagebridge.server import ServerOptions, create_app

    environ = {"IMAGEGEN_BRIDGE_DATA_DIR": str(data_dir), **OFFLINE, **(env or {})}
    loaded = load_config(env=environ, sets=list(sets), cwd=data_dir.parent)
    app = create_app(loaded.config, origins=loaded.origins, options=ServerOptions(env=environ))
    with serving(app) as url:
        yield url
