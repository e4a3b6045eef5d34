"""A login refresh killed between writing its temp file and renaming it over ``auth.json``.

The process is SIGKILLed at that step (the test-only crash point,
``IMAGEBRIDGE_TEST_CRASH_AT=login.temp_written``): ``auth.json`` still holds the old
document whole, and the leftover temp file (which holds tokens) is removed by the next
write to that login, under its lock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from imagebridge.engine.crash_points import CRASH_ENV
from imagebridge.providers.codex.login.store import OwnLogin, write_auth_atomically


def test_a_write_killed_before_its_rename_keeps_the_old_login_and_its_temp_is_removed(
    tmp_path: Path,
) -> None:
    login = OwnLogin.under(tmp_path, "alpha")
    write_auth_atomically(login, {"tokens": {"access_token": "old"}})
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from imagebridge.providers.codex.login.store import OwnLogin, write_auth_atomically
        login = OwnLogin.under(Path({str(tmp_path)!r}), "alpha")
        write_auth_atomically(login, {{"tokens": {{"access_token": "new"}}}})
        """
    )
    env = {**os.environ, CRASH_ENV: "login.temp_written"}
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL

    assert json.loads(login.auth_file.read_text())["tokens"]["access_token"] == "old"
    [leftover] = [p for p in login.home.iterdir() if p.name.endswith(".tmp")]
    assert "new" in leftover.read_text()

    write_auth_atomically(login, {"tokens": {"access_token": "newer"}})
    assert [p.name for p in login.home.iterdir() if p.name.endswith(".tmp")] == []
    assert json.loads(login.auth_file.read_text())["tokens"]["access_token"] == "newer"
