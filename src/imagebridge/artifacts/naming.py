"""Portable artifact names: prefix sanitiser, safe relative paths, exact filenames.

Artifact names travel to clients (``artifact.name``, URLs, sidecar references), so they
are restricted to ``[A-Za-z0-9._-]`` components joined by ``/`` that never start with a
dot: the same name is valid on every OS and can never reach outside the store root.
"""

from __future__ import annotations

import re

from imagebridge.contract.enums import OutputFormat

__all__ = [
    "MAX_COMPONENT_BYTES",
    "MAX_RELATIVE_NAME_BYTES",
    "is_safe_filename",
    "is_safe_relative",
    "sanitize_prefix",
    "suffixed_filename",
    "with_extension",
]

MAX_RELATIVE_NAME_BYTES = 512
MAX_COMPONENT_BYTES = 160
_PREFIX_LIMIT = 64
_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9._-]+")
# Unicode White_Space, as the original's sanitiser uses: Python's ``isspace`` also
# counts the ASCII separators U+001C..U+001F, which are not whitespace there.
_NOT_WHITESPACE = frozenset("\x1c\x1d\x1e\x1f")
_EXTENSIONS = {
    OutputFormat.PNG: ("png",),
    OutputFormat.JPEG: ("jpg", "jpeg"),
    OutputFormat.WEBP: ("webp",),
}


def sanitize_prefix(value: str) -> str:
    """Lower-case ASCII letters/digits, ``-`` and ``_``; whitespace becomes ``-``.

    Other characters are dropped, the result is cut to 64 characters, then ``-`` is
    trimmed from both ends; an empty result is ``image``. ``"source.png"`` →
    ``"sourcepng"``, ``"My portrait"`` → ``"my-portrait"``.
    """
    kept: list[str] = []
    for character in value:
        if len(kept) == _PREFIX_LIMIT:
            break
        if character.isascii() and (character.isalnum() or character in "-_"):
            kept.append(character.lower())
        elif character.isspace() and character not in _NOT_WHITESPACE:
            kept.append("-")
    sanitized = "".join(kept).strip("-")
    return sanitized or "image"


def _safe_component(component: str) -> bool:
    return (
        bool(component)
        and component not in (".", "..")
        and not component.startswith(".")
        and len(component.encode()) <= MAX_COMPONENT_BYTES
        and _SAFE_COMPONENT.fullmatch(component) is not None
    )


def is_safe_relative(value: str) -> bool:
    """A ``/``-separated portable path below the root (directory or artifact name)."""
    return (
        bool(value)
        and len(value.encode()) <= MAX_RELATIVE_NAME_BYTES
        and all(_safe_component(component) for component in value.split("/"))
    )


def is_safe_filename(value: str, image_format: OutputFormat) -> bool:
    """One safe component whose extension, if any, matches ``image_format``."""
    if not _safe_component(value):
        return False
    if "." not in value:
        return True
    extension = value.rsplit(".", 1)[1].lower()
    return extension in _EXTENSIONS[image_format]


def with_extension(filename: str, image_format: OutputFormat) -> str:
    """``filename`` with the format's extension appended when it has none."""
    return filename if "." in filename else f"{filename}.{image_format.extension}"


def suffixed_filename(filename: str, attempt: int) -> str:
    """``portrait.png`` → ``portrait-2.png`` for ``attempt`` 2."""
    stem, dot, extension = filename.rpartition(".")
    if not dot:
        return f"{filename}-{attempt}"
    return f"{stem}-{attempt}.{extension}"
