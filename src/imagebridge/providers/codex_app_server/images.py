"""Capture the generated image(s) of one turn from its notifications.

What current codex (0.169) emits for the ``image_gen.imagegen`` tool is an
``item/completed`` notification whose item has ``type: "imageGeneration"`` and either
``result`` (inline base64) or a file: ``savedPath`` (under ``$CODEX_HOME/generated_images``)
and/or ``fileId``. Files are read only from inside that folder — real paths, no symlink
anywhere on the way, a regular file, at most ``max_encoded_bytes``. Decoding and file reads
run in a worker thread.

:class:`TurnImageCollector` is fed the turn's notifications one by one. It sets
:attr:`TurnImageCollector.image_arrived` as soon as the wanted number of images is in, so
the provider can stop waiting and interrupt a turn that runs on (codex keeps talking to
the model after the tool call), and :meth:`TurnImageCollector.result` turns the end of
the turn into images or a classified :class:`BridgeError`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import os
import stat
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import sniff_format
from imagebridge.providers.codex_app_server.diagnostics import TurnDiagnostics
from imagebridge.providers.codex_app_server.failures import (
    classify_image_failure,
    classify_turn_error,
)
from imagebridge.providers.codex_app_server.rpc import Notification

__all__ = [
    "GENERATED_IMAGES_DIR",
    "CaptureLimits",
    "CapturedImage",
    "ImageSource",
    "TurnImageCollector",
    "TurnImages",
    "collect_turn_images",
    "read_generated_image",
    "sniff_media_type",
]

GENERATED_IMAGES_DIR = "generated_images"
_FILE_EXTENSIONS = ("png", "jpg", "jpeg", "webp")
ImageSource = Literal["result", "saved_path", "file_id"]


@dataclass(frozen=True, slots=True)
class CaptureLimits:
    """Bounds on what a turn may hand over (defaults: ``artifacts.image`` and the original)."""

    max_encoded_bytes: int = 32 * 1024 * 1024
    max_revised_prompt_bytes: int = 128 * 1024

    @property
    def max_base64_chars(self) -> int:
        return -(-self.max_encoded_bytes // 3) * 4


@dataclass(frozen=True, slots=True)
class CapturedImage:
    item_id: str
    data: bytes
    media_type: str
    revised_prompt: str | None
    source: ImageSource

    def __repr__(self) -> str:  # never print image bytes
        return (
            f"CapturedImage(item_id={self.item_id!r}, media_type={self.media_type!r}, "
            f"bytes={len(self.data)}, source={self.source!r})"
        )


@dataclass(frozen=True, slots=True)
class TurnImages:
    """The images of a turn. ``turn_completed`` is False when capture stopped early."""

    images: tuple[CapturedImage, ...]
    turn_completed: bool
    turn_status: str | None
    diagnostics: dict[str, Any]


def sniff_media_type(data: bytes) -> str | None:
    """PNG, JPEG or WebP by signature; anything else is not an image codex produces."""
    image_format = sniff_format(data)
    return image_format.media_type if image_format is not None else None


def _refused(reason: str, **details: Any) -> BridgeError:
    return BridgeError(
        ErrorCode.PROTOCOL,
        "codex reported an image file the bridge may not read",
        details={"reason": reason, **details},
    )


def read_generated_image(codex_home: Path, saved_path: str | Path, max_bytes: int) -> bytes:
    """Read one image codex saved, confined to ``codex_home/generated_images`` (blocking).

    The path is resolved, must lie strictly inside the folder, and is then opened one
    component at a time from the folder with ``O_NOFOLLOW`` so a symlink swapped in
    meanwhile cannot lead outside. Only regular files of at most ``max_bytes`` are read.
    """
    path = Path(saved_path)
    if not path.is_absolute():
        raise _refused("relative_path")
    # ValueError: a path with a NUL byte (JSON allows "\u0000") cannot name a file.
    try:
        root = (codex_home / GENERATED_IMAGES_DIR).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        raise _refused("generated_images_missing") from None
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        raise _refused("not_found") from None
    if real == root or not real.is_relative_to(root):
        raise _refused("outside_generated_images")
    parts = real.relative_to(root).parts
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY | nofollow)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=directory)
            except OSError:
                raise _refused("unsafe_path") from None
            os.close(directory)
            directory = inner
        try:
            handle = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | nofollow, dir_fd=directory)
        except OSError:
            raise _refused("unsafe_path") from None
    finally:
        os.close(directory)
    with os.fdopen(handle, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _refused("not_a_regular_file")
        if info.st_size > max_bytes:
            raise _refused("too_large", file_bytes=info.st_size, limit_bytes=max_bytes)
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _refused("too_large", limit_bytes=max_bytes)
    return data


def _decode_base64(value: str, limits: CaptureLimits) -> bytes:
    text = value.strip()
    if len(text) > limits.max_base64_chars:
        raise BridgeError(
            ErrorCode.PROTOCOL,
            "codex returned an image larger than the configured limit",
            details={"base64_chars": len(text), "limit_bytes": limits.max_encoded_bytes},
        )
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BridgeError(
            ErrorCode.PROTOCOL, "codex returned image data that is not base64"
        ) from None
    if len(data) > limits.max_encoded_bytes:
        raise BridgeError(
            ErrorCode.PROTOCOL,
            "codex returned an image larger than the configured limit",
            details={"image_bytes": len(data), "limit_bytes": limits.max_encoded_bytes},
        )
    return data


def _text(item: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class TurnImageCollector:
    """Accumulates one turn's image items and decides how the turn ended."""

    def __init__(
        self,
        *,
        thread_id: str,
        turn_id: str,
        expected_images: int = 1,
        codex_home: Path | None = None,
        limits: CaptureLimits | None = None,
    ) -> None:
        if expected_images < 1:
            raise ValueError("expected_images must be at least 1")
        self.thread_id = thread_id
        self.turn_id = turn_id
        self.expected_images = expected_images
        self.codex_home = codex_home
        self.limits = limits or CaptureLimits()
        self.diagnostics = TurnDiagnostics()
        self.image_arrived = asyncio.Event()
        self.images: list[CapturedImage] = []
        self.turn_completed = False
        self.turn_status: str | None = None
        self._turn_error: Mapping[str, Any] | None = None
        self._last_error: Mapping[str, Any] | None = None
        self._image_failure: BridgeError | None = None
        self._seen_ids: set[str] = set()

    @property
    def complete(self) -> bool:
        """All wanted images are in (the turn itself may still be running)."""
        return len(self.images) >= self.expected_images

    def belongs(self, notification: Notification) -> bool:
        return notification.thread_id == self.thread_id and notification.turn_id == self.turn_id

    async def feed(self, notification: Notification) -> bool:
        """Take one notification; True once the turn is over. Raises capture errors."""
        if self.turn_completed or not self.belongs(notification):
            return self.turn_completed
        self.diagnostics.notifications += 1
        params = notification.params
        if notification.method == "item/completed":
            item = params.get("item")
            if not isinstance(item, Mapping):
                raise BridgeError(ErrorCode.PROTOCOL, "codex sent item/completed without an item")
            self.diagnostics.completed_items += 1
            self.diagnostics.count_item(item.get("type"), item.get("status"))
            if item.get("type") == "imageGeneration":
                await self._image_item(item, from_turn=False)
        elif notification.method == "error":
            self.diagnostics.error_notifications += 1
            error = params.get("error")
            if isinstance(error, Mapping) and params.get("willRetry") is not True:
                self._last_error = error
        elif notification.method == "turn/completed":
            await self._turn_completed(params.get("turn"))
        return self.turn_completed

    async def _turn_completed(self, turn: Any) -> None:
        if not isinstance(turn, Mapping):
            raise BridgeError(ErrorCode.PROTOCOL, "codex sent turn/completed without a turn")
        status = turn.get("status")
        self.turn_status = status if isinstance(status, str) else None
        self.diagnostics.set_turn_status(status)
        items = turn.get("items")
        if isinstance(items, list):
            self.diagnostics.terminal_item_count = len(items)
            # A full items view may carry image items whose notification was not seen.
            for item in items:
                if (
                    isinstance(item, Mapping)
                    and item.get("type") == "imageGeneration"
                    and item.get("id") not in self._seen_ids
                    and not self.complete
                ):
                    await self._image_item(item, from_turn=True)
        error = turn.get("error")
        self._turn_error = error if isinstance(error, Mapping) else None
        self.turn_completed = True

    async def _image_item(self, item: Mapping[str, Any], *, from_turn: bool) -> None:
        status = item.get("status")
        if not from_turn:
            self.diagnostics.image_items += 1
        if status == "completed":
            if not from_turn:
                self.diagnostics.completed_image_items += 1
            if self.complete:
                self.diagnostics.extra_image_items += 1
                return
            self.images.append(await self._capture(item))
            if len(self.images) >= self.expected_images:
                self.image_arrived.set()
        elif status == "failed":
            if not from_turn:
                self.diagnostics.failed_image_items += 1
            failure = classify_image_failure(item.get("failure"))
            if failure is not None:
                self._image_failure = failure

    async def _capture(self, item: Mapping[str, Any]) -> CapturedImage:
        item_id = item.get("id")
        if not isinstance(item_id, str) or not item_id:
            raise BridgeError(ErrorCode.PROTOCOL, "codex sent an image item without an id")
        if item_id in self._seen_ids:
            raise BridgeError(ErrorCode.PROTOCOL, "codex sent the same image item twice")
        self._seen_ids.add(item_id)
        revised = _text(item, "revisedPrompt", "revised_prompt")
        if (
            revised is not None
            and len(revised.encode("utf-8")) > self.limits.max_revised_prompt_bytes
        ):
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "codex returned a revised prompt longer than the limit",
                details={"limit_bytes": self.limits.max_revised_prompt_bytes},
            )
        result = item.get("result")
        source: ImageSource
        if isinstance(result, str) and result.strip():
            data = await asyncio.to_thread(_decode_base64, result, self.limits)
            source = "result"
        elif (saved := _text(item, "savedPath", "saved_path")) is not None:
            data = await asyncio.to_thread(
                read_generated_image, self._home(), saved, self.limits.max_encoded_bytes
            )
            source = "saved_path"
        elif _text(item, "fileId", "file_id") is not None:
            data = await asyncio.to_thread(self._read_by_item_id, item_id)
            source = "file_id"
        else:
            raise BridgeError(
                ErrorCode.PROTOCOL, "codex completed an image item without image data"
            )
        media_type = sniff_media_type(data)
        if media_type is None:
            raise BridgeError(
                ErrorCode.PROTOCOL, "codex returned data that is not a PNG, JPEG or WebP image"
            )
        return CapturedImage(item_id, data, media_type, revised, source)

    def _home(self) -> Path:
        if self.codex_home is None:
            raise _refused("codex_home_unknown")
        return self.codex_home

    def _read_by_item_id(self, item_id: str) -> bytes:
        """A ``fileId``-only item: codex saves it as ``generated_images/<thread>/<item>.<ext>``."""
        folder = self._home() / GENERATED_IMAGES_DIR / self.thread_id
        for extension in _FILE_EXTENSIONS:
            candidate = folder / f"{item_id}.{extension}"
            with contextlib.suppress(BridgeError):
                return read_generated_image(self._home(), candidate, self.limits.max_encoded_bytes)
        raise _refused("attachment_not_readable")

    def result(self) -> TurnImages:
        """The captured images, or the error that explains why there are none."""
        if self.images:
            return TurnImages(
                tuple(self.images),
                self.turn_completed,
                self.turn_status,
                self.diagnostics.to_dict(),
            )
        diagnostics = self.diagnostics.to_dict()
        if not self.turn_completed:
            raise BridgeError(
                ErrorCode.PROTOCOL,
                "the codex turn's events ended before the turn completed",
                details={"turn_diagnostics": diagnostics},
            )
        status = self.turn_status or "unknown"
        if status == "completed":
            if self._image_failure is not None:
                raise self._image_failure.copy().with_detail("turn_diagnostics", diagnostics)
            raise BridgeError(
                ErrorCode.UPSTREAM,
                "Codex turn completed without an image",
                retryable=True,
                details={
                    "upstream_code": "completed_without_image",
                    "turn_diagnostics": diagnostics,
                },
            )
        if status == "failed":
            if self._image_failure is not None and self._turn_error is None:
                raise self._image_failure.copy().with_detail("turn_diagnostics", diagnostics)
            raise classify_turn_error(
                self._turn_error or self._last_error, status=status, diagnostics=diagnostics
            )
        if status == "interrupted":
            raise BridgeError(
                ErrorCode.CANCELLED,
                "the codex turn was interrupted before it produced an image",
                details={
                    "outcome": "cancelled",
                    "terminal_status": "interrupted",
                    "turn_diagnostics": diagnostics,
                },
            )
        raise BridgeError(
            ErrorCode.PROTOCOL,
            "codex reported an unexpected terminal turn status",
            details={
                "terminal_status": self.diagnostics.turn_status,
                "turn_diagnostics": diagnostics,
            },
        )


async def collect_turn_images(
    events: AsyncIterable[Notification],
    collector: TurnImageCollector,
    *,
    wait_for_turn_completed: bool = False,
) -> TurnImages:
    """Feed ``events`` to ``collector`` until the images are in (or the turn ends).

    With ``wait_for_turn_completed=False`` (the default) it returns as soon as the
    wanted images arrived; the turn may still be running and ``turn_completed`` is then
    False — the provider should ``turn/interrupt`` it. Deadlines are the caller's:
    wrap the call in :func:`asyncio.timeout`.
    """
    async for notification in events:
        if await collector.feed(notification):
            break
        if collector.complete and not wait_for_turn_completed:
            break
    return collector.result()
