"""``--preview`` (inline terminal images) and ``--open`` (the system viewer).

Detection follows the original: the kitty graphics protocol when ``TERM`` contains
``kitty`` or ``ghostty`` or ``KITTY_WINDOW_ID`` is set; the iTerm2 inline-image protocol
when ``TERM_PROGRAM`` or ``LC_TERMINAL`` contains ``iterm`` or ``wezterm``. Anything else,
or a stdout that is not a terminal, gets a status message instead of a failure.
"""

from __future__ import annotations

import base64
import io
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Literal

from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = [
    "Protocol",
    "detect_protocol",
    "iterm2_sequence",
    "kitty_sequence",
    "open_in_viewer",
    "viewer_command",
]

Protocol = Literal["kitty", "iterm2"]
_KITTY_CHUNK = 4096
VIEWER_WAIT_S = 10.0


def detect_protocol(env: Mapping[str, str], stdout_is_tty: bool) -> Protocol | None:
    """The inline-image protocol this terminal speaks, if any."""
    if not stdout_is_tty:
        return None
    term = env.get("TERM", "").lower()
    if "kitty" in term or "ghostty" in term or env.get("KITTY_WINDOW_ID"):
        return "kitty"
    for name in ("TERM_PROGRAM", "LC_TERMINAL"):
        value = env.get(name, "").lower()
        if "iterm" in value or "wezterm" in value:
            return "iterm2"
    return None


def _as_png(data: bytes) -> bytes:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return data
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
    return buffer.getvalue()


def kitty_sequence(data: bytes) -> str:
    """Kitty graphics escape sequences that display ``data`` (converted to PNG if needed)."""
    encoded = base64.b64encode(_as_png(data)).decode("ascii")
    chunks = [encoded[i : i + _KITTY_CHUNK] for i in range(0, len(encoded), _KITTY_CHUNK)] or [""]
    parts: list[str] = []
    for position, chunk in enumerate(chunks):
        more = 1 if position < len(chunks) - 1 else 0
        control = f"f=100,a=T,m={more}" if position == 0 else f"m={more}"
        parts.append(f"\x1b_G{control};{chunk}\x1b\\")
    return "".join(parts) + "\n"


def iterm2_sequence(data: bytes, name: str) -> str:
    """The iTerm2 (also WezTerm) inline-image escape sequence for ``data``."""
    encoded_name = base64.b64encode(name.encode("utf-8")).decode("ascii")
    encoded = base64.b64encode(data).decode("ascii")
    return (
        f"\x1b]1337;File=name={encoded_name};size={len(data)};inline=1;"
        f"preserveAspectRatio=1:{encoded}\x07\n"
    )


def viewer_command(target: str, platform: str | None = None) -> list[str]:
    """The command that opens ``target`` (a path or URL) in the desktop's default viewer."""
    platform = platform or sys.platform
    if platform == "darwin":
        return ["open", target]
    if platform.startswith("win"):
        return ["cmd", "/C", "start", "", target]
    return ["xdg-open", target]


def open_in_viewer(targets: Sequence[str], *, platform: str | None = None) -> None:
    """Launch the viewer for each target; failing to launch is an ``artifact`` error."""
    for target in targets:
        command = viewer_command(target, platform)
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise BridgeError(
                ErrorCode.ARTIFACT,
                "could not launch an image viewer",
                details={"viewer": command[0], "reason": exc.strerror or type(exc).__name__},
            ) from None
        try:
            status = process.wait(timeout=VIEWER_WAIT_S)
        except subprocess.TimeoutExpired:
            continue  # still running: it launched
        if status != 0:
            raise BridgeError(
                ErrorCode.ARTIFACT,
                "the image viewer failed to start",
                details={"viewer": command[0], "exit_status": status},
            )
