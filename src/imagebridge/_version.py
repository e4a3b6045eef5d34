"""The bridge's version, single-sourced for packaging, the CLI and diagnostics."""

__version__ = "0.1.0"
