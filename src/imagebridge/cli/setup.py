"""``setup``: plan, show and (after confirmation) apply a working local installation.

The plan writes three paths into the config file (the Codex app-server session database,
the jobs database and the artifact root), creates the private state directories (0700)
and the output directory, and brings both databases to the current schema. A database
configured at a ``postgresql://`` URL stays there (``--state-root`` moves only SQLite
files): setup creates no directory for it and migrates its schema through the store
factories, with the ``server.jobs.postgres_*`` options. It also
reports whether the ``codex`` CLI runs and whether its ChatGPT login can be borrowed
(the token itself is never read into output or copied). Running it again changes
nothing: ``changed:false``.
"""

from __future__ import annotations

import asyncio
import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs

from imagebridge.cli.context import CliContext, CliUsageError
from imagebridge.cli.output import exit_code_for
from imagebridge.cli.probes import (
    can_prompt,
    codex_needed,
    codex_version,
    confirm,
    directory_state,
    oauth_error,
    oauth_needed,
    run_live_probe,
)
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.location import is_postgres_url, resolve_store_location
from imagebridge.storage.postgres.url import postgres_options, redact_url

if TYPE_CHECKING:
    from imagebridge.storage import PostgresOptions

__all__ = ["Change", "SetupPlan", "default_output_root", "default_state_root", "setup_command"]

APP = "imagegen-bridge"
CONFIG_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
CONFIRMATION_REQUIRED = "confirmation is required; rerun with --yes or use --dry-run"


Location = Path | str
"""A store's location: an absolute SQLite path, or a PostgreSQL URL (kept as text)."""


def _shown(location: Location) -> str:
    return redact_url(location) if isinstance(location, str) else str(location)


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    path: Location

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "path": _shown(self.path)}


@dataclass(slots=True)
class SetupPlan:
    config_path: Path
    config_exists: bool
    tree: dict[str, Any]
    state_root: Path | None
    """The local state directory (``None`` when every database is in PostgreSQL)."""
    output_root: Path
    session_database: Location
    jobs_database: Location
    jobs_enabled: bool
    postgres: PostgresOptions | None
    changes: list[Change]
    codex: dict[str, Any]
    codex_required: bool
    oauth_ready: bool
    oauth_required: bool


def _absolute(value: str, cwd: Path) -> Path:
    path = Path(value).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else cwd / path))


def _location(value: Path | str, cwd: Path, field: str) -> Location:
    """A PostgreSQL URL as is; a path or ``sqlite:///`` URL as an absolute path."""
    if is_postgres_url(value):
        return str(value)
    target = resolve_store_location(value, ErrorCode.CONFIGURATION, field)
    return _absolute(str(target), cwd)


def _local_parent(location: Location) -> Path | None:
    return location.parent if isinstance(location, Path) else None


def _xdg(env: dict[str, str] | Any, name: str) -> Path | None:
    value = env.get(name, "")
    return Path(value) if value and Path(value).is_absolute() else None


def default_state_root(env: Any) -> Path:
    """``$IMAGEGEN_BRIDGE_DATA_DIR/state``, ``$XDG_STATE_HOME/imagegen-bridge`` or the OS
    default."""
    data = env.get("IMAGEGEN_BRIDGE_DATA_DIR", "")
    if data:
        return Path(data) / "state"
    xdg = _xdg(env, "XDG_STATE_HOME")
    if xdg is not None:
        return xdg / APP
    home = env.get("HOME", "")
    if os.name == "posix" and home:
        return Path(home) / ".local" / "state" / APP
    return platformdirs.user_state_path(APP, appauthor=False)


def default_output_root(env: Any) -> Path:
    """``$IMAGEGEN_BRIDGE_DATA_DIR/artifacts``, ``$XDG_DATA_HOME/imagegen-bridge/artifacts`` …"""
    data = env.get("IMAGEGEN_BRIDGE_DATA_DIR", "")
    if data:
        return Path(data) / "artifacts"
    xdg = _xdg(env, "XDG_DATA_HOME")
    if xdg is not None:
        return xdg / APP / "artifacts"
    home = env.get("HOME", "")
    if os.name == "posix" and home:
        return Path(home) / ".local" / "share" / APP / "artifacts"
    return platformdirs.user_data_path(APP, appauthor=False) / "artifacts"


