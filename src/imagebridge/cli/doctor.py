"""``doctor`` and ``auth-doctor``: non-generating health checks, in a fixed order.

Each check reports ``pass``, ``warn``, ``fail`` or ``skip``. Provider checks run only when
every local prerequisite passed. Unlike the original, a missing ``codex`` executable only
blocks them when the codex-app-server provider (the one that runs it) is enabled. The live
probe — one real, possibly paid generation — runs only with ``--live-probe`` and a
confirmation (or ``--yes``). A store at a ``postgresql://`` URL (jobs, sessions) has its
schema read in PostgreSQL, read-only, and no local directory is checked for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from imagebridge._version import __version__
from imagebridge.cli.context import CliContext
from imagebridge.cli.failures import invalid
from imagebridge.cli.output import exit_code_for
from imagebridge.cli.probes import (
    CODEX_PROVIDERS,
    can_prompt,
    codex_needed,
    codex_version,
    confirm,
    directory_state,
    oauth_error,
    oauth_needed,
    run_live_probe,
    write_probe,
)
from imagebridge.contract.errors import BridgeError, ErrorCode

if TYPE_CHECKING:
    from imagebridge.config import BridgeConfig, LoadedConfig

__all__ = ["Doctor", "auth_doctor_command", "doctor_command"]

Status = Literal["pass", "warn", "fail", "skip"]
READINESS_TIMEOUT_S = 10.0
QUOTA_TIMEOUT_S = 10.0
PREREQUISITES = (
    "configuration",
    "codex_executable",
    "codex_oauth",
    "artifact_storage",
    "state_storage",
    "database_migrations",
    "job_state_storage",
    "job_database_migrations",
)


@dataclass(slots=True)
class Doctor:
    checks: list[dict[str, Any]] = field(default_factory=list)

    def add(self, name: str, status: Status, message: str, details: Any = None) -> None:
        check: dict[str, Any] = {"name": name, "status": status, "message": message}
        if details is not None:
            check["details"] = details
        self.checks.append(check)

    def status_of(self, name: str) -> Status | None:
        for check in self.checks:
            if check["name"] == name:
                status: Status = check["status"]
                return status
        return None

    def prerequisites_passed(self) -> bool:
        return all(self.status_of(name) in (None, "pass", "warn", "skip") for name in PREREQUISITES)

    def summary(self) -> dict[str, int]:
        counts = {"passed": 0, "warnings": 0, "failed": 0, "skipped": 0}
        key = {"pass": "passed", "warn": "warnings", "fail": "failed", "skip": "skipped"}
        for check in self.checks:
            counts[key[check["status"]]] += 1
        return counts

    @property
    def ok(self) -> bool:
        return self.summary()["failed"] == 0


def _storage(doctor: Doctor, name: str, directory: Path) -> None:
    state = directory_state(directory)
    details = {"path": str(directory)}
    if state.symlink or (state.exists and not state.is_directory):
        doctor.add(name, "fail", "path is not a real directory", details)
    elif not state.exists:
        parent = directory.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        reason = write_probe(parent) if parent.is_dir() else "no existing parent directory"
        if reason is None:
            doctor.add(
                name,
                "warn",
                "directory does not exist yet; it is created on first use "
                "(or by `imagegen-bridge setup`)",
                details,
            )
        else:
            doctor.add(name, "fail", f"directory cannot be created ({reason})", details)
    else:
        reason = write_probe(directory)
        if reason is None:
            doctor.add(name, "pass", "directory is writable (reversible write probe)", details)
        else:
            doctor.add(name, "fail", f"directory is not writable ({reason})", details)


async def _object_store(doctor: Doctor, config: BridgeConfig, env: Mapping[str, str]) -> None:
    """With ``artifacts.backend = "s3"``: does the bucket answer to these credentials?"""
    from imagebridge.application.object_store import s3_settings
    from imagebridge.artifacts.s3.objects import S3ObjectStore

    section = config.artifacts.s3
    details = {"bucket": section.bucket, "endpoint": section.endpoint or "AWS S3"}
    try:
        async with S3ObjectStore(s3_settings(section, env)) as objects:
            await objects.check()
    except BridgeError as error:
        reason = error.details.get("reason") or error.details.get("field")
        doctor.add("artifact_object_store", "fail", error.message, {**details, "reason": reason})
        return
    doctor.add("artifact_object_store", "pass", "the artifact bucket answers (HeadBucket)", details)


def _schema_check(
    doctor: Doctor, name: str, status: Any, where: dict[str, str], *, postgres: bool
) -> None:
    details = {**where, **status.to_dict()}
    if status.current:
        doctor.add(name, "pass", "database schema is current", details)
    elif not status.initialized:
        missing = (
            "database schema has no tables yet; they are created on first use"
            if postgres
            else "database does not exist yet; it is created on first use"
        )
        doctor.add(name, "warn", missing, details)
    elif status.version is not None and status.version > status.current_version:
        doctor.add(name, "fail", "database was written by a newer bridge", details)
    else:
        doctor.add(name, "warn", "database schema is older; it is migrated on first use", details)


def _where(location: str | Path) -> dict[str, str]:
    """How a store location is shown: a path, or a PostgreSQL URL without its password."""
    from imagebridge.storage import is_postgres_url, redact_url

    if is_postgres_url(location):
        return {"url": redact_url(str(location))}
    return {"path": str(location)}


def _local_path(location: str | Path, label: str) -> Path | None:
    """The SQLite file a location names, or ``None`` for PostgreSQL (nothing on disk)."""
    from imagebridge.storage.location import resolve_store_location

    target = resolve_store_location(location, ErrorCode.CONFIGURATION, label)
    return target if isinstance(target, Path) else None


async def _inspect(
    doctor: Doctor,
    name: str,
    location: str | Path,
    store: Literal["jobs", "sessions"],
    config: BridgeConfig,
    env: Mapping[str, str],
) -> None:
    """One store's schema: a SQLite file or, for a URL, the configured PostgreSQL schema."""
    from imagebridge.storage import inspect_store_schema, is_postgres_url, postgres_options

    where = _where(location)
    postgres = is_postgres_url(location)
    try:
        options = postgres_options(config.server.jobs, env) if postgres else None
        if options is not None:
            where["schema"] = options.schema
        status = await inspect_store_schema(location, store, postgres=options)
    except BridgeError as error:
        doctor.add(name, "fail", error.message, where)
        return
    _schema_check(doctor, name, status, where, postgres=postgres)


