"""The container files' own consistency, checked everywhere (no podman needed)."""

from __future__ import annotations

import subprocess
import sys

from tests.container.podman import ROOT


def test_docker_and_podman_read_the_same_ignore_list() -> None:
    podman_list = (ROOT / ".containerignore").read_text(encoding="utf-8")
    assert (ROOT / ".dockerignore").read_text(encoding="utf-8") == podman_list
    for secret in ("**/.env", "**/auth.json", "**/*.sqlite3*"):
        assert secret in podman_list.splitlines()


def test_the_image_lock_matches_the_project_dependencies() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lock-container"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_every_locked_requirement_is_pinned_with_a_hash() -> None:
    for name in ("requirements.txt", "build-requirements.txt"):
        text = (ROOT / "container" / name).read_text(encoding="utf-8")
        entries = [e for e in text.replace("\\\n", " ").splitlines() if e and e[0] != "#"]
        assert entries, name
        for entry in entries:
            assert "==" in entry and "--hash=sha256:" in entry, entry
