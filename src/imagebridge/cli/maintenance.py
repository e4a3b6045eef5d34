"""Bodies of ``config check|show|origins`` and ``artifacts cleanup|repair|migrate|verify``
(cleanup and repair act on the configured ``artifacts.backend``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imagebridge.cli.context import CliContext, CliUsageError

if TYPE_CHECKING:
    from imagebridge.application.artifact_migration import MigrationReport
    from imagebridge.artifacts.records import CleanupReport, RepairReport

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
    import asyncio

    from imagebridge.application.artifact_backend import bucket_store, filesystem_store

    if config.artifacts.backend == "s3":
        bucket = bucket_store(config)

        async def run() -> CleanupReport:
            async with bucket.objects:
                return await bucket.cleanup(
                    max_age_secs=retention.max_age_secs,
                    max_artifacts=retention.max_artifacts,
                    max_scan_entries=retention.max_scan_entries,
                    stale_temp_secs=retention.stale_temp_secs,
                )

        report = asyncio.run(run())
    else:
        report = filesystem_store(config).cleanup(
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

    from imagebridge.application.artifact_backend import bucket_store, filesystem_store

    config = ctx.config()
    retention = config.artifacts.retention
    if config.artifacts.backend == "s3":
        import asyncio

        bucket = bucket_store(config)

        async def run() -> RepairReport:
            async with bucket.objects:
                return await bucket.repair_orphans(
                    retention.max_scan_entries,
                    apply=force,
                    stale_temp_secs=retention.stale_temp_secs,
                )

        report = asyncio.run(run())
    else:
        report = filesystem_store(config).repair_orphans(
            retention.max_scan_entries, apply=force, stale_temp_secs=retention.stale_temp_secs
        )
    ctx.output.value({"dry_run": dry_run, **asdict(report)})
    return 0


def artifacts_migrate(ctx: CliContext, *, to: str, dry_run: bool, force: bool) -> int:
    """Copy every verified artifact from one store into the other (``--to s3``: from
    ``artifacts.root`` into the ``[artifacts.s3]`` bucket; ``--to filesystem``: back)."""
    _one_of(dry_run, force, "artifacts migrate")
    if to not in ("s3", "filesystem"):
        raise CliUsageError("artifacts migrate: --to must be s3 or filesystem")
    import asyncio
    from dataclasses import asdict

    from imagebridge.application.artifact_backend import bucket_store, filesystem_store
    from imagebridge.application.artifact_migration import (
        migrate_to_filesystem,
        migrate_to_s3,
    )

    config = ctx.config()
    local = filesystem_store(config)
    bucket = bucket_store(config)
    max_scan = config.artifacts.retention.max_scan_entries

    def progress(done: int, total: int) -> None:
        ctx.output.status(f"artifacts migrate: {done}/{total}", done=done, total=total)

    async def run() -> MigrationReport:
        async with bucket.objects:
            if to == "s3":
                return await migrate_to_s3(
                    local, bucket, max_scan=max_scan, apply=force, progress=progress
                )
            return await migrate_to_filesystem(
                bucket, local, max_scan=max_scan, apply=force, progress=progress
            )

    report = asyncio.run(run())
    ctx.output.value({"dry_run": dry_run, "to": to, **asdict(report)})
    return 1 if report.failed else 0


def artifacts_verify(ctx: CliContext, *, store: str) -> int:
    """Read back every artifact of one store against its recorded hashes (exit 1 on any)."""
    import asyncio
    from dataclasses import asdict

    from imagebridge.application.artifact_backend import bucket_store, filesystem_store
    from imagebridge.application.artifact_migration import VerifyReport, verify_filesystem

    config = ctx.config()
    max_scan = config.artifacts.retention.max_scan_entries
    if store == "filesystem":
        report = asyncio.run(verify_filesystem(filesystem_store(config), max_scan=max_scan))
    elif store == "s3":
        target = bucket_store(config)

        async def run() -> VerifyReport:
            async with target.objects:
                scanned, verified, failed, reached = await target.verify(max_scan)
            return VerifyReport(scanned, verified, failed, reached)

        report = asyncio.run(run())
    else:
        raise CliUsageError("artifacts verify: --store must be filesystem or s3")
    ctx.output.value({"store": store, **asdict(report)})
    return 1 if report.failed else 0
