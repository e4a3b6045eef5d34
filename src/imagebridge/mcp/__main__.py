"""``python -m imagebridge.mcp``: the MCP server without the rest of the CLI.

Flags: ``--config FILE``, ``--set KEY=VALUE`` / ``--unset KEY`` (repeatable),
``--remote URL`` (else ``$IMAGEGEN_BRIDGE_URL``; token from ``$IMAGEGEN_BRIDGE_TOKEN``),
``--transport stdio|streamable-http`` and ``--bind 127.0.0.1:PORT``. Errors go to stderr;
the exit status is 2 for usage mistakes and 1 for anything else.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.mcp.options import DEFAULT_HTTP_PORT, options_from

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m imagebridge.mcp", description="Run the imagegen-bridge MCP server."
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="TOML config file.")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--unset", dest="unsets", action="append", default=[], metavar="KEY")
    parser.add_argument("--remote", metavar="URL", help="Use a running bridge at URL.")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument(
        "--bind", metavar="HOST:PORT", help=f"HTTP listen address (127.0.0.1:{DEFAULT_HTTP_PORT})."
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    env = dict(os.environ)
    try:
        options = options_from(args.transport, args.bind, args.remote, env)
        from imagebridge.mcp.server import load_mcp_config, run

        config = load_mcp_config(
            config_path=args.config, sets=args.sets, unsets=args.unsets, env=env
        )
        run(config, options, env=env)
    except BridgeError as error:
        sys.stderr.write(f"error: {error.message}\n")
        for suggestion in error.suggestions:
            sys.stderr.write(f"hint: {suggestion}\n")
        return 2 if error.code is ErrorCode.INVALID_REQUEST else 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
