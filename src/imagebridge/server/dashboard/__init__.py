"""The embedded dashboard: a static page shipped inside the package.

The page is plain HTML, CSS and ES modules: no build step, no runtime dependency, no
inline script or style, so the strict Content-Security-Policy (docs/dashboard.md) holds. It
talks to the same protected ``/v1`` routes as any client; only the assets are public.
"""

from imagebridge.server.dashboard._router import (
    ASSET_MEDIA_TYPES,
    COMMON_HEADERS,
    PAGE_HEADERS,
    router,
)

__all__ = ["ASSET_MEDIA_TYPES", "COMMON_HEADERS", "PAGE_HEADERS", "router"]
