"""Tool results: a short text for the model, structured data for programs, small previews.

A generation answers with one text block (paths, sizes, revised prompt, warnings), one
resource link per image (``imagebridge://artifacts/<id>.<ext>``, readable through this
server), PNG thumbnails no larger than :attr:`McpSettings.preview_edge` and — only when
the caller sets ``include_image`` — the full images, within
:attr:`McpSettings.max_inline_bytes`. Failures become ``isError`` results carrying the
bridge's code, message, validation issues and suggestions.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any

from mcp_types import CallToolResult, ContentBlock, ImageContent, ResourceLink, TextContent

from imagebridge.artifacts.filesystem.store import ArtifactStore
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.mcp.backend import Generation, SavedImage
from imagebridge.mcp.settings import LOCAL_OWNER, McpSettings

__all__ = [
    "ARTIFACT_URI",
    "artifact_uri",
    "error_result",
    "generation_result",
    "internal_error",
    "json_result",
]

logger = logging.getLogger("imagebridge.mcp")

ARTIFACT_URI = "imagebridge://artifacts/"
_MAX_LISTED_ISSUES = 20


def artifact_uri(artifact_id: str, extension: str) -> str:
    return f"{ARTIFACT_URI}{artifact_id}.{extension}"


def _image_record(image: SavedImage) -> dict[str, Any]:
    return {
        "index": image.index,
        "id": image.id,
        "name": image.name,
        "path": str(image.path),
        "uri": artifact_uri(image.id, image.format.extension),
        "format": image.format.value,
        "width": image.width,
        "height": image.height,
        "bytes": image.bytes,
        "sha256": image.sha256,
    }


def _summary(generation: Generation) -> str:
    response = generation.response
    count = len(generation.images)
    noun = "image" if count == 1 else "images"
    lines = [f"Generated {count} {noun} with {response.provider} ({response.model}):"]
    for image in generation.images:
        lines.append(
            f"{image.index + 1}. {image.path} ({image.width}x{image.height} "
            f"{image.format.value}, artifact {image.id})"
        )
    for failure in response.failures:
        lines.append(f"Output {failure.index + 1} failed: {failure.error.message}")
    if response.revised_prompt:
        lines.append(f"Revised prompt: {response.revised_prompt}")
    if response.warnings:
        lines.append("Warnings: " + ", ".join(response.warnings))
    return "\n".join(lines)


async def _thumbnail(store: ArtifactStore, image: SavedImage, edge: int) -> ImageContent | None:
    try:
        data = await asyncio.to_thread(store.thumbnail, image.id, LOCAL_OWNER, edge)
    except BridgeError as error:  # a preview is a courtesy: the file is what matters
        logger.warning("preview failed", extra={"code": error.code.value})
        return None
    encoded = await asyncio.to_thread(base64.b64encode, data)
    return ImageContent(type="image", data=encoded.decode("ascii"), mime_type="image/png")


async def _full_images(
    store: ArtifactStore, images: list[SavedImage], budget: int
) -> tuple[list[ImageContent], int]:
    blocks: list[ImageContent] = []
    skipped = 0
    for image in images:
        if image.bytes > budget:
            skipped += 1
            continue
        content = await asyncio.to_thread(store.read, image.id, LOCAL_OWNER)
        budget -= len(content.data)
        encoded = await asyncio.to_thread(base64.b64encode, content.data)
        blocks.append(
            ImageContent(
                type="image", data=encoded.decode("ascii"), mime_type=image.format.media_type
            )
        )
    return blocks, skipped


async def generation_result(
    generation: Generation,
    store: ArtifactStore,
    settings: McpSettings,
    *,
    preview: bool,
    include_image: bool,
) -> CallToolResult:
    response = generation.response
    text = _summary(generation)
    content: list[ContentBlock] = []
    for image in generation.images:
        content.append(
            ResourceLink(
                type="resource_link",
                name=image.name,
                uri=artifact_uri(image.id, image.format.extension),
                mime_type=image.format.media_type,
                size=image.bytes,
                description=str(image.path),
            )
        )
    if include_image:
        blocks, skipped = await _full_images(store, generation.images, settings.max_inline_bytes)
        content.extend(blocks)
        if skipped:
            text += (
                f"\n{skipped} image(s) too large to embed "
                f"(limit {settings.max_inline_bytes} bytes): open the paths instead."
            )
    elif preview:
        for image in generation.images[: settings.max_previews]:
            thumbnail = await _thumbnail(store, image, settings.preview_edge)
            if thumbnail is not None:
                content.append(thumbnail)
    structured: dict[str, Any] = {
        "id": response.id,
        "provider": response.provider,
        "model": response.model,
        "images": [_image_record(image) for image in generation.images],
        "warnings": list(response.warnings),
    }
    if response.revised_prompt is not None:
        structured["revised_prompt"] = response.revised_prompt
    if response.normalizations:
        structured["normalizations"] = [n.model_dump(mode="json") for n in response.normalizations]
    if response.failures:
        structured["failures"] = [f.model_dump(mode="json") for f in response.failures]
    return CallToolResult(
        content=[TextContent(type="text", text=text), *content],
        structured_content=structured,
    )


def json_result(summary: str, data: dict[str, Any]) -> CallToolResult:
    """A read-only tool's answer: a one-line summary plus the data, as JSON text too."""
    body = json.dumps(data, indent=2, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=f"{summary}\n{body}")],
        structured_content=data,
    )


def error_result(error: BridgeError) -> CallToolResult:
    """A failure the model can act on: code, message, failing fields, suggestions."""
    lines = [f"Error ({error.code.value}): {error.message}"]
    issues = error.details.get("issues")
    if isinstance(issues, list):
        for issue in issues[:_MAX_LISTED_ISSUES]:
            if isinstance(issue, dict):
                lines.append(
                    f"- {issue.get('field')}: {issue.get('message')} ({issue.get('code')})"
                )
    fields = error.details.get("fields")
    if isinstance(fields, list) and fields:
        lines.append("Invalid arguments: " + ", ".join(str(field) for field in fields))
    if error.field:
        lines.append(f"Field: {error.field}")
    if error.outcome_unknown:
        lines.append("The provider may have run: check before retrying.")
    elif error.retryable:
        lines.append("This error is temporary; retrying later may succeed.")
    if error.suggestions:
        lines.append("Suggestions:")
        lines.extend(f"- {suggestion}" for suggestion in error.suggestions)
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))],
        structured_content={"error": error.to_dict()},
        is_error=True,
    )


def internal_error() -> BridgeError:
    return BridgeError(ErrorCode.INTERNAL, "the MCP server failed unexpectedly")
