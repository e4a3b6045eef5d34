"""``generate``, ``edit`` and ``background remove``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from imagebridge.cli.choices import choice, metavar, ranged
from imagebridge.cli.commands._params import argument, cli_context, option, with_parameters

__all__ = ["register"]

InputArg = Annotated[str, typer.Argument(metavar="INPUT", help="Image to process.")]
OutputOpt = Annotated[
    str, typer.Option("-o", "--output", metavar="OUT", help="Output file (.png or .webp).")
]
KeyOpt = Annotated[
    str, typer.Option("--key", metavar="auto|#RRGGBB", help="Key colour (default: from border).")
]
TransparentOpt = Annotated[
    int, typer.Option("--transparent-threshold", parser=ranged(0, 254), metavar="0..254")
]
OpaqueOpt = Annotated[
    int, typer.Option("--opaque-threshold", parser=ranged(1, 255), metavar="1..255")
]
NoDespillOpt = Annotated[bool, typer.Option("--no-despill", help="Keep key-colour spill.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace an existing output.")]

_ROUTE = "Routing"
_IMAGE = "Image"
_TRANSPARENCY = "Transparency"
_FILES = "Files and delivery"
_POLICY = "Policies and sessions"
_RUN = "Command"


def _size(value: str) -> str:
    from imagebridge.cli._clicklib import BadParameter

    width, sep, height = value.partition("x")
    if value == "auto" or (sep and width.isdigit() and height.isdigit()):
        return value
    raise BadParameter(f"unsupported value `{value}` (expected auto or WxH)")


def _ratio(value: str) -> str:
    from imagebridge.cli._clicklib import BadParameter

    width, sep, height = value.partition(":")
    if sep and width.isdigit() and height.isdigit():
        return value
    raise BadParameter(f"unsupported value `{value}` (expected W:H)")


def _enum(name: str, flag: str, kind: str, help_text: str, panel: str) -> Any:
    return option(
        name, str | None, flag, help=help_text, panel=panel, parser=choice(kind),
        metavar=metavar(kind),
    )  # fmt: skip


def _shared_parameters(operation: str) -> list[Any]:
    files_help = "Image to edit (repeatable)."
    parameters = [
        argument("prompt", str | None, metavar="PROMPT", help="What to draw."),
        option("prompt_option", str | None, "-p", "--prompt", panel=_RUN, metavar="TEXT",
               help="The prompt as an option; `-` reads it from stdin."),
        option("request_file", str | None, "--request", panel=_RUN, metavar="FILE",
               help="A complete ImageRequest JSON (`-` for stdin); exclusive with other flags."),
        option("preset", str | None, "--preset", panel=_RUN, metavar="NAME",
               help="Start from a stored preset; flags override its fields."),
    ]  # fmt: skip
    if operation == "edit":
        parameters += [
            option("images", list[str] | None, "-i", "--images", "--image", panel=_FILES,
                   metavar="FILE", help=files_help),
            option("mask", str | None, "--mask", panel=_FILES, metavar="FILE",
                   help="Mask image for the edit."),
        ]  # fmt: skip
    parameters += [
        option("references", list[str] | None, "--reference", panel=_FILES, metavar="FILE",
               help="Reference image (repeatable)."),
        option("negative_prompt", str | None, "--negative-prompt", panel=_IMAGE,
               metavar="TEXT", help="What to avoid."),
        option("provider", str | None, "--provider", panel=_ROUTE, metavar="NAME",
               help="Provider to use (default: the configured default provider)."),
        option("model", str | None, "--model", panel=_ROUTE, metavar="MODEL"),
        option("fallbacks", list[str] | None, "--fallback", panel=_ROUTE,
               metavar="PROVIDER[:MODEL]", help="Fallback route (repeatable, in order)."),
        _enum("fallback_policy", "--fallback-policy", "fallback_policy",
              "When to fall back (default on_unavailable).", _ROUTE),
        option("count", int | None, "-n", "--count", panel=_IMAGE, parser=ranged(1, 255),
               metavar="1..255", help="Number of images (default 1)."),
        option("size", str | None, "--size", panel=_IMAGE, parser=_size, metavar="auto|WxH",
               help="Image size (default auto)."),
        option("aspect_ratio", str | None, "--aspect-ratio", panel=_IMAGE, parser=_ratio,
               metavar="W:H"),
        _enum("resolution", "--resolution", "resolution", "Resolution class.", _IMAGE),
        _enum("quality", "--quality", "quality", "Quality (default auto).", _IMAGE),
        _enum("output_format", "--format", "format", "Image format (default png).", _IMAGE),
        option("compression", int | None, "--compression", panel=_IMAGE,
               parser=ranged(0, 100), metavar="0..100", help="JPEG/WebP compression."),
        _enum("background", "--background", "background", "Background (default auto).", _IMAGE),
        _enum("moderation", "--moderation", "moderation", "Moderation (default auto).", _IMAGE),
        option("partial_images", int | None, "--partial-images", panel=_IMAGE,
               parser=ranged(0, 3), metavar="0..3", help="Partial previews to stream."),
        _enum("input_fidelity", "--input-fidelity", "input_fidelity",
              "Fidelity to input images.", _IMAGE),
        _enum("action", "--action", "action", "Generate or edit (default auto).", _IMAGE),
        _enum("transparency", "--transparency", "transparency",
              "How to make a transparent background (default auto).", _TRANSPARENCY),
        option("chroma_key", str | None, "--chroma-key", panel=_TRANSPARENCY,
               metavar="#RRGGBB", help="Key colour for chroma-key transparency."),
        option("chroma_transparent_threshold", int | None, "--chroma-transparent-threshold",
               panel=_TRANSPARENCY, parser=ranged(0, 254), metavar="0..254",
               help="Distance below which pixels become transparent (default 12)."),
        option("chroma_opaque_threshold", int | None, "--chroma-opaque-threshold",
               panel=_TRANSPARENCY, parser=ranged(1, 255), metavar="1..255",
               help="Distance above which pixels stay opaque (default 96)."),
        option("no_despill", bool, "--no-despill", default=False, panel=_TRANSPARENCY,
               help="Keep key-colour spill on edges."),
        _enum("response_format", "--response-format", "response_format",
              "How images are delivered (default: artifact for human output, b64_json with "
              "--json/--plain).", _FILES),
        option("output", str | None, "-o", "--output", panel=_FILES, metavar="FILE",
               help="Save as FILE below artifacts.root (implies artifact delivery)."),
        option("output_dir", str | None, "--output-dir", panel=_FILES, metavar="DIR",
               help="Save below DIR in artifacts.root (implies artifact delivery)."),
        option("filename_prefix", str | None, "--filename-prefix", panel=_FILES,
               metavar="PREFIX", help="Prefix of generated file names (default image)."),
        _enum("collision", "--collision", "collision",
              "An existing -o FILE: error or add -2, -3 … (default error).", _FILES),
        _enum("metadata", "--metadata", "metadata",
              "Write generation metadata (default none).", _FILES),
        _enum("failure_policy", "--failure-policy", "failure_policy",
              "With several images: stop at the first failure or keep the rest.", _POLICY),
        _enum("batch_execution", "--batch-execution", "batch_execution",
              "Run several images one by one or in parallel (default auto).", _POLICY),
        _enum("compatibility", "--compatibility", "compatibility",
              "What to do with unsupported parameters (default strict).", _POLICY),
        _enum("negative_prompt_mode", "--negative-prompt-mode", "negative_prompt_mode",
              "How a negative prompt is applied (default auto).", _POLICY),
        _enum("revised_prompt", "--revised-prompt", "revised_prompt",
              "Revised prompt handling (default include).", _POLICY),
        _enum("session", "--session", "session", "Session mode (default isolated).", _POLICY),
        option("session_key", str | None, "--session-key", panel=_POLICY, metavar="KEY",
               help="Persistent session key (implies --session persistent)."),
        option("thread_id", str | None, "--thread-id", panel=_POLICY, metavar="ID",
               help="Provider thread (implies --session thread)."),
        option("idempotency_key", str | None, "--idempotency-key", panel=_POLICY,
               metavar="KEY"),
        option("timeout_ms", int | None, "--timeout-ms", panel=_POLICY, parser=ranged(1),
               metavar="MS", help="Deadline for the whole request."),
        option("user", str | None, "--user", panel=_POLICY, metavar="ID",
               help="End-user attribution (not supported by the Codex transports)."),
        option("dry_run", bool, "--dry-run", default=False, panel=_RUN,
               help="Validate and print the normalized request; nothing runs."),
        option("preview", bool, "--preview", default=False, panel=_RUN,
               help="Show the images in the terminal (kitty, iTerm2, WezTerm, Ghostty)."),
        option("open_viewer", bool, "--open", default=False, panel=_RUN,
               help="Open the saved images in the system viewer."),
    ]  # fmt: skip
    return parameters


def _generation_command(operation: str) -> Any:
    @with_parameters(_shared_parameters(operation))
    def command(ctx: typer.Context, **values: Any) -> int:
        from imagebridge.cli.generation.command import run_generation
        from imagebridge.cli.generation.flags import GenerationFlags

        for name in ("images", "references", "fallbacks"):
            values[name] = list(values.get(name) or [])
        flags = GenerationFlags(operation=operation, **values)
        return run_generation(cli_context(ctx), flags)

    command.__name__ = operation
    command.__doc__ = (
        "Generate images from a prompt."
        if operation == "generate"
        else "Edit images (-i/--images FILE) following a prompt."
    )
    return command


def register(app: typer.Typer) -> None:
    app.command("generate")(_generation_command("generate"))
    app.command("edit")(_generation_command("edit"))
    background = typer.Typer(help="Offline image tools (no provider call).", no_args_is_help=True)

    @background.command("remove")
    def remove(
        ctx: typer.Context,
        input_path: InputArg,
        output: OutputOpt,
        key: KeyOpt = "auto",
        transparent_threshold: TransparentOpt = 12,
        opaque_threshold: OpaqueOpt = 96,
        no_despill: NoDespillOpt = False,
        force: ForceOpt = False,
    ) -> int:
        """Make a flat background transparent (chroma key) and save PNG or WebP."""
        from imagebridge.cli.background import remove_background_command

        return remove_background_command(
            cli_context(ctx),
            input_path=input_path,
            output=output,
            key=key,
            transparent_threshold=transparent_threshold,
            opaque_threshold=opaque_threshold,
            despill=not no_despill,
            force=force,
        )

    app.add_typer(background, name="background")