async def _databases(doctor: Doctor, config: BridgeConfig, env: Mapping[str, str]) -> None:
    session_db = config.providers.codex_app_server.session_database
    await _inspect(doctor, "database_migrations", session_db, "sessions", config, env)
    jobs = config.server.jobs
    if not jobs.enabled:
        doctor.add("job_database_migrations", "skip", "durable jobs are disabled")
        return
    try:
        jobs_path = _local_path(jobs.database, "durable job database")
    except BridgeError as error:
        doctor.add("job_state_storage", "fail", error.message, _where(jobs.database))
    else:
        if jobs_path is None:
            doctor.add(
                "job_state_storage",
                "skip",
                "durable jobs live in PostgreSQL",
                _where(jobs.database),
            )
        elif jobs_path.parent != _session_directory(session_db):
            _storage(doctor, "job_state_storage", jobs_path.parent)
    await _inspect(doctor, "job_database_migrations", jobs.database, "jobs", config, env)


def _session_directory(session_db: str | Path) -> Path | None:
    """The directory ``state_storage`` checks (``None``: none, or not a usable location)."""
    with contextlib.suppress(BridgeError):
        path = _local_path(session_db, "session database")
        return None if path is None else path.parent
    return None


def _state_storage(doctor: Doctor, session_db: str | Path) -> None:
    """The session database's directory, unless the bindings live in PostgreSQL."""
    try:
        path = _local_path(session_db, "session database")
    except BridgeError as error:
        doctor.add("state_storage", "fail", error.message, _where(session_db))
        return
    if path is None:
        doctor.add(
            "state_storage", "skip", "session bindings live in PostgreSQL", _where(session_db)
        )
    else:
        _storage(doctor, "state_storage", path.parent)


def _server_port(doctor: Doctor, bind: str) -> None:
    from imagebridge.config._net import parse_socket_address

    address, port = parse_socket_address(bind)
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(address), port))
        except OSError:
            doctor.add(
                "server_port",
                "warn",
                "the configured address is in use (a bridge may already be running)",
                {"bind": bind},
            )
            return
    doctor.add("server_port", "pass", "the configured address is free", {"bind": bind})


