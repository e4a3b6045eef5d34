"""``client.providers``, ``client.presets`` and ``client.sessions``: the bridge's catalogue."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from imagebridge.client._constants import MAX_PAGES
from imagebridge.client._exceptions import protocol_error
from imagebridge.client._params import json_bytes, query, validated
from imagebridge.client._request import RequestSpec, model_parser, no_content, path_segment
from imagebridge.client._resource import AsyncAPIResource, SyncAPIResource
from imagebridge.contract.capabilities import (
    ProviderCapabilities,
    ProviderDescriptor,
    ProviderPage,
)
from imagebridge.contract.presets import (
    ImagePreset,
    ImagePresetCreate,
    ImagePresetPage,
    ImagePresetTemplate,
    ImagePresetWrite,
)
from imagebridge.contract.response import SessionMetadata

__all__ = [
    "AsyncPresets",
    "AsyncProviders",
    "AsyncSessions",
    "Presets",
    "Providers",
    "Sessions",
]

TemplateLike = ImagePresetTemplate | Mapping[str, Any]


def _next_cursor(seen: set[str], cursor: str | None, what: str) -> str | None:
    if cursor is not None:
        if cursor in seen or len(seen) >= MAX_PAGES:
            raise protocol_error(f"the bridge's {what} pages do not end", pages=len(seen))
        seen.add(cursor)
    return cursor


# -- providers ---------------------------------------------------------------------------------


def providers_spec(
    limit: int | None, cursor: str | None, request_id: str | None
) -> RequestSpec[ProviderPage]:
    return RequestSpec(
        "GET",
        "/v1/providers",
        model_parser(ProviderPage, "provider page"),
        params=query(limit=limit, cursor=cursor),
        request_id=request_id,
    )


def capabilities_spec(
    provider: str, model: str | None, request_id: str | None
) -> RequestSpec[ProviderCapabilities]:
    return RequestSpec(
        "GET",
        f"/v1/providers/{path_segment(provider, 'provider')}/capabilities",
        model_parser(ProviderCapabilities, "capability document"),
        params=query(model=model),
        request_id=request_id,
    )


class Providers(SyncAPIResource):
    def list(
        self, *, limit: int | None = None, cursor: str | None = None, request_id: str | None = None
    ) -> ProviderPage:
        return self._transport.execute(providers_spec(limit, cursor, request_id))

    def iter(self, *, page_size: int = 100) -> Iterator[ProviderDescriptor]:
        """Every registered provider, sorted by name, across pages."""
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = self.list(limit=page_size, cursor=cursor)
            yield from page.items
            cursor = _next_cursor(seen, page.next_cursor, "provider")
            if cursor is None:
                return

    def capabilities(
        self, provider: str, *, model: str | None = None, request_id: str | None = None
    ) -> ProviderCapabilities:
        return self._transport.execute(capabilities_spec(provider, model, request_id))


class AsyncProviders(AsyncAPIResource):
    async def list(
        self, *, limit: int | None = None, cursor: str | None = None, request_id: str | None = None
    ) -> ProviderPage:
        return await self._transport.execute(providers_spec(limit, cursor, request_id))

    async def iter(self, *, page_size: int = 100) -> AsyncIterator[ProviderDescriptor]:
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = await self.list(limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            cursor = _next_cursor(seen, page.next_cursor, "provider")
            if cursor is None:
                return

    async def capabilities(
        self, provider: str, *, model: str | None = None, request_id: str | None = None
    ) -> ProviderCapabilities:
        return await self._transport.execute(capabilities_spec(provider, model, request_id))


# -- presets -----------------------------------------------------------------------------------


def presets_spec(
    limit: int | None, cursor: str | None, request_id: str | None
) -> RequestSpec[ImagePresetPage]:
    return RequestSpec(
        "GET",
        "/v1/presets",
        model_parser(ImagePresetPage, "preset page"),
        params=query(limit=limit, cursor=cursor),
        request_id=request_id,
    )


def preset_spec(method: str, name: str, request_id: str | None) -> RequestSpec[ImagePreset]:
    return RequestSpec(
        method,
        f"/v1/presets/{path_segment(name, 'name')}",
        model_parser(ImagePreset, "preset"),
        request_id=request_id,
    )


def create_preset_spec(
    name: str, template: TemplateLike, description: str | None, request_id: str | None
) -> RequestSpec[ImagePreset]:
    body = validated(
        ImagePresetCreate,
        {
            "name": name,
            "description": description,
            "template": validated(ImagePresetTemplate, template, "preset template"),
        },
        "preset",
    )
    return RequestSpec(
        "POST",
        "/v1/presets",
        model_parser(ImagePreset, "preset"),
        json_body=json_bytes(body),
        expected=frozenset({201}),
        request_id=request_id,
    )


def replace_preset_spec(
    name: str, template: TemplateLike, description: str | None, request_id: str | None
) -> RequestSpec[ImagePreset]:
    body = validated(
        ImagePresetWrite,
        {
            "description": description,
            "template": validated(ImagePresetTemplate, template, "preset template"),
        },
        "preset",
    )
    spec = preset_spec("PUT", name, request_id)
    spec.json_body = json_bytes(body)
    return spec


def delete_preset_spec(name: str, request_id: str | None) -> RequestSpec[None]:
    return RequestSpec(
        "DELETE",
        f"/v1/presets/{path_segment(name, 'name')}",
        no_content,
        expected=frozenset({204}),
        request_id=request_id,
    )


class Presets(SyncAPIResource):
    def list(
        self, *, limit: int | None = None, cursor: str | None = None, request_id: str | None = None
    ) -> ImagePresetPage:
        return self._transport.execute(presets_spec(limit, cursor, request_id))

    def iter(self, *, page_size: int = 100) -> Iterator[ImagePreset]:
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = self.list(limit=page_size, cursor=cursor)
            yield from page.items
            cursor = _next_cursor(seen, page.next_cursor, "preset")
            if cursor is None:
                return

    def get(self, name: str, *, request_id: str | None = None) -> ImagePreset:
        return self._transport.execute(preset_spec("GET", name, request_id))

    def create(
        self,
        name: str,
        template: TemplateLike,
        *,
        description: str | None = None,
        request_id: str | None = None,
    ) -> ImagePreset:
        """``POST /v1/presets`` (201); an existing name is ``idempotency_conflict`` (409)."""
        return self._transport.execute(create_preset_spec(name, template, description, request_id))

    def replace(
        self,
        name: str,
        template: TemplateLike,
        *,
        description: str | None = None,
        request_id: str | None = None,
    ) -> ImagePreset:
        """``PUT /v1/presets/{name}``: full replace (an omitted description is cleared)."""
        return self._transport.execute(replace_preset_spec(name, template, description, request_id))

    def delete(self, name: str, *, request_id: str | None = None) -> None:
        self._transport.execute(delete_preset_spec(name, request_id))


class AsyncPresets(AsyncAPIResource):
    async def list(
        self, *, limit: int | None = None, cursor: str | None = None, request_id: str | None = None
    ) -> ImagePresetPage:
        return await self._transport.execute(presets_spec(limit, cursor, request_id))

    async def iter(self, *, page_size: int = 100) -> AsyncIterator[ImagePreset]:
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = await self.list(limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            cursor = _next_cursor(seen, page.next_cursor, "preset")
            if cursor is None:
                return

    async def get(self, name: str, *, request_id: str | None = None) -> ImagePreset:
        return await self._transport.execute(preset_spec("GET", name, request_id))

    async def create(
        self,
        name: str,
        template: TemplateLike,
        *,
        description: str | None = None,
        request_id: str | None = None,
    ) -> ImagePreset:
        return await self._transport.execute(
            create_preset_spec(name, template, description, request_id)
        )

    async def replace(
        self,
        name: str,
        template: TemplateLike,
        *,
        description: str | None = None,
        request_id: str | None = None,
    ) -> ImagePreset:
        return await self._transport.execute(
            replace_preset_spec(name, template, description, request_id)
        )

    async def delete(self, name: str, *, request_id: str | None = None) -> None:
        await self._transport.execute(delete_preset_spec(name, request_id))


# -- sessions ----------------------------------------------------------------------------------


def session_spec(
    method: str, key: str, provider: str | None, request_id: str | None
) -> RequestSpec[SessionMetadata]:
    return RequestSpec(
        method,
        f"/v1/sessions/{path_segment(key, 'key')}",
        model_parser(SessionMetadata, "session"),
        params=query(provider=provider),
        request_id=request_id,
    )


def delete_session_spec(
    key: str, provider: str | None, request_id: str | None
) -> RequestSpec[None]:
    return RequestSpec(
        "DELETE",
        f"/v1/sessions/{path_segment(key, 'key')}",
        no_content,
        params=query(provider=provider),
        expected=frozenset({204}),
        request_id=request_id,
    )


class Sessions(SyncAPIResource):
    def get(
        self, key: str, *, provider: str | None = None, request_id: str | None = None
    ) -> SessionMetadata:
        """A persistent session binding (404 ``session`` when unknown)."""
        return self._transport.execute(session_spec("GET", key, provider, request_id))

    def delete(
        self, key: str, *, provider: str | None = None, request_id: str | None = None
    ) -> None:
        self._transport.execute(delete_session_spec(key, provider, request_id))


class AsyncSessions(AsyncAPIResource):
    async def get(
        self, key: str, *, provider: str | None = None, request_id: str | None = None
    ) -> SessionMetadata:
        return await self._transport.execute(session_spec("GET", key, provider, request_id))

    async def delete(
        self, key: str, *, provider: str | None = None, request_id: str | None = None
    ) -> None:
        await self._transport.execute(delete_session_spec(key, provider, request_id))
