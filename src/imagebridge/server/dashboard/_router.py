"""``GET /dashboard``, ``/dashboard/`` and ``/dashboard/<asset>``: public, fixed headers.

The assets are read once, when this module is imported (while the app is built, never on
the event loop), and served from memory. Only the listed names exist; anything else
under ``/dashboard/`` answers like any unknown path. The router is mounted only when
durable jobs are enabled, because every submission the page makes is a job.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

from starlette.responses import Response

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.server.routes import public_router

__all__ = ["ASSET_MEDIA_TYPES", "COMMON_HEADERS", "PAGE_HEADERS", "router"]

PAGE = "index.html"
PAGE_MEDIA_TYPE = "text/html; charset=utf-8"

ASSET_MEDIA_TYPES: Mapping[str, str] = MappingProxyType(
    {
        "app.css": "text/css; charset=utf-8",
        "app.js": "text/javascript; charset=utf-8",
        "api.js": "text/javascript; charset=utf-8",
        "form.js": "text/javascript; charset=utf-8",
        "icon.png": "image/png",
    }
)
"""Every asset the page loads, by its name under ``/dashboard/``."""

COMMON_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "cache-control": "no-store, max-age=0",
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cross-origin-resource-policy": "same-origin",
    }
)
"""Headers on every dashboard answer (api.md §11)."""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)

PAGE_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        **COMMON_HEADERS,
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-frame-options": "DENY",
        "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
    }
)
"""The page's headers: the common set plus CSP, frame denial and a Permissions-Policy."""


def _load(names: list[str]) -> dict[str, bytes]:
    folder = resources.files(__package__ or "imagebridge.server.dashboard").joinpath("static")
    loaded: dict[str, bytes] = {}
    for name in names:
        try:
            loaded[name] = folder.joinpath(name).read_bytes()
        except OSError:
            raise BridgeError(
                ErrorCode.INTERNAL,
                "a dashboard asset is missing from the installation",
                details={"asset": name},
                suggestions=["Reinstall imagebridge; its package data is incomplete."],
            ) from None
    return loaded


_CONTENT = _load([PAGE, *ASSET_MEDIA_TYPES])

router = public_router(tags=["dashboard"], include_in_schema=False)


async def _page() -> Response:
    return Response(_CONTENT[PAGE], media_type=PAGE_MEDIA_TYPE, headers=dict(PAGE_HEADERS))


def _asset_route(name: str, media_type: str) -> None:
    """One explicit route per asset: other names under ``/dashboard/`` stay unknown (404)."""

    async def asset() -> Response:
        return Response(_CONTENT[name], media_type=media_type, headers=dict(COMMON_HEADERS))

    router.add_api_route(f"/dashboard/{name}", asset, methods=["GET", "HEAD"])


router.add_api_route("/dashboard", _page, methods=["GET", "HEAD"])
router.add_api_route("/dashboard/", _page, methods=["GET", "HEAD"])
for _name, _media_type in ASSET_MEDIA_TYPES.items():
    _asset_route(_name, _media_type)
