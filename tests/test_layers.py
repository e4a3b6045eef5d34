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


def broken_contracts(report: str) -> list[str]:
    """The names reported BROKEN (lint-imports wraps a long name over two lines)."""
    flat = " ".join(report.split())
    return [before.rsplit(" KEPT", 1)[-1] for before in flat.split(" BROKEN")[:-1]]


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
        # the key service reaching up into the jobs that use it
        ("keys/quota.py", "import imagebridge.jobs.views", "layers:"),
        # the key service reading configuration (application/ hands it plain settings)
        ("keys/scope.py", "import imagebridge.config.model", "configuration is read only"),
        # the standalone client importing the server
        ("client/_constants.py", "import imagebridge.server.ids", "client stands alone"),
        # the engine learning OpenAI's dialect: it is translated on the surface (DESIGN.md)
        ("engine/validation.py", "import imagebridge.contract.openai.fields", "OpenAI layer"),
        # the native contract reaching for its OpenAI translation
        ("contract/request.py", "import imagebridge.contract.openai.images", "OpenAI layer"),
        # the upstream OpenAI provider borrowing the compatible surface's stream shapes
        (
            "providers/openai/wire.py",
            "import imagebridge.contract.openai.images_stream",
            "OpenAI layer",
        ),
        # another surface reaching into the compatible routes
        ("cli/docs.py", "import imagebridge.server.openai.model_names", "OpenAI layer"),
        # one artifact backend reaching into its twin
        ("artifacts/s3/store.py", "import imagebridge.artifacts.filesystem.objects", "twins"),
        # the engine tracing through OpenTelemetry itself instead of its tracing port
        ("engine/fanout.py", "import opentelemetry.trace", "only server/otel imports"),
        # a service doing the same
        ("jobs/tracing.py", "from opentelemetry import trace", "only server/otel imports"),
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
    assert any(contract in name for name in broken_contracts(done.stdout)), done.stdout
