"""Bodies of ``providers``, ``session`` and ``preset``: in-process, or on ``--remote``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from imagebridge.cli.context import CliContext, CliUsageError
from imagebridge.cli.output import exit_code_for
from imagebridge.contract.errors import BridgeError

if TYPE_CHECKING:
    from imagebridge.application import Application
    from imagebridge.cli.remote import RemoteBridge
    from imagebridge.jobs.presets import PresetService

__all__ = [
    "preset_delete",
    "preset_get",
    "preset_list",
    "preset_write",
    "providers_capabilities",
    "providers_list",
    "providers_quota",
    "providers_readiness",
    "session_delete",
    "session_get",
]

T = TypeVar("T")
READINESS_TIMEOUT_S = 10.0


@asynccontextmanager
async def local_application(ctx: CliContext) -> AsyncIterator[Application]:
    """The engine for this command; providers are shut down afterwards."""
    from imagebridge.application import build_application

    app = build_application(ctx.config())
    try:
        yield app
    finally:
        try:
            await app.aclose()
        except BridgeError as error:
            ctx.output.status(f"warning: provider shutdown reported: {error.message}")


@asynccontextmanager
async def remote_bridge(ctx: CliContext, url: str) -> AsyncIterator[RemoteBridge]:
    from imagebridge.cli.remote import RemoteBridge

    async with RemoteBridge(url, token=ctx.bearer_token()) as bridge:
        yield bridge


def _run(
    ctx: CliContext,
    local: Callable[[Application], Awaitable[T]],
    remote: Callable[[RemoteBridge], Awaitable[T]],
) -> T:
    url = ctx.remote_url()

    async def main() -> T:
        if url is not None:
            async with remote_bridge(ctx, url) as bridge:
                return await remote(bridge)
        async with local_application(ctx) as app:
            return await local(app)

    return asyncio.run(main())


# -- providers --------------------------------------------------------------------------------


def providers_list(ctx: CliContext) -> int:
    async def local(app: Application) -> Any:
        return [d.to_wire() for d in app.runtime.registry.descriptors()]

    async def remote(bridge: RemoteBridge) -> Any:
        return await bridge.providers()

    ctx.output.value({"items": _run(ctx, local, remote)})
    return 0


def providers_capabilities(
    ctx: CliContext, provider: str | None, model: str | None, *, size_match: bool = False
) -> int:
    """The capability document; with ``size_match``, ``{capabilities, size_match}`` where
    ``size_match`` is the provider's measured rates (``{model: {tier: {calls, matched,
    rate}}}``): a remote bridge's own, or this process's (empty: nothing ran here)."""
    from imagebridge.cli.size_match import provider_rates

    async def local(app: Application) -> Any:
        caps = await app.runtime.registry.capabilities(provider, model)
        if not size_match:
            return caps.to_wire()
        rates = app.runtime.size_stats.snapshot().get(caps.provider, {})
        return {"capabilities": caps.to_wire(), "size_match": rates}

    async def remote(bridge: RemoteBridge) -> Any:
        name = provider or await _remote_default_provider(ctx)
        caps = await bridge.capabilities(name, model)
        if not size_match:
            return caps
        return {
            "capabilities": caps,
            "size_match": provider_rates(await bridge.diagnostics(), name),
        }

    ctx.output.value(_run(ctx, local, remote))
    return 0


async def _remote_default_provider(ctx: CliContext) -> str:
    """Remote bridges do not advertise their default; use the local config's."""
    return ctx.load().config.default_provider


def providers_readiness(ctx: CliContext) -> int:
    """Print ``[{provider, status, error?}]``; exit with the first not-ready error's code."""
    if ctx.remote_url() is not None:
        raise CliUsageError("providers readiness runs locally; use /health/ready on a bridge")

    async def probe() -> Any:
        async with local_application(ctx) as app:
            return await app.runtime.registry.readiness(READINESS_TIMEOUT_S)

    results = asyncio.run(probe())
    ctx.output.value([result.to_wire() for result in results])
    for result in results:
        if result.error is not None:
            return exit_code_for(result.error.code.value)
    return 0


def providers_quota(ctx: CliContext, provider: str | None, *, refresh: bool) -> int:
    """Print ``{items: [{provider, status, quota?, warning?, message?}]}``; exit 0.

    Every enabled provider (or ``--provider``) is listed; one that keeps no quota says so
    (``not_reported``) and one whose quota cannot be read is an ``unavailable`` entry with
    a ``warning``. On ``--remote`` the bridge's ``GET /v1/diagnostics/extended`` is read instead.
    """
    from imagebridge.cli.quota import read_quota, reading_from_detail

    if refresh and ctx.remote_url() is not None:
        raise CliUsageError(
            "providers quota --refresh reads the providers in this process; a remote bridge "
            "answers from its own cache (providers.codex_responses.quota_cache_ms)"
        )

    async def local(app: Application) -> Any:
        registry = app.runtime.registry
        names = registry.names if provider is None else [provider]
        providers = [registry.resolve(name) for name in names]
        readings = await asyncio.gather(*(read_quota(p, refresh=refresh) for p in providers))
        return [reading.to_dict() for reading in readings]

    async def remote(bridge: RemoteBridge) -> Any:
        body = await bridge.diagnostics()
        names = _diagnosed_providers(body)
        if provider is not None:
            if provider not in names:
                raise _not_registered(provider)
            names = [provider]
        detail = body.get("providers_detail")
        details = detail if isinstance(detail, dict) else {}
        return [reading_from_detail(name, details.get(name)).to_dict() for name in names]

    ctx.output.value({"items": _run(ctx, local, remote)})
    return 0


