"""How long the suite waits for something to start: a hang guard, never a measure.

A server thread, a bridge subprocess, PostgreSQL or Ceph start in a second or two on an idle
machine and in tens of seconds on one whose cores are shared (scripts/check runs a worker per
core, beside whatever else the machine does). A wait for "it is up" returns the moment it
is, so a generous bound costs a passing run nothing; a tight one fails a healthy run.
"""

from __future__ import annotations

from typing import Final

STARTUP_S: Final = 120.0
"""The most a server or child process may take to answer after it was started."""
