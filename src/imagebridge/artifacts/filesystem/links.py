"""The bridge's own expiring signed links to one artifact, keyed in the local artifact root.

The filesystem twin's ``links.py`` (the S3 twin's offers presigned object URLs instead):
what a ``url`` output is unless ``artifacts.url_mode = "presigned"``, whichever backend
holds the image, since the link is served by the bridge (which reads the artifact through
the chosen backend). Its key lives on this machine's filesystem, below ``artifacts.root``.

A link is ``v1/artifact-links/<id>/<basename>?expires=<unix seconds>&signature=<sig>``
(relative to the bridge's base address), where ``sig`` is the unpadded base64url
HMAC-SHA256 of the id, the basename and the expiry under a key every instance sharing
the artifact root shares. Changing any part of the link breaks its signature; a genuine
link stops working at ``expires`` or when its artifact is deleted (the store no longer
finds it). Nothing else is granted: a link names one artifact.

The key is read once per process, from an environment variable when configured, else
from ``<artifact root>/.imagegen-bridge-link-key`` (64 hex characters, mode 0600),
created on first use with a no-clobber link so instances starting together agree on one
key. Deleting the file (and restarting) revokes every link ever issued.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from imagebridge.artifacts.filesystem import objects
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.publishing import PublishedArtifact
from imagebridge.imaging.ids import canonical_uuid

__all__ = [
    "KEY_FILENAME",
    "LINK_PREFIX",
    "MIN_ENV_KEY_CHARS",
    "LinkKeySource",
    "SignedArtifactLinks",
]

LINK_PREFIX = "v1/artifact-links/"
KEY_FILENAME = ".imagegen-bridge-link-key"
MIN_ENV_KEY_CHARS = 32
_KEY_HEX = re.compile(r"[0-9a-f]{64}")
_KEY_FILE_BYTES = 65  # 64 hex characters and an optional newline
_SIGNATURE = re.compile(r"[A-Za-z0-9_-]{43}")
_EXPIRES = re.compile(r"[0-9]{1,12}")
_BASENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,159}")
INVALID_LINK = "artifact link is invalid"
EXPIRED_LINK = "artifact link has expired"


def _refused(message: str, reason: str) -> BridgeError:
    return BridgeError(ErrorCode.PERMISSION_DENIED, message, details={"reason": reason})


@dataclass(frozen=True, slots=True)
class LinkKeySource:
    """Where the signing key comes from: an environment variable's value, or the root."""

    root: Path
    env_name: str | None = None
    environ: Mapping[str, str] | None = None

    def load(self) -> bytes:
        """The key (blocking: reads and may create the key file)."""
        if self.env_name is not None:
            value = (self.environ if self.environ is not None else os.environ).get(self.env_name)
            if value is None or len(value) < MIN_ENV_KEY_CHARS:
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    f"artifact link key variable must hold at least {MIN_ENV_KEY_CHARS} characters",
                    details={"field": "artifacts.url_signing_key_env", "variable": self.env_name},
                )
            return value.encode()
        return _load_or_create(self.root)


def _key_error(message: str) -> BridgeError:
    return BridgeError(
        ErrorCode.ARTIFACT, message, details={"field": "artifacts.root", "file": KEY_FILENAME}
    )


def _load_or_create(root: Path) -> bytes:
    try:
        root.mkdir(parents=True, exist_ok=True)
        dir_fd = objects.open_dir(os.path.realpath(root))  # as the store opens it
    except OSError as exc:
        raise _key_error("artifact root is not usable for the link key") from exc
    try:
        for _ in range(2):
            try:
                return _read_key(dir_fd)
            except FileNotFoundError:
                pass
            temp = objects.write_temp(dir_fd, secrets.token_hex(32).encode(), 0o600)
            try:
                objects.link_noclobber(dir_fd, temp, KEY_FILENAME)  # loses quietly to a racer
                objects.fsync_dir(dir_fd)
            finally:
                objects.remove_quietly(dir_fd, temp)
        return _read_key(dir_fd)
    except (OSError, objects.Unsafe) as exc:
        raise _key_error("artifact link key could not be read or created") from exc
    finally:
        os.close(dir_fd)


def _read_key(dir_fd: int) -> bytes:
    text = objects.read_regular(dir_fd, KEY_FILENAME, _KEY_FILE_BYTES).decode("ascii", "replace")
    key = text.removesuffix("\n")
    if not _KEY_HEX.fullmatch(key):
        raise _key_error("artifact link key file is malformed")
    return bytes.fromhex(key)


class SignedArtifactLinks:
    """Mints links (the engine's ``ArtifactLinker`` port) and checks them for the route."""

    def __init__(
        self, keys: LinkKeySource, ttl_secs: int, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._keys = keys
        self._ttl = ttl_secs
        self._clock = clock
        self._key: bytes | None = None
        self._lock = threading.Lock()

    @property
    def ttl_secs(self) -> int:
        return self._ttl

    def key(self) -> bytes:
        """The signing key, loaded on first use (blocking)."""
        with self._lock:
            if self._key is None:
                self._key = self._keys.load()
            return self._key

    async def ready(self) -> None:
        """Load the key before paid work, so a broken key fails a request early."""
        if self._key is None:
            await asyncio.to_thread(self.key)

    def _signature(self, key: bytes, artifact_id: str, basename: str, expires: int) -> str:
        message = f"imagebridge-artifact-link\n{artifact_id}\n{basename}\n{expires}".encode()
        digest = hmac.new(key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def sign(self, artifact_id: str, basename: str, expires: int) -> str:
        """The link path for ``expires`` (also used by tests to forge expired links)."""
        signature = self._signature(self.key(), artifact_id, basename, expires)
        return (
            f"{LINK_PREFIX}{artifact_id}/{quote(basename, safe='')}"
            f"?expires={expires}&signature={signature}"
        )

    async def link(self, artifact: PublishedArtifact) -> str:
        await self.ready()
        basename = artifact.name.rsplit("/", 1)[-1]
        return self.sign(artifact.id, basename, int(self._clock()) + self._ttl)

    def verify(self, artifact_id: str, basename: str, expires: str, signature: str) -> str:
        """The canonical artifact id of a genuine, unexpired link, else ``permission_denied``.

        The signature is checked before the expiry, so "expired" is only ever said of a
        link this bridge issued.
        """
        canonical = canonical_uuid(artifact_id)
        if (
            canonical is None
            or canonical != artifact_id
            or not _BASENAME.fullmatch(basename)
            or not _EXPIRES.fullmatch(expires)
            or not _SIGNATURE.fullmatch(signature)
        ):
            raise _refused(INVALID_LINK, "invalid_link")
        expected = self._signature(self.key(), artifact_id, basename, int(expires))
        if not hmac.compare_digest(expected, signature):
            raise _refused(INVALID_LINK, "invalid_link")
        if int(expires) <= self._clock():
            raise _refused(EXPIRED_LINK, "expired_link")
        return canonical