def config_target(ctx: CliContext) -> Path:
    """``--config``/``$IMAGEGEN_BRIDGE_CONFIG``, ``./imagegen-bridge.toml`` if present, else
    the per-user file."""
    from imagebridge.config.paths import CONFIG_ENV_VAR, LOCAL_CONFIG_NAME, user_config_file

    explicit = ctx.options.config
    if explicit is None and ctx.env.get(CONFIG_ENV_VAR):
        explicit = Path(ctx.env[CONFIG_ENV_VAR])
    if explicit is not None:
        return _absolute(str(explicit), ctx.cwd)
    local = ctx.cwd / LOCAL_CONFIG_NAME
    if os.path.lexists(local):
        return local
    return user_config_file(ctx.env)


def _set(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = tree
    for name in path[:-1]:
        child = node.get(name)
        if not isinstance(child, dict):
            child = {}
            node[name] = child
        node = child
    node[path[-1]] = value


def _has(tree: dict[str, Any], path: tuple[str, ...]) -> bool:
    node: Any = tree
    for name in path:
        if not isinstance(node, dict) or name not in node:
            return False
        node = node[name]
    return True


SESSION_KEY = ("providers", "codex_app_server", "session_database")
JOBS_KEY = ("server", "jobs", "database")
ROOT_KEY = ("artifacts", "root")


def make_plan(ctx: CliContext, state_root: str | None, output_root: str | None) -> SetupPlan:
    from imagebridge.config import parse_config
    from imagebridge.config.files import read_config_file
    from imagebridge.config.paths import default_data_dir

    path = config_target(ctx)
    exists = os.path.lexists(path)
    original: dict[str, Any] = read_config_file(path) if exists else {}
    tree = copy.deepcopy(original)
    state = _absolute(state_root, ctx.cwd) if state_root else default_state_root(ctx.env)
    output = _absolute(output_root, ctx.cwd) if output_root else default_output_root(ctx.env)
    if not exists:
        tree.setdefault("version", 1)
    if not exists or (state_root is not None and not _in_postgres(tree, SESSION_KEY)):
        _set(tree, SESSION_KEY, str(state / "sessions.sqlite3"))
    moves_jobs = state_root is not None and not _in_postgres(tree, JOBS_KEY)
    if not exists or moves_jobs or not _has(tree, JOBS_KEY):
        _set(tree, JOBS_KEY, str(state / "jobs.sqlite3"))
    if not exists or output_root is not None:
        _set(tree, ROOT_KEY, str(output))
    loaded = parse_config(tree, path=path, env=ctx.env, data_dir=default_data_dir(ctx.env, ctx.cwd))
    if loaded.issues:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "the configuration setup would write is not valid",
            details={"issues": [issue.to_dict() for issue in loaded.issues]},
        ).with_suggestion("Fix the listed keys in the existing config file, then rerun setup.")
    config = loaded.config
    session_db = _location(
        config.providers.codex_app_server.session_database, ctx.cwd, "session database"
    )
    jobs_db = _location(config.server.jobs.database, ctx.cwd, "durable job database")
    postgres = (
        postgres_options(config.server.jobs, ctx.env)
        if is_postgres_url(session_db) or is_postgres_url(jobs_db)
        else None
    )
    artifacts = _absolute(str(config.artifacts.root), ctx.cwd)
    changes: list[Change] = []
    if not exists:
        changes.append(Change("create_config", path))
    elif tree != original:
        changes.append(Change("update_config", path))
    session_dir = _local_parent(session_db)
    jobs_dir = _local_parent(jobs_db) if config.server.jobs.enabled else None
    if session_dir is not None:
        changes += _directory_change(session_dir, "private_state_directory")
    if jobs_dir is not None and jobs_dir != session_dir:
        changes += _directory_change(jobs_dir, "private_job_state_directory")
    output_state = directory_state(artifacts)
    if output_state.symlink or (output_state.exists and not output_state.is_directory):
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "the artifact root must be a real directory (not a file or symbolic link)",
            details={"field": "artifacts.root"},
        )
    if not output_state.exists:
        changes.append(Change("create_output_directory", artifacts))
    schemas = asyncio.run(_schemas(session_db, jobs_db, config.server.jobs.enabled, postgres))
    if not schemas["session"].current:
        changes.append(Change("migrate_session_database", session_db))
    job_schemas = [schemas[name] for name in ("jobs", "presets") if name in schemas]
    if any(not schema.current for schema in job_schemas):
        changes.append(Change("migrate_job_database", jobs_db))
    version = codex_version(config.providers.codex_app_server.executable)
    return SetupPlan(
        config_path=path,
        config_exists=exists,
        tree=tree,
        state_root=session_dir or jobs_dir,
        output_root=artifacts,
        session_database=session_db,
        jobs_database=jobs_db,
        jobs_enabled=config.server.jobs.enabled,
        postgres=postgres,
        changes=changes,
        codex=version.to_dict(),
        codex_required=codex_needed(config),
        oauth_ready=oauth_error(ctx.env, config) is None,
        oauth_required=oauth_needed(config),
    )


