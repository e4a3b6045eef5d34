"""Inline-image protocol detection and encoding; the system viewer command."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from imagebridge.cli.generation.preview import (
    detect_protocol,
    iterm2_sequence,
    kitty_sequence,
    viewer_command,
)
from tests.support.images import png_bytes


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TERM": "xterm-kitty"}, "kitty"),
        ({"TERM": "xterm-ghostty"}, "kitty"),
        ({"KITTY_WINDOW_ID": "3", "TERM": "xterm-256color"}, "kitty"),
        ({"TERM_PROGRAM": "iTerm.app"}, "iterm2"),
        ({"LC_TERMINAL": "iTerm2"}, "iterm2"),
        ({"TERM_PROGRAM": "WezTerm"}, "iterm2"),
        ({"TERM": "xterm-256color", "TERM_PROGRAM": "Apple_Terminal"}, None),
        ({}, None),
    ],
)
def test_protocol_detection(env: dict[str, str], expected: str | None) -> None:
    assert detect_protocol(env, stdout_is_tty=True) == expected


def test_no_protocol_when_stdout_is_not_a_terminal() -> None:
    assert detect_protocol({"TERM": "xterm-kitty"}, stdout_is_tty=False) is None


def _kitty_payload(sequence: str) -> bytes:
    chunks = []
    for part in sequence.strip().split("\x1b\\"):
        if not part:
            continue
        control, _, data = part.removeprefix("\x1b_G").partition(";")
        chunks.append((control, data))
    assert chunks[0][0].startswith("f=100,a=T")
    assert [c.endswith("m=1") for c, _ in chunks[:-1]] == [True] * (len(chunks) - 1)
    assert chunks[-1][0].endswith("m=0")
    assert all(len(data) <= 4096 for _, data in chunks)
    return base64.b64decode("".join(data for _, data in chunks))


def test_kitty_sends_png_in_bounded_chunks() -> None:
    data = png_bytes(200, 200)
    assert _kitty_payload(kitty_sequence(data)) == data


def test_kitty_converts_other_formats_to_png() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buffer, format="JPEG")
    shown = _kitty_payload(kitty_sequence(buffer.getvalue()))
    assert shown.startswith(b"\x89PNG")


def test_iterm2_sequence() -> None:
    data = png_bytes(16, 16, (200, 30, 30))
    sequence = iterm2_sequence(data, "fox.png")
    assert sequence.startswith("\x1b]1337;File=name=" + base64.b64encode(b"fox.png").decode())
    assert f"size={len(data)};inline=1" in sequence
    assert sequence.rstrip("\n").endswith(base64.b64encode(data).decode() + "\x07")


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        ("linux", ["xdg-open", "/a.png"]),
        ("darwin", ["open", "/a.png"]),
        ("win32", ["cmd", "/C", "start", "", "/a.png"]),
    ],
)
def test_viewer_command(platform: str, expected: list[str]) -> None:
    assert viewer_command("/a.png", platform) == expected