def _diagnosed_providers(body: dict[str, Any]) -> list[str]:
    """The provider names a bridge's diagnostics list (its enabled providers), sorted."""
    from imagebridge.config._net import is_provider_name
    from imagebridge.contract.errors import ErrorCode

    entries = body.get("providers")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise BridgeError(ErrorCode.PROTOCOL, "the bridge sent malformed diagnostics")
    names = {entry.get("provider") for entry in entries}
    return sorted(name for name in names if isinstance(name, str) and is_provider_name(name))


def _not_registered(name: str) -> BridgeError:
    from imagebridge.contract.errors import ErrorCode

    return BridgeError(
        ErrorCode.CONFIGURATION,
        "requested provider is not registered",
        details={"provider": name},
        suggestions=["List the providers with `imagegen-bridge providers list`."],
    )


# -- sessions ---------------------------------------------------------------------------------


def session_get(ctx: CliContext, key: str, provider: str | None) -> int:
    async def local(app: Application) -> Any:
        session = await app.runtime.registry.resolve(provider).get_session(key)
        return session.to_wire()

    async def remote(bridge: RemoteBridge) -> Any:
        return await bridge.get_session(key, provider)

    ctx.output.value(_run(ctx, local, remote))
    return 0


def session_delete(
    ctx: CliContext, key: str, provider: str | None, *, dry_run: bool, force: bool
) -> int:
    if dry_run == force:
        raise CliUsageError(
            "session delete needs exactly one of --dry-run (preview) or --force (delete)"
        )
    if dry_run:
        name = provider
        if name is None and ctx.remote_url() is None:
            name = ctx.config().default_provider
        ctx.output.value(
            {"action": "delete_session", "dry_run": True, "key": key, "provider": name}
        )
        return 0

    async def local(app: Application) -> None:
        await app.runtime.registry.resolve(provider).delete_session(key)

    async def remote(bridge: RemoteBridge) -> None:
        await bridge.delete_session(key, provider)

    _run(ctx, local, remote)
    ctx.output.value({"deleted": True, "key": key})
    return 0


# -- presets ----------------------------------------------------------------------------------


def _run_presets(
    ctx: CliContext,
    local: Callable[[PresetService], Awaitable[T]],
    remote: Callable[[RemoteBridge], Awaitable[T]],
    *,
    create: bool = True,
    missing: Callable[[], T] | None = None,
) -> T:
    from imagebridge.cli.presets import local_presets

    url = ctx.remote_url()

    async def main() -> T:
        if url is not None:
            async with remote_bridge(ctx, url) as bridge:
                return await remote(bridge)
        async with local_presets(ctx.config(), create=create, env=ctx.env) as service:
            if service is None:
                assert missing is not None
                return missing()
            return await local(service)

    return asyncio.run(main())


def preset_list(ctx: CliContext, limit: int, cursor: str | None) -> int:
    async def local(service: PresetService) -> Any:
        return (await service.list(limit=limit, cursor=cursor)).to_wire()

    async def remote(bridge: RemoteBridge) -> Any:
        return await bridge.list_presets(limit=limit, cursor=cursor)

    ctx.output.value(_run_presets(ctx, local, remote, create=False, missing=lambda: {"items": []}))
    return 0


def _missing(name: str) -> Callable[[], Any]:
    from imagebridge.cli.presets import preset_not_found

    def missing() -> Any:
        raise preset_not_found(name)

    return missing


def preset_get(ctx: CliContext, name: str) -> int:
    async def local(service: PresetService) -> Any:
        return (await service.get(name)).to_wire()

    async def remote(bridge: RemoteBridge) -> Any:
        return await bridge.get_preset(name)

    ctx.output.value(_run_presets(ctx, local, remote, create=False, missing=_missing(name)))
    return 0


def preset_write(
    ctx: CliContext, name: str, source: str, description: str | None, *, create: bool
) -> int:
    from imagebridge.cli.files import read_bounded
    from imagebridge.cli.presets import parse_template_source
    from imagebridge.contract.presets import ImagePresetCreate, ImagePresetWrite

    config = ctx.config()
    path = source if source == "-" or source.startswith("/") else str(ctx.cwd / source)
    template = parse_template_source(
        read_bounded(path, config.server.max_body_bytes, "preset template")
    )

    async def local(service: PresetService) -> Any:
        if create:
            body = ImagePresetCreate(name=name, description=description, template=template)
            return (await service.create(body)).to_wire()
        write = ImagePresetWrite(description=description, template=template)
        return (await service.replace(name, write)).to_wire()

    async def remote(bridge: RemoteBridge) -> Any:
        body: dict[str, Any] = {"template": template.to_wire()}
        if description is not None:
            body["description"] = description
        if create:
            return await bridge.create_preset({"name": name, **body})
        return await bridge.replace_preset(name, body)

    ctx.output.value(_run_presets(ctx, local, remote))
    return 0


def preset_delete(ctx: CliContext, name: str, *, dry_run: bool, force: bool) -> int:
    if dry_run == force:
        raise CliUsageError("preset delete needs exactly one of --dry-run or --force")
    if dry_run:

        async def check_local(service: PresetService) -> Any:
            await service.get(name)

        async def check_remote(bridge: RemoteBridge) -> Any:
            await bridge.get_preset(name)

        _run_presets(ctx, check_local, check_remote, create=False, missing=_missing(name))
        ctx.output.value({"action": "delete_preset", "dry_run": True, "name": name})
        return 0

    async def local(service: PresetService) -> None:
        await service.delete(name)

    async def remote(bridge: RemoteBridge) -> None:
        await bridge.delete_preset(name)

    _run_presets(ctx, local, remote, create=False, missing=_missing(name))
    ctx.output.value({"deleted": True, "name": name})
    return 0
