"""``-o``/``--output-dir`` resolve below ``artifacts.root`` and never escape it."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebridge.cli.generation.paths import OutputTarget, artifact_root, output_target
from imagebridge.contract.errors import BridgeError

ROOT = Path("/srv/bridge/artifacts")


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("fox.png", OutputTarget(None, "fox.png")),
        ("portraits/woman.png", OutputTarget("portraits", "woman.png")),
        ("a/./b/../c.png", OutputTarget("a", "c.png")),
        ("/srv/bridge/artifacts/x/y.webp", OutputTarget("x", "y.webp")),
    ],
)
def test_output_file_maps_to_directory_and_filename(output: str, expected: OutputTarget) -> None:
    assert output_target(output, None, ROOT) == expected


@pytest.mark.parametrize(
    "output", ["/outside.png", "../up.png", "a/../../up.png", "/srv/bridge/other/x.png"]
)
def test_paths_outside_the_root_are_refused(output: str) -> None:
    with pytest.raises(BridgeError, match="must remain below the configured artifact root"):
        output_target(output, None, ROOT)


def test_output_dir_sets_only_the_directory() -> None:
    assert output_target(None, "batch/today", ROOT) == OutputTarget("batch/today", None)
    assert output_target(None, ".", ROOT) == OutputTarget(None, None)
    assert output_target(None, str(ROOT), ROOT) == OutputTarget(None, None)


def test_output_must_name_a_file() -> None:
    with pytest.raises(BridgeError, match="must name a file"):
        output_target(str(ROOT), None, ROOT)


def test_relative_root_is_taken_from_the_working_directory() -> None:
    assert artifact_root(Path("data/../art"), Path("/home/me")) == Path("/home/me/art")


def test_symlinked_root_accepts_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert output_target(str(real / "f.png"), None, link) == OutputTarget(None, "f.png")
