"""The layer contracts in ``pyproject.toml`` (``[tool.importlinter]``) hold, and would catch a
wrong import: each case copies the package, adds one import that points outward, and runs
``lint-imports`` on the copy, which must fail naming the broken contract.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(source_root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repository's contracts on the package under ``source_root``."""
    env = {**os.environ, "PYTHONPATH": str(source_root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=source_root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_tree_keeps_every_layer_contract() -> None:
    done = lint_imports(ROOT / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import", "contract"),
    [
        # the engine reaching for an adapter: the cycle issue 21 removed
        ("engine/validation.py", "import imagebridge.providers.mock", "engine imports no adapter"),
        # pure image code reading configuration
        ("imaging/ids.py", "import imagebridge.config.model", "configuration is read only"),
        # one adapter importing another
        ("storage/cursors.py", "import imagebridge.artifacts.naming", "layers:"),
        # a service reaching up into the wiring
        ("jobs/trimming.py", "import imagebridge.application", "layers:"),
        # the standalone client importing the server
        ("client/_constants.py", "import imagebridge.server.ids", "client stands alone"),
        # one artifact backend reaching into its twin
        ("artifacts/s3/store.py", "import imagebridge.artifacts.filesystem.objects", "twins"),
    ],
)
def test_a_wrong_import_breaks_its_contract(
    tmp_path: Path, module: str, wrong_import: str, contract: str
) -> None:
    copy = tmp_path / "src"
    shutil.copytree(
        ROOT / "src" / "imagebridge",
        copy / "imagebridge",
        ignore=shutil.ignore_patterns("__pycache__", "static"),
    )
    target = copy / "imagebridge" / module
    target.write_text(target.read_text() + f"\n{wrong_import}  # noqa\n")

    done = lint_imports(copy)

    assert done.returncode == 1, done.stdout + done.stderr
    broken = [line for line in done.stdout.splitlines() if " BROKEN" in line]
    assert any(contract in line for line in broken), done.stdout