def _in_postgres(tree: dict[str, Any], key: tuple[str, ...]) -> bool:
    """Whether the existing config keeps this database in PostgreSQL."""
    node: Any = tree
    for name in key:
        node = node.get(name) if isinstance(node, dict) else None
    return is_postgres_url(node)


def _directory_change(path: Path, what: str) -> list[Change]:
    state = directory_state(path)
    if state.symlink or (state.exists and not state.is_directory):
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "a state directory must be a real directory (not a file or symbolic link)",
            details={"path": str(path)},
        )
    if not state.exists:
        return [Change(f"create_{what}", path)]
    if not state.private:
        return [Change(f"repair_{what}", path)]
    return []


async def _schemas(
    session_db: Location,
    jobs_db: Location,
    jobs_enabled: bool,
    postgres: PostgresOptions | None,
) -> dict[str, Any]:
    """Read-only schema versions (SQLite files or PostgreSQL schemas; nothing is created)."""
    from imagebridge.storage import inspect_store_schema

    result: dict[str, Any] = {
        "session": await inspect_store_schema(session_db, "sessions", postgres=postgres)
    }
    if jobs_enabled:
        result["jobs"] = await inspect_store_schema(jobs_db, "jobs", postgres=postgres)
        result["presets"] = await inspect_store_schema(jobs_db, "presets", postgres=postgres)
    return result


def _state_root(plan: SetupPlan) -> str | None:
    return None if plan.state_root is None else str(plan.state_root)


def _plan_body(plan: SetupPlan) -> dict[str, Any]:
    return {
        "dry_run": True,
        "complete": False,
        "changed": False,
        "config_path": str(plan.config_path),
        "state_root": _state_root(plan),
        "output_root": str(plan.output_root),
        "codex": plan.codex,
        "oauth_ready": plan.oauth_ready,
        "planned_changes": [change.to_dict() for change in plan.changes],
    }


def _apply(plan: SetupPlan) -> None:
    from imagebridge.cli.atomic import write_atomic
    from imagebridge.config import to_toml

    for change in plan.changes:
        kind, path = change.kind, change.path
        if not isinstance(path, Path):
            continue  # a migration of a PostgreSQL schema (below)
        if kind.startswith("create_private"):
            path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
            os.chmod(path, PRIVATE_DIR_MODE)
        elif kind.startswith("repair_private"):
            os.chmod(path, PRIVATE_DIR_MODE)
        elif kind == "create_output_directory":
            path.mkdir(parents=True, exist_ok=True)
    asyncio.run(_migrate(plan))
    if any(change.kind in ("create_config", "update_config") for change in plan.changes):
        plan.config_path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        write_atomic(
            plan.config_path, to_toml(plan.tree).encode("utf-8"), mode=CONFIG_MODE, replace=True
        )


async def _migrate(plan: SetupPlan) -> None:
    """Open (and so migrate) each planned store through the factories, then close it."""
    from imagebridge.storage import open_job_store, open_preset_store, open_session_store

    kinds = {change.kind for change in plan.changes}
    postgres = plan.postgres
    if "migrate_session_database" in kinds:
        session = await open_session_store(
            plan.session_database, provider="codex-app-server", postgres=postgres
        )
        await session.close()
    if "migrate_job_database" in kinds:
        jobs = await open_job_store(plan.jobs_database, postgres=postgres)
        await jobs.close()
        presets = await open_preset_store(plan.jobs_database, postgres=postgres)
        await presets.close()


