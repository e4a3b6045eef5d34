"""Load input images (``file``, ``base64``, ``data_url``, ``url``) into verified bytes.

Local files are confined to the configured ``local_roots``: the path may not contain
``..``; an absolute path must lie under a root; the file is opened by walking from the
root's directory descriptor one component at a time without following symlinks, and
a symlink met on the way is resolved by this module only while it stays inside the
root (like a chroot). The result must be a regular file within the byte cap. Inline
payloads are length-checked *before* decoding. Every result is fully inspected and a
declared media type must match the sniffed one. Errors are ``BridgeError(code=input)``.

File and base64 work is blocking: async callers use :meth:`InputLoader.aload`. Remote
URLs go through :mod:`.remote`; local files are read with the filesystem backend's
symlink-safe primitives (:mod:`imagebridge.artifacts.filesystem.objects`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import errno
import os
import posixpath
import stat
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from imagebridge.artifacts.filesystem import objects
from imagebridge.artifacts.inputs.remote import RemoteImageFetcher
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.engine.inputs import LoadedImage
from imagebridge.imaging.inspect import ImageLimits, inspect_image

__all__ = [
    "INPUT_PAYLOAD_FIELDS",
    "ImageInputLike",
    "InputLoader",
    "LoadedImage",
]

#: Where each input type keeps its payload in the v1 ``ImageInput`` model.
INPUT_PAYLOAD_FIELDS = {"file": "path", "base64": "data", "data_url": "data_url", "url": "url"}
_MAX_SYMLINKS = 40
_MEDIA_TYPE_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}


class ImageInputLike(Protocol):
    """The shape of a v1 ``ImageInput``: ``type`` plus the type's payload field."""

    @property
    def type(self) -> str: ...

    @property
    def media_type(self) -> str | None: ...

    @property
    def filename(self) -> str | None: ...


def _input_error(message: str, **details: Any) -> BridgeError:
    return BridgeError(ErrorCode.INPUT, message, details=details or None)


@dataclass(frozen=True, slots=True)
class _Root:
    canonical: str
    configured: str


