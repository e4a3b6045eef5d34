"""``-o FILE`` and ``--output-dir DIR`` → the request's ``output.directory``/``filename``.

Artifacts are only ever written below ``artifacts.root``: a relative path is taken
relative to the root, an absolute one must lexically lie below it, and ``..`` may not
climb out of it. The store then enforces its own portable-name rules.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path

from imagebridge.cli.failures import invalid
from imagebridge.contract.errors import BridgeError

__all__ = ["OutputTarget", "artifact_root", "output_target"]

_OUTSIDE = "output path must remain below the configured artifact root"


@dataclass(frozen=True, slots=True)
class OutputTarget:
    directory: str | None
    filename: str | None


def artifact_root(root: Path, cwd: Path) -> Path:
    """The configured root as an absolute, lexically normalised path."""
    absolute = root if root.is_absolute() else cwd / root
    return Path(os.path.normpath(absolute))


def _outside(flag: str, root: Path) -> BridgeError:
    return invalid(
        _OUTSIDE,
        "Use a path relative to the artifact root (see `imagegen-bridge config show`).",
        field=flag,
        artifact_root=str(root),
    )


def _relative_below(value: str, flag: str, root: Path) -> str:
    """``value`` as a ``/``-separated path relative to ``root`` (``"."`` for the root)."""
    if not value:
        raise invalid("output path must not be empty", "Pass a file or directory name.", field=flag)
    candidate = Path(value)
    if candidate.is_absolute():
        normalized = Path(os.path.normpath(candidate))
        for base in (root, Path(os.path.realpath(root))):
            try:
                relative = normalized.relative_to(base)
            except ValueError:
                continue
            return relative.as_posix() or "."
        raise _outside(flag, root)
    relative_text = posixpath.normpath(candidate.as_posix())
    if relative_text == ".." or relative_text.startswith(("../", "/")):
        raise _outside(flag, root)
    return relative_text


def output_target(output: str | None, output_dir: str | None, root: Path) -> OutputTarget:
    """Map the output flags below ``root`` (already absolute)."""
    if output is not None:
        relative = _relative_below(output, "output", root)
        if relative == ".":
            raise invalid(
                "output path must name a file below the artifact root",
                "Use --output-dir DIR to choose only the directory.",
                field="output",
            )
        directory, _, filename = relative.rpartition("/")
        return OutputTarget(directory or None, filename)
    if output_dir is not None:
        relative = _relative_below(output_dir, "output_dir", root)
        return OutputTarget(None if relative == "." else relative, None)
    return OutputTarget(None, None)
