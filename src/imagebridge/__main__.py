"""``python -m imagebridge``: the same command line as ``imagegen-bridge``."""

from __future__ import annotations

import sys

from imagebridge.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
