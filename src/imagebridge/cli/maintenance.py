"""Bodies of ``config check|show|origins`` and ``artifacts cleanup|repair``."""

from __future__ import annotations

from imagebridge.cli.context import CliContext, CliUsageError

__all__ = [
    "artifacts_cleanup",
    "artifacts_repair",
    "config_check",
    "config_origins",
    "config_show",
]


def config_check(ctx: CliContext) -> int:
    """``{valid, issues}``; exit 2 when there are issues. Creates nothing."""
    loaded = ctx.load()
    issues = [issue.to_dict() for issue in loaded.issues]
    ctx.output.value({"valid": not issues, "issues": issues})
    return 2 if issues else 0


def config_show(ctx: CliContext) -> int:
    from imagebridge.config import show

    ctx.output.value(show(ctx.load().config))
    return 0


def config_origins(ctx: CliContext) -> int:
    from imagebridge.config import origins

    ctx.output.value(origins(ctx.load().origins))
    return 0


def _one_of(dry_run: bool, force: bool, command: str) -> None:
    if dry_run and force:
        raise CliUsageError(f"{command}: --dry-run cannot be used with --force")
    if not dry_run and not force:
        raise CliUsageError(f"{command} needs --dry-run (report only) or --force (apply)")


def artifacts_cleanup(ctx: CliContext, *, dry_run: bool, force: bool) -> int:
    _one_of(dry_run, force, "artifacts cleanup")
    config = ctx.config()
    retention = config.artifacts.retention
    if dry_run:
        ctx.output.value(
            {
                "dry_run": True,
                "root": str(config.artifacts.root),
                "max_age_seconds": retention.max_age_secs,
                "max_artifacts": retention.max_artifacts,
                "max_scan_entries": retention.max_scan_entries,
                "stale_temp_seconds": retention.stale_temp_secs,
            }
        )
        return 0
    from imagebridge.application import image_limits
    from imagebridge.artifacts.store import ArtifactStore

    store = ArtifactStore(config.artifacts.root, image_limits(config))
    report = store.cleanup(
        max_age_secs=retention.max_age_secs,
        max_artifacts=retention.max_artifacts,
        max_scan_entries=retention.max_scan_entries,
        stale_temp_secs=retention.stale_temp_secs,
    )
    ctx.output.value(
        {
            "scanned": report.scanned,
            "deleted": report.deleted,
            "skipped": report.skipped,
            "scan_limit_reached": report.scan_limit_reached,
            "stale_temp_files": report.stale_temp_files,
            "stale_temp_files_removed": report.stale_temp_files_removed,
            "temp_scan_limit_reached": report.temp_scan_limit_reached,
        }
    )
    return 0


def artifacts_repair(ctx: CliContext, *, dry_run: bool, force: bool) -> int:
    _one_of(dry_run, force, "artifacts repair")
    from dataclasses import asdict

    from imagebridge.application import image_limits
    from imagebridge.artifacts.store import ArtifactStore

    config = ctx.config()
    store = ArtifactStore(config.artifacts.root, image_limits(config))
    retention = config.artifacts.retention
    report = store.repair_orphans(
        retention.max_scan_entries, apply=force, stale_temp_secs=retention.stale_temp_secs
    )
    ctx.output.value({"dry_run": dry_run, **asdict(report)})
    return 0
