"""The result of loading one input image, whatever its source."""

from __future__ import annotations

from dataclasses import dataclass

from imagebridge.imaging.inspect import ImageInfo

__all__ = ["LoadedImage"]


@dataclass(frozen=True, slots=True)
class LoadedImage:
    """Verified image bytes plus what inspection proved, and the caller's logical name."""

    data: bytes
    info: ImageInfo
    filename: str | None = None

    def __repr__(self) -> str:  # never print image bytes
        return f"LoadedImage(info={self.info!r}, filename={self.filename!r})"