class InputLoader:
    """Turns input descriptions into :class:`LoadedImage` values under fixed limits."""

    def __init__(
        self,
        local_roots: Iterable[str | os.PathLike[str]] = (".",),
        limits: ImageLimits | None = None,
        *,
        remote: RemoteImageFetcher | None = None,
        max_inline_encoded_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self._limits = limits or ImageLimits()
        self._remote = remote
        self._max_inline = max_inline_encoded_bytes
        roots: list[_Root] = []
        for root in local_roots:
            configured = os.path.abspath(os.fspath(root))
            canonical = os.path.realpath(configured)
            if not os.path.isdir(canonical):
                raise BridgeError(
                    ErrorCode.CONFIGURATION,
                    "an allowed input root is not a directory",
                    details={"field": "inputs.local_roots"},
                )
            roots.append(_Root(canonical=canonical, configured=configured))
        self._roots = tuple(roots)

    # -- public API --------------------------------------------------------------------------

    def load(
        self,
        kind: str,
        payload: str,
        *,
        media_type: str | None = None,
        filename: str | None = None,
    ) -> LoadedImage:
        """Load a ``file``/``base64``/``data_url`` input (blocking). URLs need :meth:`aload`."""
        if kind == "url":
            if self._remote is None or not self._remote.enabled:
                raise _input_error("remote image inputs are disabled")
            raise _input_error("remote image inputs must be loaded asynchronously")
        data = self._raw_bytes(kind, payload)
        return self._verified(data, media_type, filename)

    async def aload(
        self,
        kind: str,
        payload: str,
        *,
        media_type: str | None = None,
        filename: str | None = None,
    ) -> LoadedImage:
        """Load any input type; blocking work runs in a worker thread."""
        if kind == "url":
            if self._remote is None or not self._remote.enabled:
                raise _input_error("remote image inputs are disabled")
            fetched = await self._remote.fetch(payload)
            self._check_media_type(fetched.info.media_type, media_type)
            return LoadedImage(fetched.data, fetched.info, filename)
        return await asyncio.to_thread(
            self.load, kind, payload, media_type=media_type, filename=filename
        )

    def load_input(self, value: ImageInputLike) -> LoadedImage:
        """:meth:`load` for a v1 ``ImageInput``-shaped object."""
        kind, payload = _unpack(value)
        return self.load(kind, payload, media_type=value.media_type, filename=value.filename)

    async def aload_input(self, value: ImageInputLike) -> LoadedImage:
        """:meth:`aload` for a v1 ``ImageInput``-shaped object."""
        kind, payload = _unpack(value)
        return await self.aload(kind, payload, media_type=value.media_type, filename=value.filename)

    # -- sources -------------------------------------------------------------------------------

    def _raw_bytes(self, kind: str, payload: str) -> bytes:
        if not isinstance(payload, str):
            raise _input_error("image input payload must be a string")
        if kind == "base64":
            return self._decode_base64(payload)
        if kind == "data_url":
            return self._decode_data_url(payload)
        if kind == "file":
            return self._read_file(payload)
        raise _input_error("image input type is not supported", type=str(kind))

    def _decode_base64(self, encoded: str) -> bytes:
        maximum = self._limits.max_encoded_bytes
        maximum_encoded = min(-(-maximum * 4 // 3) + 4, self._max_inline)
        if len(encoded) > maximum_encoded:
            raise _input_error(
                "base64 input exceeds the configured byte limit", maximum_bytes=maximum
            )
        if not encoded:
            raise _input_error("base64 input is empty")
        try:
            decoded = base64.b64decode(encoded.encode("ascii"), validate=True)
        except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
            raise _input_error("base64 input is malformed") from exc
        if len(decoded) > maximum:
            raise _input_error(
                "decoded input exceeds the configured byte limit", maximum_bytes=maximum
            )
        return decoded

    def _decode_data_url(self, data_url: str) -> bytes:
        header, comma, encoded = data_url.partition(",")
        if not comma:
            raise _input_error("data URL is malformed")
        if not header.startswith("data:image/") or not header.endswith(";base64"):
            raise _input_error(
                "data URL must contain a supported image media type and base64 encoding"
            )
        return self._decode_base64(encoded)

    # -- local files ---------------------------------------------------------------------------

    def _read_file(self, path: str) -> bytes:
        if not self._roots:
            raise _input_error("local file inputs are disabled")
        parts = path.split("/")
        if not path or "\x00" in path or ".." in parts or "\\" in path:
            raise _input_error("local input path contains a forbidden component")
        for root in self._roots:
            relative = self._relative_to(root, path)
            if relative is None:
                continue
            try:
                return self._read_beneath(root, relative)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise _input_error("local input cannot be opened") from exc
        raise _input_error("local input is outside allowed roots or cannot be opened")

    @staticmethod
    def _relative_to(root: _Root, path: str) -> str | None:
        if not path.startswith("/"):
            return path
        normalized = posixpath.normpath(path)
        for base in (root.canonical, root.configured):
            if normalized == base:
                return ""
            prefix = base.rstrip("/") + "/"
            if normalized.startswith(prefix):
                return normalized[len(prefix) :]
        return None

    def _read_beneath(self, root: _Root, relative: str) -> bytes:
        """Resolve ``relative`` inside ``root`` like a chroot and read the regular file."""
        try:
            root_fd = objects.open_dir(root.canonical)
        except OSError as exc:
            raise _input_error("an allowed input root cannot be opened") from exc
        stack = [root_fd]
        pending = deque(part for part in relative.split("/") if part not in ("", "."))
        followed = 0
        try:
            if not pending:
                raise _input_error("local input is not a regular file")
            while pending:
                name = pending.popleft()
                if name == "..":  # only ever from a symlink target
                    if len(stack) == 1:
                        raise _input_error("local input escapes the allowed root")
                    os.close(stack.pop())
                    continue
                if name in ("", "."):
                    continue
                try:
                    info = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
                except NotADirectoryError as exc:
                    raise FileNotFoundError(name) from exc
                if stat.S_ISLNK(info.st_mode):
                    followed += 1
                    if followed > _MAX_SYMLINKS:
                        raise _input_error("local input has too many symbolic links")
                    target = os.readlink(name, dir_fd=stack[-1])
                    if target.startswith("/"):
                        inside = self._relative_to(root, target)
                        if inside is None:
                            raise _input_error("local input escapes the allowed root")
                        while len(stack) > 1:
                            os.close(stack.pop())
                        target = inside
                    pending.extendleft(reversed([p for p in target.split("/") if p]))
                    continue
                if pending:
                    try:
                        stack.append(objects.open_child_dir(stack[-1], name))
                    except objects.Unsafe as exc:
                        raise FileNotFoundError(name) from exc
                    continue
                return self._read_regular(stack[-1], name)
            raise _input_error("local input is not a regular file")
        finally:
            for fd in stack:
                os.close(fd)

    def _read_regular(self, dir_fd: int, name: str) -> bytes:
        limit = self._limits.max_encoded_bytes
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            raise _input_error("local input is not a regular file")
        if info.st_size > limit:
            raise _input_error("local input exceeds the configured byte limit", maximum_bytes=limit)
        try:
            return objects.read_regular(dir_fd, name, limit)
        except objects.Unsafe as exc:
            raise _input_error(
                "local input changed while it was read or exceeds the configured byte limit"
            ) from exc
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise FileNotFoundError(name) from exc
            raise _input_error("local input cannot be read") from exc

    # -- verification --------------------------------------------------------------------------

    def _verified(self, data: bytes, media_type: str | None, filename: str | None) -> LoadedImage:
        info = inspect_image(data, self._limits)
        self._check_media_type(info.media_type, media_type)
        return LoadedImage(data, info, filename)

    @staticmethod
    def _check_media_type(actual: str, declared: str | None) -> None:
        if declared is None:
            return
        normalized = declared.split(";", 1)[0].strip().lower()
        normalized = _MEDIA_TYPE_ALIASES.get(normalized, normalized)
        if normalized != actual:
            raise _input_error(
                f"declared media type does not match image bytes; detected {actual}",
                detected_media_type=actual,
            )


def _unpack(value: ImageInputLike) -> tuple[str, str]:
    kind = str(value.type)
    field = INPUT_PAYLOAD_FIELDS.get(kind)
    if field is None:
        raise _input_error("image input type is not supported", type=kind)
    payload = getattr(value, field, None)
    if not isinstance(payload, str):
        raise _input_error("image input payload is missing", type=kind)
    return kind, payload
