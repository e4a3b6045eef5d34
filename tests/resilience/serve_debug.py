"""``python -m tests.resilience.serve_debug --set k=v …``: the real app plus a counting hook.

The bridge exposes no count of its asyncio tasks, so the soak test runs the server through
this launcher: the app built exactly as ``run_server`` builds it (configuration, lifespan,
uvicorn settings), wrapped in a tiny ASGI layer that answers ``GET /__debug/counts`` with
the process's live asyncio tasks and threads. Everything else passes through untouched.
It always listens on a free ``127.0.0.1`` port and announces it as ``listening on URL`` on
stderr, like ``python -m imagebridge.server``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import threading
from typing import Any

import uvicorn

from imagebridge.config import load_config
from imagebridge.server import ServerOptions, create_app
from imagebridge.server.serve import uvicorn_config

COUNTS_PATH = "/__debug/counts"


class CountingApp:
    """ASGI wrapper: ``GET /__debug/counts`` → ``{"tasks": n, "threads": n}``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == COUNTS_PATH:
            # this request's own task is not a leak: leave it out
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            body = json.dumps({"tasks": len(tasks), "threads": threading.active_count()})
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self.app(scope, receive, send)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.resilience.serve_debug")
    parser.add_argument("--bind", default="127.0.0.1:0", help="ignored: always 127.0.0.1:0")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    args = parser.parse_args(argv)
    loaded = load_config(sets=args.sets)
    config = loaded.require_valid()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)  # connections wait here until uvicorn has started
    port = int(sock.getsockname()[1])
    app = create_app(
        config,
        origins=loaded.origins,
        options=ServerOptions(listener=("127.0.0.1", port)),
    )
    server = uvicorn.Server(uvicorn_config(CountingApp(app), config))
    print(f"listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