def setup_command(
    ctx: CliContext,
    *,
    state_root: str | None,
    output_root: str | None,
    yes: bool,
    non_interactive: bool,
    dry_run: bool,
    live_probe: bool,
) -> int:
    if ctx.options.sets or ctx.options.unsets:
        raise CliUsageError("setup writes its own configuration; --set/--unset cannot be used")
    plan = make_plan(ctx, state_root, output_root)
    output = ctx.output
    if dry_run:
        output.value(_plan_body(plan))
        return 0
    if plan.changes and not yes:
        if not can_prompt(ctx, non_interactive):
            output.value(_plan_body(plan))
            raise BridgeError(
                ErrorCode.INVALID_REQUEST,
                CONFIRMATION_REQUIRED,
                suggestions=["Review the plan above, then rerun with --yes."],
            )
        output.value(_plan_body(plan))
        if not confirm(ctx, "Apply this setup plan?"):
            output.status("setup cancelled; nothing was changed")
            return exit_code_for("cancelled")
    try:
        _apply(plan)
    except OSError as exc:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "setup could not apply its plan",
            details={"reason": exc.strerror or type(exc).__name__},
        ) from None
    return _finish(ctx, plan, yes=yes, non_interactive=non_interactive, live_probe=live_probe)


def _finish(
    ctx: CliContext, plan: SetupPlan, *, yes: bool, non_interactive: bool, live_probe: bool
) -> int:
    schemas = asyncio.run(
        _schemas(plan.session_database, plan.jobs_database, plan.jobs_enabled, plan.postgres)
    )
    codex_ok = plan.codex["available"] or not plan.codex_required
    oauth_ok = plan.oauth_ready or not plan.oauth_required
    probe: dict[str, Any] = {"status": "skipped"}
    if live_probe:
        probe = _live_probe(
            ctx, yes=yes, non_interactive=non_interactive, ready=codex_ok and oauth_ok
        )
    next_steps = []
    if not plan.codex["available"] and plan.codex_required:
        next_steps.append("Install the Codex CLI: npm install -g @openai/codex")
    if not plan.oauth_ready and plan.oauth_required:
        next_steps.append("Sign in: codex login")
    next_steps += ["imagegen-bridge doctor", 'imagegen-bridge generate "a red fox"']
    body = {
        "complete": codex_ok and oauth_ok,
        "changed": bool(plan.changes),
        "config_path": str(plan.config_path),
        "state_root": _state_root(plan),
        "output_root": str(plan.output_root),
        "codex": plan.codex,
        "oauth_ready": plan.oauth_ready,
        "database_schema": schemas["session"].to_dict(),
        "job_database_schema": schemas["jobs"].to_dict() if "jobs" in schemas else None,
        "applied_changes": [change.to_dict() for change in plan.changes],
        "live_probe": probe,
        "next_steps": next_steps,
    }
    ctx.output.value(body)
    if not codex_ok:
        ctx.output.error(
            BridgeError(ErrorCode.CONFIGURATION, "the codex CLI is not available").with_suggestion(
                "Install it with `npm install -g @openai/codex`, or set "
                "providers.codex_app_server.executable."
            )
        )
        return exit_code_for("configuration")
    if not oauth_ok:
        ctx.output.error(
            BridgeError(ErrorCode.AUTHENTICATION, "the Codex ChatGPT login is not ready")
        )
        return exit_code_for("authentication")
    if probe.get("status") == "failed":
        return 2
    return 0


def _live_probe(
    ctx: CliContext, *, yes: bool, non_interactive: bool, ready: bool
) -> dict[str, Any]:
    if not ready:
        return {"status": "skipped", "reason": "codex_not_ready"}
    if not yes:
        if not can_prompt(ctx, non_interactive):
            return {"status": "skipped", "reason": "confirmation_required"}
        if not confirm(ctx, "Run one paid Codex OAuth image generation now?"):
            return {"status": "skipped", "reason": "declined"}
    try:
        result = asyncio.run(run_live_probe(ctx.config(), None))
    except BridgeError as error:
        return {"status": "failed", "error": error.to_dict()}
    return {"status": "passed", **result}