async def _providers(doctor: Doctor, config: BridgeConfig, selected: str | None) -> None:
    from imagebridge.application import build_application

    try:
        app = build_application(config)
    except BridgeError as error:
        doctor.add("provider_readiness", "fail", error.message, error.to_dict())
        return
    registry = app.runtime.registry
    name = selected or registry.default
    try:
        results = await registry.readiness(READINESS_TIMEOUT_S)
        wire = [result.to_wire() for result in results]
        failing = [result for result in results if result.error is not None]
        if any(result.provider == name for result in failing) or name not in registry.names:
            doctor.add("provider_readiness", "fail", f"provider {name} is not ready", wire)
        elif failing:
            doctor.add("provider_readiness", "warn", "a fallback provider is not ready", wire)
        else:
            doctor.add("provider_readiness", "pass", "every provider is ready", wire)
        try:
            caps = await registry.capabilities(name, None)
            doctor.add(
                "provider_capabilities",
                "pass",
                f"{name} capabilities discovered",
                {
                    "provider": caps.provider,
                    "model": caps.model,
                    "count": caps.count.to_wire(),
                    "batching": caps.batching.to_wire(),
                },
            )
        except BridgeError as error:
            doctor.add("provider_capabilities", "fail", error.message, error.to_dict())
        await _quota(doctor, app, name)
    finally:
        try:
            await app.aclose()
        except BridgeError as error:
            doctor.add("provider_shutdown", "warn", error.message, error.to_dict())
        else:
            doctor.add("provider_shutdown", "pass", "providers shut down cleanly")


async def _quota(doctor: Doctor, app: Any, name: str) -> None:
    """Quota windows, for providers that report them (the Codex transports read
    ``wham/usage``: a plain read, never a generation)."""
    from imagebridge.cli.quota import read_quota

    try:
        provider = app.runtime.registry.resolve(name)
    except BridgeError:
        return
    reading = await read_quota(provider, timeout_s=QUOTA_TIMEOUT_S)
    if reading.status == "not_reported":
        doctor.add("provider_quota", "skip", f"{name} does not report quota")
    elif reading.status == "unavailable":
        doctor.add("provider_quota", "warn", f"{name} quota is unavailable", reading.to_dict())
    else:
        doctor.add("provider_quota", "pass", f"{name} quota reported", reading.quota)
    if reading.accounts is not None:
        ready = reading.accounts.get("ready", 0)
        total = len(reading.accounts.get("accounts", []))
        status: Status = "pass" if ready == total else "warn" if ready else "fail"
        message = f"{name}: {ready} of {total} pool accounts ready"
        doctor.add("provider_accounts", status, message, reading.accounts)


def _pool_logins(doctor: Doctor, config: BridgeConfig) -> None:
    """Every pool account's login (read only): pass when all load, warn when some do."""
    from imagebridge.cli.probes import pool_login_errors

    errors = pool_login_errors(config)
    details = {
        name: "ok" if error is None else str(error.details.get("reason") or error.code.value)
        for name, error in errors.items()
    }
    usable = sum(1 for error in errors.values() if error is None)
    message = f"{usable} of {len(errors)} pool accounts have a usable ChatGPT login"
    status: Status = "pass" if usable == len(errors) else "warn" if usable else "fail"
    doctor.add("codex_oauth", status, message, {"accounts": details})


def run_checks(ctx: CliContext, provider: str | None) -> tuple[Doctor, LoadedConfig | None]:
    doctor = Doctor()
    doctor.add(
        "bridge_executable",
        "pass",
        f"imagegen-bridge {__version__}",
        {"python": sys.executable, "version": __version__},
    )
    try:
        loaded = ctx.load()
    except BridgeError as error:
        doctor.add("configuration_file", "fail", error.message, error.details or None)
        doctor.add("configuration", "skip", "configuration could not be loaded")
        return doctor, None
    if loaded.path is not None:
        doctor.add(
            "configuration_file", "pass", "configuration file found", {"path": str(loaded.path)}
        )
    else:
        doctor.add(
            "configuration_file", "fail", "no configuration file found; run `imagegen-bridge setup`"
        )
    config = loaded.config
    if loaded.issues:
        doctor.add(
            "configuration",
            "fail",
            "configuration has issues",
            [issue.to_dict() for issue in loaded.issues],
        )
    else:
        doctor.add("configuration", "pass", "configuration is valid")
    executable = config.providers.codex_app_server.executable
    version = codex_version(executable, ctx.env)
    if version.available:
        doctor.add(
            "codex_executable", "pass", f"codex {version.version or ''}".strip(), version.to_dict()
        )
    elif codex_needed(config):
        doctor.add(
            "codex_executable",
            "fail",
            version.reason or "codex is not available",
            version.to_dict(),
        )
    else:
        doctor.add(
            "codex_executable",
            "skip",
            "codex is not installed; only the disabled codex-app-server provider needs it",
        )
    if oauth_needed(config) and config.accounts.pool_accounts():
        _pool_logins(doctor, config)
    elif oauth_needed(config):
        login_error = oauth_error(ctx.env, config)
        if login_error is None:
            doctor.add("codex_oauth", "pass", "Codex ChatGPT login is present and protected")
        else:
            reason = {"reason": login_error.details.get("reason")}
            doctor.add("codex_oauth", "fail", login_error.message, reason)
    else:
        doctor.add("codex_oauth", "skip", "no Codex provider is enabled")
    _storage(doctor, "artifact_storage", Path(config.artifacts.root))
    if config.artifacts.backend == "s3" and config.artifacts.s3.bucket is not None:
        asyncio.run(_object_store(doctor, config, ctx.env))
    _state_storage(doctor, config.providers.codex_app_server.session_database)
    asyncio.run(_databases(doctor, config, ctx.env))
    _server_port(doctor, config.server.bind)
    if doctor.prerequisites_passed() and not loaded.issues:
        asyncio.run(_providers(doctor, config, provider))
    else:
        for name in ("provider_readiness", "provider_capabilities", "provider_shutdown"):
            doctor.add(name, "skip", "a local prerequisite failed")
    _size_match(doctor, ctx)
    return doctor, loaded


