"""The ``imagegen-bridge`` command line (placeholder until the CLI lands)."""

from __future__ import annotations

import sys

from imagebridge._version import __version__


def main(argv: list[str] | None = None) -> int:
    """Entry point for the ``imagegen-bridge`` and ``imagebridge`` console scripts."""
    args = sys.argv[1:] if argv is None else argv
    if "--version" in args:
        print(f"imagegen-bridge {__version__}")
        return 0
    print("usage: imagegen-bridge [--version] COMMAND ...")
    return 0
