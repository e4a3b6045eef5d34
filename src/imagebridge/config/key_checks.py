"""Checks of ``[server.keys]``: the quota time zone and the failed-authentication limits."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from imagebridge.config.model import BridgeConfig
from imagebridge.config.store_checks import Report, check_store_location

__all__ = ["check_keys"]


def check_keys(config: BridgeConfig, report: Report) -> None:
    keys = config.server.keys
    try:
        ZoneInfo(keys.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        report("server.keys.time_zone", "invalid", "must be an IANA time zone such as UTC")
    for field in (
        "max_keys",
        "auth_failure_limit",
        "auth_failure_window_secs",
        "auth_failure_max_clients",
        "slot_lease_secs",
        "slot_poll_max_ms",
    ):
        if getattr(keys, field) == 0:
            report(f"server.keys.{field}", "out_of_range", "limit must be greater than zero")
    if keys.enabled and not config.server.jobs.enabled:  # opened for the keys alone
        check_store_location("server.jobs.database", config.server.jobs.database, report)
