"""``background remove``: key out a flat background offline and save PNG or WebP.

No provider is called and no artifact is published: the input and output are ordinary
files wherever the user points (the original's behaviour). The input is bounded by
``artifacts.image.max_encoded_bytes``; an existing output is kept unless ``--force``.
"""

from __future__ import annotations

from pathlib import Path

from imagebridge.cli.context import CliContext
from imagebridge.cli.failures import invalid
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["remove_background_command"]

_FORMATS = {".png": "png", ".webp": "webp"}


def remove_background_command(
    ctx: CliContext,
    *,
    input_path: str,
    output: str,
    key: str,
    transparent_threshold: int,
    opaque_threshold: int,
    despill: bool,
    force: bool,
) -> int:
    from imagebridge.application import image_limits
    from imagebridge.cli.atomic import write_atomic
    from imagebridge.cli.files import read_bounded
    from imagebridge.imaging.chroma.images import remove_background

    target = Path(output)
    if not target.is_absolute():
        target = ctx.cwd / target
    output_format = _FORMATS.get(target.suffix.lower())
    if output_format is None:
        raise invalid(
            "output must end with .png or .webp",
            "Transparency needs PNG or WebP: use -o OUT.png or -o OUT.webp.",
            field="output",
        )
    if target.exists() and not force:
        raise BridgeError(
            ErrorCode.ARTIFACT,
            "output file already exists",
            details={"field": "output"},
            suggestions=["Pass --force to replace it, or choose another -o path."],
        )
    limits = image_limits(ctx.load().config)
    source = (
        input_path
        if Path(input_path).is_absolute() or input_path == "-"
        else str(ctx.cwd / input_path)
    )
    data = read_bounded(source, limits.max_encoded_bytes, "input image")
    result = remove_background(
        data,
        key=key,
        transparent_threshold=transparent_threshold,
        opaque_threshold=opaque_threshold,
        despill=despill,
        output_format=output_format,
        limits=limits,
    )
    try:
        write_atomic(target, result.data, replace=force)
    except FileExistsError:
        raise BridgeError(
            ErrorCode.ARTIFACT,
            "output file already exists",
            details={"field": "output"},
            suggestions=["Pass --force to replace it, or choose another -o path."],
        ) from None
    except OSError as exc:
        raise BridgeError(
            ErrorCode.ARTIFACT,
            "output file could not be written",
            details={"reason": exc.strerror or type(exc).__name__},
        ) from None
    body = {
        "output": str(target),
        "format": result.info.format.value,
        "width": result.info.width,
        "height": result.info.height,
        "bytes": result.info.bytes,
        "sha256": result.info.sha256,
        "key_color": result.key.hex,
        **{k: v for k, v in result.alpha.to_dict().items() if k != "total_pixels"},
    }
    ctx.output.value(body)
    return 0
