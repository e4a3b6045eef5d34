"""Network interface names, read from the kernel's per-namespace ``/proc/net/dev`` table."""

from __future__ import annotations

from pathlib import Path


def interfaces(proc_net_dev: str) -> set[str]:
    """The interface names of one ``/proc/net/dev`` table (per network namespace)."""
    return {line.split(":", 1)[0].strip() for line in proc_net_dev.splitlines()[2:] if ":" in line}


def current_interfaces() -> set[str]:
    """The interface names of this process's network namespace."""
    return interfaces(Path("/proc/self/net/dev").read_text())