def _size_match(doctor: Doctor, ctx: CliContext) -> None:
    """How often each transport delivered the size asked, as a running bridge measured it
    (``--remote`` / ``IMAGEGEN_BRIDGE_URL``); a local run has no history to show."""
    from imagebridge.cli.resources import remote_bridge
    from imagebridge.cli.size_match import size_match_check

    url = ctx.remote_url()
    if url is None:
        doctor.add(
            "size_match",
            "skip",
            "size-match rates are measured by a running bridge; pass --remote to read them",
        )
        return

    async def read() -> dict[str, Any]:
        async with remote_bridge(ctx, url) as bridge:
            return await bridge.diagnostics()

    try:
        body = asyncio.run(read())
    except BridgeError as error:
        doctor.add(
            "size_match", "warn", "the bridge's diagnostics could not be read", error.to_dict()
        )
        return
    status, message, rates = size_match_check(body)
    doctor.add("size_match", status, message, rates or None)


def doctor_command(
    ctx: CliContext, *, provider: str | None, live_probe: bool, yes: bool, non_interactive: bool
) -> int:
    doctor, loaded = run_checks(ctx, provider)
    probe: dict[str, Any] | None = None
    if not live_probe:
        doctor.add("live_probe", "skip", "not requested (--live-probe runs one paid generation)")
    elif not doctor.ok or loaded is None:
        doctor.add("live_probe", "skip", "an earlier check failed")
    elif not yes and not (
        can_prompt(ctx, non_interactive)
        and confirm(ctx, "Run one paid Codex OAuth image generation now?")
    ):
        doctor.add("live_probe", "skip", "not confirmed (pass --yes to run it)")
    else:
        try:
            probe = asyncio.run(run_live_probe(loaded.config, provider))
        except BridgeError as error:
            doctor.add("live_probe", "fail", error.message, error.to_dict())
        else:
            doctor.add("live_probe", "pass", "one image generated", probe)
    body: dict[str, Any] = {
        "ok": doctor.ok,
        "version": __version__,
        "checks": doctor.checks,
        "summary": doctor.summary(),
    }
    if probe is not None:
        body["live_probe"] = probe
    ctx.output.value(body)
    return 0 if doctor.ok else 2


def auth_doctor_command(ctx: CliContext, *, provider: str | None) -> int:
    """``{authenticated, providers[]}``; exit with the first not-ready error's code."""
    from imagebridge.application import build_application

    config = ctx.config()

    async def readiness() -> list[Any]:
        app = build_application(config)
        try:
            return await app.runtime.registry.readiness(READINESS_TIMEOUT_S)
        finally:
            with contextlib.suppress(BridgeError):
                await app.aclose()

    results = asyncio.run(readiness())
    if provider is not None:
        results = [result for result in results if result.provider == provider]
        if not results:
            raise invalid(
                "requested provider is not registered",
                "List the providers with `imagegen-bridge providers list`.",
                provider=provider,
            )
    else:
        codex = [result for result in results if result.provider in CODEX_PROVIDERS]
        results = codex or results
    errors = [result.error for result in results if result.error is not None]
    oauth = oauth_error(ctx.env, config) if oauth_needed(config) else None
    if oauth is not None and provider in (None, *CODEX_PROVIDERS):
        errors.insert(0, oauth)
    ctx.output.value(
        {"authenticated": not errors, "providers": [result.to_wire() for result in results]}
    )
    return exit_code_for(errors[0].code.value) if errors else 0
