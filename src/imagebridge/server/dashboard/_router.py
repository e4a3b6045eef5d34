"""``GET /dashboard``, ``/dashboard/`` and ``/dashboard/<asset>``: public, fixed headers.

The assets are read once, when this module is imported (while the app is built, never on
the event loop), and served from memory. Every file shipped in ``static/`` is an asset
(its media type from its extension); anything else under ``/dashboard/`` answers like any
unknown path. The page carries this bridge's request limits in a ``<meta>`` element, so
the composer counts against the configured values rather than copies in JavaScript. The
router is mounted only when durable jobs are enabled, because every submission the page
makes is a job.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from types import MappingProxyType

from starlette.requests import Request
from starlette.responses import Response

from imagebridge.config.model import BridgeConfig
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.server.routes import public_router
from imagebridge.server.state import bridge_state

__all__ = ["ASSET_MEDIA_TYPES", "COMMON_HEADERS", "PAGE_HEADERS", "page_limits", "router"]

PAGE = "index.html"
PAGE_MEDIA_TYPE = "text/html; charset=utf-8"
LIMITS_PLACEHOLDER = b'<meta name="imagebridge-limits" content="">'
"""The element in ``index.html`` that each served page fills with :func:`page_limits`."""

_MEDIA_TYPES: Mapping[str, str] = MappingProxyType(
    {
        ".css": "text/css; charset=utf-8",
        ".js": "text/javascript; charset=utf-8",
        ".png": "image/png",
    }
)


def _folder() -> Traversable:
    return resources.files(__package__ or "imagebridge.server.dashboard").joinpath("static")


def _asset_names() -> dict[str, str]:
    """Every shipped file but the page, with its media type; an unknown extension is a bug."""
    found: dict[str, str] = {}
    for entry in sorted(_folder().iterdir(), key=lambda item: item.name):
        if not entry.is_file() or entry.name == PAGE:
            continue
        extension = entry.name[entry.name.rfind(".") :]
        if extension not in _MEDIA_TYPES:
            raise BridgeError(
                ErrorCode.INTERNAL,
                "a dashboard asset has no known media type",
                details={"asset": entry.name},
            )
        found[entry.name] = _MEDIA_TYPES[extension]
    return found


ASSET_MEDIA_TYPES: Mapping[str, str] = MappingProxyType(_asset_names())
"""Every asset the page loads, by its name under ``/dashboard/``."""

COMMON_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "cache-control": "no-store, max-age=0",
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cross-origin-resource-policy": "same-origin",
    }
)
"""Headers on every dashboard answer."""

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
    folder = _folder()
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
if _CONTENT[PAGE].count(LIMITS_PLACEHOLDER) != 1:
    raise BridgeError(
        ErrorCode.INTERNAL,
        "the dashboard page has no place for the bridge's limits",
        details={"asset": PAGE},
    )

router = public_router(tags=["dashboard"], include_in_schema=False)


def page_limits(config: BridgeConfig) -> dict[str, int]:
    """The configured bounds the composer checks and counts against, by the page's names,
    and whether named API keys are on (``api_keys``: 1 or 0; the Team view asks the admin
    API only then)."""
    request = config.runtime.request
    return {
        "prompt_bytes": request.max_prompt_bytes,
        "negative_prompt_bytes": request.max_negative_prompt_bytes,
        "identifier_bytes": request.max_identifier_bytes,
        "inputs": request.max_inputs,
        "outputs": request.max_outputs,
        "timeout_ms": request.max_timeout_ms,
        "body_bytes": config.server.max_body_bytes,
        "api_keys": int(config.server.keys.enabled),
    }


def _render_page(config: BridgeConfig) -> bytes:
    encoded = json.dumps(page_limits(config), separators=(",", ":"), sort_keys=True)
    element = f'<meta name="imagebridge-limits" content="{html.escape(encoded)}">'
    return _CONTENT[PAGE].replace(LIMITS_PLACEHOLDER, element.encode("utf-8"))


async def _page(request: Request) -> Response:
    body = _render_page(bridge_state(request).config)
    return Response(body, media_type=PAGE_MEDIA_TYPE, headers=dict(PAGE_HEADERS))


def _asset_route(name: str, media_type: str) -> None:
    """One explicit route per asset: other names under ``/dashboard/`` stay unknown (404)."""

    async def asset() -> Response:
        return Response(_CONTENT[name], media_type=media_type, headers=dict(COMMON_HEADERS))

    router.add_api_route(f"/dashboard/{name}", asset, methods=["GET", "HEAD"])


router.add_api_route("/dashboard", _page, methods=["GET", "HEAD"])
router.add_api_route("/dashboard/", _page, methods=["GET", "HEAD"])
for _name, _media_type in ASSET_MEDIA_TYPES.items():
    _asset_route(_name, _media_type)
