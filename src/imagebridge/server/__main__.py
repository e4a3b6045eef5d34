"""``python -m imagebridge.server [--config F] [--bind HOST:PORT] [--set k=v] [--unset k]``.

A thin launcher for ``run_server`` (the CLI's ``serve`` is the user-facing command). A
refusal prints the error as JSON on stderr and exits 2; a graceful stop exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from imagebridge.config import load_config
from imagebridge.contract.errors import BridgeError
from imagebridge.server.serve import run_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m imagebridge.server")
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--bind", default=None, help="IP:PORT (port 0 picks a free port)")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--unset", dest="unsets", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        loaded = load_config(config_path=args.config, sets=args.sets, unsets=args.unsets)
        return run_server(loaded, bind=args.bind)
    except BridgeError as error:
        print(json.dumps(error.to_dict()), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
