"""``background remove``: offline chroma key with atomic, no-clobber output."""

from __future__ import annotations

import hashlib

from PIL import Image

from tests.cli.conftest import Cli, keyed_png


def test_removes_a_flat_background(cli: Cli) -> None:
    cli.write("in.png", keyed_png())
    result = cli("--json", "background", "remove", "in.png", "-o", "out.png")
    assert result.code == 0, result.stderr
    body = result.json()
    out = cli.cwd / "out.png"
    assert body["output"] == str(out) and body["format"] == "png"
    assert body["key_color"] == "#00ff00" and body["transparent_corners"] == 4
    assert body["transparent_pixels"] == 32 * 32 - 16 * 16 and body["opaque_pixels"] == 256
    assert hashlib.sha256(out.read_bytes()).hexdigest() == body["sha256"]
    with Image.open(out) as image:
        assert image.mode == "RGBA" and image.getpixel((0, 0))[3] == 0
        assert image.getpixel((16, 16))[3] == 255


def test_existing_output_is_kept_unless_forced(cli: Cli) -> None:
    cli.write("in.png", keyed_png())
    cli.write("out.png", b"precious")
    refused = cli("--json", "background", "remove", "in.png", "-o", "out.png")
    assert refused.code == 4 and (cli.cwd / "out.png").read_bytes() == b"precious"
    forced = cli("--json", "background", "remove", "in.png", "-o", "out.png", "--force")
    assert forced.code == 0 and (cli.cwd / "out.png").read_bytes() != b"precious"
    assert [p.name for p in cli.cwd.iterdir() if p.name.startswith(".")] == []


def test_webp_output_explicit_key_and_thresholds(cli: Cli) -> None:
    cli.write("in.png", keyed_png())
    result = cli("--json", "background", "remove", "in.png", "-o", "out.webp", "--key",
                 "#00FF00", "--transparent-threshold", "20", "--opaque-threshold", "120",
                 "--no-despill")  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.json()["format"] == "webp"


def test_bad_inputs(cli: Cli) -> None:
    cli.write("in.png", keyed_png())
    assert cli("background", "remove", "in.png", "-o", "out.jpg").code == 2
    assert cli("background", "remove", "missing.png", "-o", "out.png").code == 4
    cli.write("text.png", "not an image")
    assert cli("background", "remove", "text.png", "-o", "out.png").code == 4
    assert cli("background", "remove", "in.png", "-o", "o.png",
               "--transparent-threshold", "300").code == 2  # fmt: skip
    big = cli("--set", "artifacts.image.max_encoded_bytes=100", "background", "remove",
              "in.png", "-o", "o.png")  # fmt: skip
    assert big.code == 4 and "exceeds the configured byte limit" in big.stderr
