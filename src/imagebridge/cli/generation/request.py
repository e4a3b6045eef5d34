"""Turn the ``generate``/``edit`` command line into one validated ``ImageRequest``.

Order: a stored preset (if any) is the base; each flag that was given replaces only its own
field; the prompt comes from the positional argument, ``-p TEXT`` or ``-p -`` (stdin); local
files become ``file`` inputs. ``--request FILE`` instead takes a complete request verbatim
and is exclusive with every request-shaping flag. The result is validated against the
configured request limits exactly as the server would.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from imagebridge.cli.context import CliUsageError
from imagebridge.cli.failures import invalid
from imagebridge.cli.files import read_bounded, read_prompt_stream
from imagebridge.cli.generation.flags import GenerationFlags
from imagebridge.cli.generation.paths import output_target
from imagebridge.contract._base import decode_model
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.validation import RequestLimits, validate_request

__all__ = ["BuildSettings", "build_request", "check_sources"]

REQUEST_BODY_MESSAGE = "request body must be valid ImageRequest JSON"

# flag attribute → path of the field it sets in the request
_DIRECT: dict[str, tuple[str, ...]] = {
    "negative_prompt": ("negative_prompt",),
    "provider": ("routing", "provider"),
    "model": ("routing", "model"),
    "fallback_policy": ("routing", "fallback_policy"),
    "count": ("parameters", "n"),
    "size": ("parameters", "size"),
    "aspect_ratio": ("parameters", "aspect_ratio"),
    "resolution": ("parameters", "resolution"),
    "quality": ("parameters", "quality"),
    "output_format": ("parameters", "output_format"),
    "compression": ("parameters", "output_compression"),
    "background": ("parameters", "background"),
    "moderation": ("parameters", "moderation"),
    "partial_images": ("parameters", "partial_images"),
    "failure_policy": ("parameters", "failure_policy"),
    "input_fidelity": ("parameters", "input_fidelity"),
    "action": ("parameters", "action"),
    "transparency": ("output", "transparency", "mode"),
    "chroma_key": ("output", "transparency", "key_color"),
    "chroma_transparent_threshold": ("output", "transparency", "transparent_threshold"),
    "chroma_opaque_threshold": ("output", "transparency", "opaque_threshold"),
    "response_format": ("output", "response_format"),
    "filename_prefix": ("output", "filename_prefix"),
    "collision": ("output", "collision"),
    "metadata": ("output", "metadata"),
    "compatibility": ("policies", "compatibility"),
    "negative_prompt_mode": ("policies", "negative_prompt"),
    "revised_prompt": ("policies", "revised_prompt"),
    "batch_execution": ("policies", "batch_execution"),
    "idempotency_key": ("idempotency_key",),
    "timeout_ms": ("timeout_ms",),
    "user": ("user",),
}
_EXTENSION_FORMATS = {"png": "png", "jpg": "jpeg", "jpeg": "jpeg", "webp": "webp"}
_SIDECAR_MODES = {"sidecar", "sidecar_and_embedded"}


@dataclass(frozen=True, slots=True)
class BuildSettings:
    """What building a request needs from the configuration and the environment."""

    limits: RequestLimits
    artifact_root: Path
    max_body_bytes: int
    cwd: Path
    implicit_artifact: bool = False
    """Deliver artifacts unless told otherwise (human output, ``--local-artifact-paths``)."""
    stdin: BinaryIO | None = None


def check_sources(flags: GenerationFlags) -> None:
    """Command-line rules that need no configuration (all are exit-2 usage errors)."""
    sources = [
        name
        for name, value in (
            ("PROMPT", flags.prompt),
            ("--prompt", flags.prompt_option),
            ("--request", flags.request_file),
        )
        if value is not None
    ]
    if len(sources) > 1:
        raise CliUsageError(f"{' and '.join(sources)} cannot be used together")
    if flags.request_file is not None:
        conflicting = [
            flag for flag in flags.given_parameters() if flag not in ("PROMPT", "--prompt")
        ]
        if conflicting:
            raise CliUsageError(
                "--request is lossless and exclusive: it cannot be combined with "
                + ", ".join(conflicting)
            )
        return
    if flags.output is not None and flags.output_dir is not None:
        raise CliUsageError("--output cannot be used with --output-dir")
    if flags.operation == "edit" and not flags.images:
        raise CliUsageError("edit needs at least one source image: pass -i/--images FILE")
    if flags.operation == "generate" and (flags.images or flags.mask is not None):
        raise CliUsageError("generate takes no --images or --mask; use `edit`")


def _set(data: dict[str, Any], path: Sequence[str], value: Any) -> None:
    node = data
    for name in path[:-1]:
        child = node.get(name)
        if not isinstance(child, dict):
            child = {}
            node[name] = child
        node = child
    node[path[-1]] = value


def _get(data: dict[str, Any], path: Sequence[str], default: Any) -> Any:
    node: Any = data
    for name in path:
        if not isinstance(node, dict) or name not in node:
            return default
        node = node[name]
    return node


def _file_input(path: str, cwd: Path) -> dict[str, Any]:
    absolute = os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    return {"type": "file", "path": absolute, "filename": os.path.basename(absolute)}


def _fallback(value: str) -> dict[str, Any]:
    provider, _, model = value.partition(":")
    if not provider:
        raise CliUsageError(
            f"unsupported value `{value}` for --fallback (expected PROVIDER[:MODEL])"
        )
    route: dict[str, Any] = {"provider": provider}
    if model:
        route["model"] = model
    return route


def _read_request(flags: GenerationFlags, settings: BuildSettings) -> ImageRequest:
    assert flags.request_file is not None
    data = read_bounded(
        flags.request_file, settings.max_body_bytes, "request file", stdin=settings.stdin
    )
    request = decode_model(ImageRequest, data, REQUEST_BODY_MESSAGE)
    if request.operation.value != flags.operation:
        article = "an" if request.operation.value == "edit" else "a"
        raise invalid(
            f"the request file holds {article} {request.operation.value} request",
            f"Run `imagegen-bridge {request.operation.value} --request FILE`.",
            field="operation",
        )
    return request


def _prompt(flags: GenerationFlags, settings: BuildSettings) -> str | None:
    if flags.prompt is not None:
        return flags.prompt
    if flags.prompt_option == "-":
        import sys

        stream = settings.stdin if settings.stdin is not None else sys.stdin.buffer
        return read_prompt_stream(stream, settings.limits.max_prompt_bytes)
    return flags.prompt_option


def build_request(
    flags: GenerationFlags, settings: BuildSettings, preset: dict[str, Any] | None = None
) -> ImageRequest:
    """The validated request for ``flags`` (on top of ``preset``, a stored template)."""
    check_sources(flags)
    if flags.request_file is not None:
        request = _read_request(flags, settings)
        validate_request(request, settings.limits)
        return request

    data: dict[str, Any] = dict(preset) if preset is not None else {}
    stored_operation = data.pop("operation", "generate")
    if preset is not None and stored_operation != flags.operation:
        article = "an" if stored_operation == "edit" else "a"
        raise invalid(
            f"preset `{flags.preset}` is {article} {stored_operation} preset",
            f"Use it with `imagegen-bridge {stored_operation} --preset {flags.preset}`.",
            field="preset",
        )
    stored_prompt = data.pop("prompt", None)

    for attribute, path in _DIRECT.items():
        value = getattr(flags, attribute)
        if value is not None:
            _set(data, path, value)
    if flags.no_despill:
        _set(data, ("output", "transparency", "despill"), False)
    if flags.fallbacks:
        _set(data, ("routing", "fallbacks"), [_fallback(value) for value in flags.fallbacks])
    _apply_session(data, flags)
    _apply_output_paths(data, flags, settings)
    _apply_implicit_delivery(data, flags, settings)

    prompt = _prompt(flags, settings)
    if prompt is None:
        prompt = stored_prompt
    if prompt is None:
        raise CliUsageError(
            "a prompt is required: pass it as an argument, with -p TEXT, or -p - for stdin"
        )
    data["prompt"] = prompt
    data["operation"] = flags.operation
    if flags.operation == "edit":
        data["images"] = [_file_input(path, settings.cwd) for path in flags.images]
        if flags.mask is not None:
            data["mask"] = _file_input(flags.mask, settings.cwd)
    if flags.references:
        data["reference_images"] = [_file_input(path, settings.cwd) for path in flags.references]
    request = decode_model(ImageRequest, data, REQUEST_BODY_MESSAGE)
    validate_request(request, settings.limits)
    return request


def _apply_session(data: dict[str, Any], flags: GenerationFlags) -> None:
    if flags.session is not None:
        _set(data, ("session", "mode"), flags.session)
    if flags.session_key is not None:
        if flags.session is None:
            _set(data, ("session", "mode"), "persistent")
        _set(data, ("session", "key"), flags.session_key)
    if flags.thread_id is not None:
        if flags.session is None:
            _set(data, ("session", "mode"), "thread")
        _set(data, ("session", "thread_id"), flags.thread_id)


def _apply_output_paths(
    data: dict[str, Any], flags: GenerationFlags, settings: BuildSettings
) -> None:
    if flags.output is None and flags.output_dir is None:
        return
    target = output_target(flags.output, flags.output_dir, settings.artifact_root)
    if target.directory is not None:
        _set(data, ("output", "directory"), target.directory)
    if target.filename is not None:
        _set(data, ("output", "filename"), target.filename)
        extension = target.filename.rpartition(".")[2].lower() if "." in target.filename else ""
        if flags.output_format is None and extension in _EXTENSION_FORMATS:
            _set(data, ("parameters", "output_format"), _EXTENSION_FORMATS[extension])


def _apply_implicit_delivery(
    data: dict[str, Any], flags: GenerationFlags, settings: BuildSettings
) -> None:
    """Switch the ``b64_json`` default to ``artifact`` when the command saves or shows files.

    Never overrides an explicit ``--response-format`` (an incompatible one then fails
    validation) nor a stored non-default format.
    """
    if flags.response_format is not None:
        return
    if _get(data, ("output", "response_format"), "b64_json") != "b64_json":
        return
    metadata = _get(data, ("output", "metadata"), "none")
    wants_files = (
        flags.output is not None
        or flags.output_dir is not None
        or metadata in _SIDECAR_MODES
        or flags.preview
        or flags.open_viewer
        or settings.implicit_artifact
    )
    if wants_files:
        _set(data, ("output", "response_format"), "artifact")
