"""``generate`` / ``edit`` from parsed flags to printed result (the command bodies)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

from imagebridge.cli.context import CliContext, CliUsageError
from imagebridge.cli.failures import invalid
from imagebridge.cli.generation.flags import GenerationFlags
from imagebridge.cli.output import OutputMode
from imagebridge.contract.enums import ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest

__all__ = ["run_generation"]


def _check_modes(ctx: CliContext, flags: GenerationFlags) -> None:
    output = ctx.output
    if flags.preview and output.machine:
        raise CliUsageError("--preview cannot be combined with machine output (--json/--plain)")
    if ctx.options.local_artifact_paths:
        if flags.dry_run:
            raise CliUsageError(
                "--local-artifact-paths requires a non-dry-run generate or edit command"
            )
        if ctx.remote_url() is not None:
            raise CliUsageError(
                "--local-artifact-paths needs local artifacts and cannot be used with --remote"
            )


async def _load_preset(ctx: CliContext, name: str) -> dict[str, Any]:
    from imagebridge.cli import presets

    remote = ctx.remote_url()
    if remote is not None:
        from imagebridge.cli.remote import RemoteBridge

        async with RemoteBridge(remote, token=ctx.bearer_token()) as bridge:
            body = await bridge.get_preset(name)
        template = body.get("template") if isinstance(body, dict) else None
        if not isinstance(template, dict):
            raise BridgeError(ErrorCode.PROTOCOL, "the bridge sent a malformed preset")
        return template
    async with presets.local_presets(ctx.config(), create=False, env=ctx.env) as service:
        if service is None:
            raise presets.preset_not_found(name)
        preset = await service.get(name)
    return preset.template.model_dump(mode="json")


def _refuse_inline_on_terminal(ctx: CliContext, request: ImageRequest) -> None:
    output = ctx.output
    if (
        output.mode is OutputMode.JSON
        and request.output.response_format is ResponseFormat.B64_JSON
        and not ctx.options.allow_inline
        and output.stdout_is_tty()
    ):
        raise invalid(
            "refusing to print base64 image data to a terminal",
            "Redirect stdout, save files with --output-dir DIR, or pass --allow-inline.",
            field="output.response_format",
        )


def _check_delivery(ctx: CliContext, flags: GenerationFlags, request: ImageRequest) -> None:
    fmt = request.output.response_format
    if ctx.options.local_artifact_paths and fmt is not ResponseFormat.ARTIFACT:
        raise invalid(
            "--local-artifact-paths needs artifact delivery",
            "Drop --response-format or use --response-format artifact.",
            field="output.response_format",
        )
    if flags.open_viewer and fmt not in (ResponseFormat.ARTIFACT, ResponseFormat.URL):
        raise invalid(
            "--open needs artifact or url delivery",
            "Drop --response-format or use artifact or url.",
            field="output.response_format",
        )


def run_generation(ctx: CliContext, flags: GenerationFlags) -> int:
    """Build, optionally dry-run, execute and report one generation or edit."""
    from imagebridge.application import request_limits
    from imagebridge.cli.generation.paths import artifact_root
    from imagebridge.cli.generation.request import BuildSettings, build_request, check_sources

    _check_modes(ctx, flags)
    check_sources(flags)
    config = ctx.config()
    preset = asyncio.run(_load_preset(ctx, flags.preset)) if flags.preset is not None else None
    settings = BuildSettings(
        limits=request_limits(config),
        artifact_root=artifact_root(config.artifacts.root, ctx.cwd),
        max_body_bytes=config.server.max_body_bytes,
        cwd=ctx.cwd,
        implicit_artifact=ctx.output.mode is OutputMode.HUMAN or ctx.options.local_artifact_paths,
    )
    request = build_request(flags, settings, preset)
    if flags.dry_run:
        ctx.output.value(request.to_wire())
        return 0
    _check_delivery(ctx, flags, request)
    _refuse_inline_on_terminal(ctx, request)
    return _execute_and_report(ctx, flags, request, settings.artifact_root)


def _execute_and_report(
    ctx: CliContext, flags: GenerationFlags, request: ImageRequest, root: Path
) -> int:
    from imagebridge.cli.generation.progress import make_reporter
    from imagebridge.cli.generation.render import local_artifact_files, render_response
    from imagebridge.cli.generation.run import (
        execute_in_process,
        execute_remote,
        run_cancellable,
    )

    config = ctx.config()
    remote = ctx.remote_url()
    provider = request.routing.provider or (config.default_provider if remote is None else None)
    label = f"{request.operation.value} · {request.parameters.n} image(s)"
    label += f" · {provider}" if provider else " · remote bridge"
    reporter = make_reporter(ctx.output, label, request.parameters.n)

    async def work() -> Any:
        if remote is not None:
            bearer = ctx.bearer_token()
            return await run_cancellable(
                lambda token: execute_remote(request, config, remote, bearer, token, reporter),
                reporter,
            )
        return await run_cancellable(
            lambda token: execute_in_process(request, config, token, reporter), reporter
        )

    reporter.start()
    try:
        execution = asyncio.run(work())
    finally:
        reporter.stop()
    response = execution.response
    local_root = execution.store.root if execution.store is not None else None
    local_files = None
    if ctx.options.local_artifact_paths and local_root is not None:
        local_files = local_artifact_files(
            response, local_root, config.artifacts.image.max_encoded_bytes
        )
    render_response(ctx.output, response, root=local_root, local_files=local_files)
    if flags.preview:
        _preview(ctx, response, local_root)
    if flags.open_viewer:
        _open(ctx, response, local_root, remote, config.artifacts.image.max_encoded_bytes)
    return 0


def _preview(ctx: CliContext, response: Any, root: Path | None) -> None:
    from imagebridge.cli.generation.preview import (
        detect_protocol,
        iterm2_sequence,
        kitty_sequence,
    )

    output = ctx.output
    protocol = detect_protocol(ctx.env, output.stdout_is_tty())
    if protocol is None:
        reason = "stdout is not a terminal" if not output.stdout_is_tty() else "this terminal"
        output.status(f"preview skipped: {reason} does not show inline images (kitty, iTerm2)")
        return
    for image in response.data:
        data = _image_bytes(image, root)
        if data is None:
            output.status(f"preview skipped for image {image.index}: no local image bytes")
            continue
        name = image.name or f"image-{image.index}.{image.format.extension}"
        sequence = kitty_sequence(data) if protocol == "kitty" else iterm2_sequence(data, name)
        output.raw(sequence)


def _image_bytes(image: Any, root: Path | None) -> bytes | None:
    if image.type == "b64_json" and image.b64_json is not None:
        return base64.b64decode(image.b64_json)
    if image.type == "artifact" and image.name is not None and root is not None:
        from imagebridge.cli.generation.render import verify_artifact_file

        path = verify_artifact_file(root, image.name, image.sha256, image.bytes)
        return path.read_bytes()
    return None


def _open(
    ctx: CliContext, response: Any, root: Path | None, remote: str | None, max_bytes: int
) -> None:
    from imagebridge.cli.generation.preview import open_in_viewer
    from imagebridge.cli.generation.render import verify_artifact_file

    targets: list[str] = []
    for image in response.data:
        if image.type == "url" and image.url:
            targets.append(image.url)
        elif image.type == "artifact" and image.name is not None:
            if root is not None:
                targets.append(str(verify_artifact_file(root, image.name, image.sha256, max_bytes)))
            elif remote is not None and image.id is not None:
                targets.append(f"{remote.rstrip('/')}/v1/artifacts/{image.id}")
    open_in_viewer(targets)
