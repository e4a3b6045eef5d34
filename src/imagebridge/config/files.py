"""Finding and reading the TOML configuration file.

Discovery order: an explicit path (``--config``), ``$IMAGEGEN_BRIDGE_CONFIG``,
``./imagegen-bridge.toml``, then the per-user ``config.toml``. An explicit path must
exist; the others are used only when present, and with none found the bridge runs on
defaults plus overrides.

A file must be a regular file (a symbolic link is refused, not followed), at most
1 MiB, UTF-8 (a leading byte-order mark is tolerated) and valid TOML. Errors name
the file and, for TOML errors, the line and column, but never quote its content.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from imagebridge.config._tree import MAX_NESTING, nesting_depth
from imagebridge.config.paths import CONFIG_ENV_VAR, LOCAL_CONFIG_NAME, user_config_file
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["MAX_CONFIG_FILE_BYTES", "discover_config_file", "read_config_file"]

MAX_CONFIG_FILE_BYTES = 1024 * 1024
_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _error(message: str, path: Path, **details: Any) -> BridgeError:
    return BridgeError(
        ErrorCode.CONFIGURATION, message, details={"path": str(path), **details}
    ).with_suggestion("Pass another file with --config, or fix this one.")


def discover_config_file(
    config_path: Path | None, env: Mapping[str, str], cwd: Path
) -> Path | None:
    """The file to load, absolute, or ``None`` when no file is configured or present."""
    explicit = config_path
    if explicit is None and env.get(CONFIG_ENV_VAR):
        explicit = Path(env[CONFIG_ENV_VAR])
    if explicit is not None:
        path = explicit if explicit.is_absolute() else cwd / explicit
        if not os.path.lexists(path):
            raise _error("configuration file does not exist", path)
        return path
    for candidate in (cwd / LOCAL_CONFIG_NAME, user_config_file(env)):
        # lexists: a symlink in a discovery location is reported, not silently skipped.
        if os.path.lexists(candidate):
            return candidate
    return None


def read_config_file(path: Path, max_bytes: int = MAX_CONFIG_FILE_BYTES) -> dict[str, Any]:
    """Parse one configuration file into a plain table, enforcing the file rules."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise _error("configuration file does not exist", path) from None
    except OSError:
        raise _error("could not inspect configuration file", path) from None
    if stat.S_ISLNK(info.st_mode):
        raise _error("configuration file must not be a symbolic link", path)
    if not stat.S_ISREG(info.st_mode):
        raise _error("configuration file must be a regular file", path)
    if info.st_size > max_bytes:
        raise _error(
            f"configuration file is larger than the {max_bytes}-byte limit",
            path,
            max_bytes=max_bytes,
        )
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError:
        raise _error("could not open configuration file", path) from None
    try:
        opened = os.fstat(descriptor)
        if not stat.S_ISREG(opened.st_mode):
            raise _error("configuration file must be a regular file", path)
        with os.fdopen(descriptor, "rb", closefd=False) as stream:
            data = stream.read(max_bytes + 1)
    except OSError:
        raise _error("could not read configuration file", path) from None
    finally:
        os.close(descriptor)
    if len(data) > max_bytes:
        raise _error(
            f"configuration file is larger than the {max_bytes}-byte limit",
            path,
            max_bytes=max_bytes,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _error("configuration file is not valid UTF-8", path) from None
    text = text.removeprefix("\ufeff")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _POSITION.search(str(exc))
        position = {"line": int(match[1]), "column": int(match[2])} if match else {}
        raise _error("configuration file is not valid TOML", path, **position) from None
    except (RecursionError, ValueError):
        raise _error("configuration file is not valid TOML", path) from None
    if nesting_depth(document) > MAX_NESTING:
        raise _error("configuration file nests tables or arrays too deeply", path)
    return document
