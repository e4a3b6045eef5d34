"""Local checks shared by ``setup``, ``doctor`` and ``auth-doctor``.

None of them generates an image except :func:`run_live_probe`, which callers run only after
an explicit confirmation. None of them reads a token into anything that is printed.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from imagebridge.cli.output import escape_text
from imagebridge.contract.errors import BridgeError, ErrorCode

if TYPE_CHECKING:
    from imagebridge.cli.context import CliContext
    from imagebridge.config import BridgeConfig

__all__ = [
    "CODEX_PROVIDERS",
    "LIVE_PROBE_PROMPT",
    "CodexVersion",
    "DirectoryState",
    "codex_version",
    "confirm",
    "directory_state",
    "oauth_error",
    "run_live_probe",
    "write_probe",
]

LIVE_PROBE_PROMPT = "A single cobalt-blue circle centered on a plain white background."
CODEX_VERSION_TIMEOUT_S = 5.0
CODEX_PROVIDERS = ("codex-app-server", "codex-responses", "codex-images")
_MAX_VERSION_CHARS = 200


@dataclass(frozen=True, slots=True)
class CodexVersion:
    available: bool
    version: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"available": self.available, "version": self.version}


def codex_version(executable: str, env: Mapping[str, str] | None = None) -> CodexVersion:
    """``codex --version`` with a 5 s limit; the first output line, escaped and bounded."""
    try:
        completed = subprocess.run(
            [executable, "--version"],
            capture_output=True,
            timeout=CODEX_VERSION_TIMEOUT_S,
            env=dict(env) if env is not None else None,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return CodexVersion(False, reason="codex executable was not found")
    except PermissionError:
        return CodexVersion(False, reason="codex executable is not executable")
    except subprocess.TimeoutExpired:
        return CodexVersion(False, reason="codex --version did not answer within 5 s")
    except OSError as exc:
        return CodexVersion(False, reason=f"codex could not be started ({exc.strerror})")
    if completed.returncode != 0:
        return CodexVersion(False, reason=f"codex --version exited with {completed.returncode}")
    text = completed.stdout.decode("utf-8", "replace").strip().splitlines()
    first = escape_text(text[0][:_MAX_VERSION_CHARS]) if text else ""
    return CodexVersion(True, version=first or None)


def oauth_error(env: Mapping[str, str], config: BridgeConfig | None = None) -> BridgeError | None:
    """Why the Codex HTTP transports' ChatGPT login cannot be used, or ``None`` when it can.

    That is the own login ``accounts.active`` names when it is set (read only: a check
    never spends a refresh token), else the borrowed ``$CODEX_HOME`` one.
    """
    from imagebridge.providers.codex.auth import load_codex_credentials

    accounts = config.accounts if config is not None else None
    active = accounts.active if accounts is not None else None
    try:
        if accounts is None or active is None:
            credentials = load_codex_credentials(env=env)
        else:
            from imagebridge.application.logins import own_login

            login = own_login(accounts, active)
            if not login.exists():
                return BridgeError(
                    ErrorCode.AUTHENTICATION,
                    f"The login '{active}' (accounts.active) is not stored.",
                    details={"reason": "missing"},
                    suggestions=(f"Run `imagegen-bridge login --account {active}`.",),
                )
            credentials = load_codex_credentials(login.home)
    except BridgeError as error:
        return error
    del credentials  # only its presence matters; never keep or print the token
    return None


def pool_login_errors(config: BridgeConfig) -> dict[str, BridgeError | None]:
    """Each enabled ``[accounts.pool.<name>]`` account → why its login cannot be used (or
    ``None``). Read only, like :func:`oauth_error`: a check never spends a refresh token."""
    from pathlib import Path

    from imagebridge.application.logins import own_login
    from imagebridge.providers.codex.auth import load_codex_credentials

    found: dict[str, BridgeError | None] = {}
    for name, account in config.accounts.pool_accounts().items():
        if account.codex_home is not None:
            home = Path(account.codex_home).expanduser()
        else:
            home = own_login(config.accounts, account.login or name).home
        try:
            load_codex_credentials(home)
        except BridgeError as error:
            found[name] = error
        else:
            found[name] = None
    return found


def codex_needed(config: BridgeConfig) -> bool:
    """Only the app-server transport runs the codex executable."""
    return config.providers.codex_app_server.enabled


def oauth_needed(config: BridgeConfig) -> bool:
    return any(name in CODEX_PROVIDERS for name in config.enabled_providers())


@dataclass(frozen=True, slots=True)
class DirectoryState:
    exists: bool
    is_directory: bool = False
    symlink: bool = False
    private: bool = False

    @property
    def usable(self) -> bool:
        return self.exists and self.is_directory and not self.symlink


def directory_state(path: Path) -> DirectoryState:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return DirectoryState(False)
    except OSError:
        return DirectoryState(True)
    if stat.S_ISLNK(info.st_mode):
        return DirectoryState(True, symlink=True)
    return DirectoryState(
        True, is_directory=stat.S_ISDIR(info.st_mode), private=not (info.st_mode & 0o077)
    )


def write_probe(directory: Path) -> str | None:
    """Create, write and delete one temporary file; the failure reason, or ``None``."""
    try:
        fd, name = tempfile.mkstemp(prefix=".imagegen-bridge-probe-", dir=directory)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    try:
        os.write(fd, b"probe")
        os.fsync(fd)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)
    return None


def confirm(ctx: CliContext, question: str) -> bool:
    """Ask on stderr and read one answer from stdin; anything but y/yes is a no."""
    ctx.output.stderr.write(f"{question} [y/N] ")
    ctx.output.stderr.flush()
    answer = sys.stdin.readline(64)
    return answer.strip().lower() in ("y", "yes")


def can_prompt(ctx: CliContext, non_interactive: bool) -> bool:
    return not non_interactive and not ctx.output.machine and sys.stdin.isatty()


async def run_live_probe(config: BridgeConfig, provider: str | None) -> dict[str, Any]:
    """One real generation (metadata only: no bytes are kept) and what came back."""
    from imagebridge.application import build_application
    from imagebridge.cli.generation.run import LOCAL_OWNER
    from imagebridge.contract.request import ImageRequest
    from imagebridge.engine.runtime import ExecutionContext

    request = ImageRequest.model_validate(
        {
            "prompt": LIVE_PROBE_PROMPT,
            "operation": "generate",
            "routing": {"provider": provider} if provider else {},
            "output": {"response_format": "metadata"},
        }
    )
    app = build_application(config)
    started = time.monotonic()
    try:
        response = await app.runtime.execute(request, ExecutionContext(owner=LOCAL_OWNER))
    finally:
        with contextlib.suppress(BridgeError):
            await app.aclose()
    first = response.data[0] if response.data else None
    return {
        "provider": response.provider,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "images": len(response.data),
        "width": first.width if first else None,
        "height": first.height if first else None,
        "format": first.format.value if first else None,
    }
