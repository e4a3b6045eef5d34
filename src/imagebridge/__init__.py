"""imagebridge: image generation from your own Codex/ChatGPT login, behind one API."""

from imagebridge._version import __version__

__all__ = ["__version__"]
