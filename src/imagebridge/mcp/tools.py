"""The MCP tools and the artifact resources, registered on an :class:`MCPServer`.

Every tool validates its arguments with the v1 contract (:class:`ImageRequest` and
:func:`validate_request`, the same checks as ``POST /v1/images``), and every failure —
a bad argument, a provider refusal, an unexpected bug — comes back as an ``isError``
result with the bridge's message and suggestions; the server itself never fails a call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field, ValidationError

from imagebridge.artifacts.rules import not_found
from imagebridge.contract.enums import ImageJobStatus, OutputFormat, ResponseFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.jobs import ImageJob
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.validation import validate_request
from imagebridge.mcp.backend import Backend, JobFilter
from imagebridge.mcp.inputs import describe_inputs, inline_file_inputs
from imagebridge.mcp.progress import ProgressRelay
from imagebridge.mcp.results import (
    artifact_uri,
    error_result,
    generation_result,
    internal_error,
    json_result,
)
from imagebridge.mcp.settings import LOCAL_OWNER, McpSettings

__all__ = ["TOOL_NAMES", "build_request", "register_tools"]

logger = logging.getLogger("imagebridge.mcp")

TOOL_NAMES = (
    "generate_image",
    "edit_image",
    "apply_preset",
    "list_providers",
    "get_capabilities",
    "get_job",
    "list_jobs",
)
_MAX_FIELDS_LISTED = 20
_INLINE_KEYS = ("data", "data_url")

Prompt = Annotated[str, Field(description="What the image should show.")]
Count = Annotated[int | None, Field(description="Number of images (default 1).")]
Size = Annotated[
    str | None, Field(description='"auto" (default) or WIDTHxHEIGHT, e.g. "1024x1024".')
]
AspectRatio = Annotated[str | None, Field(description='Aspect ratio hint "W:H", e.g. "16:9".')]
Resolution = Annotated[str | None, Field(description='Resolution hint: "1k", "2k" or "4k".')]
Quality = Annotated[str | None, Field(description='"auto" (default), "low", "medium" or "high".')]
Format = Annotated[str | None, Field(description='"png" (default), "jpeg" or "webp".')]
Compression = Annotated[int | None, Field(description="0-100, for jpeg and webp output only.")]
Background = Annotated[
    str | None, Field(description='"auto" (default), "opaque" or "transparent".')
]
Moderation = Annotated[str | None, Field(description='"auto" (default) or "low".')]
Negative = Annotated[str | None, Field(description="What the image must not show.")]
ImageList = Annotated[
    list[str] | None,
    Field(
        description=(
            "Images as local file paths (inside the bridge's inputs.local_roots) "
            "or data URLs (data:image/png;base64,...)."
        )
    ),
]
Provider = Annotated[str | None, Field(description="Provider name (see list_providers).")]
Model = Annotated[str | None, Field(description="Model of the provider (see get_capabilities).")]
Compatibility = Annotated[
    str | None,
    Field(
        description=(
            '"strict" (default: unsupported values fail), "normalize" or "best_effort" '
            "(the bridge adapts values the provider does not support)."
        )
    ),
]
SessionKey = Annotated[
    str | None, Field(description="Persistent session key, for providers that keep sessions.")
]
Prefix = Annotated[str | None, Field(description="File name prefix of the saved images.")]
Directory = Annotated[
    str | None, Field(description="Relative directory inside the artifact root to save into.")
]
Filename = Annotated[str | None, Field(description="Exact file name (only with one image).")]
TimeoutMs = Annotated[int | None, Field(description="Deadline in milliseconds.")]
IncludeImage = Annotated[
    bool,
    Field(description="Also return the full images as base64 (large). Default: paths only."),
]
Preview = Annotated[bool, Field(description="Return small thumbnail previews (default true).")]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
GENERATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)


def _field_path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path or "$"


def build_request(data: dict[str, Any]) -> ImageRequest:
    """Decode tool arguments as an ``ImageRequest``; failures name fields, never values."""
    try:
        return ImageRequest.model_validate(data)
    except ValidationError as exc:
        fields = sorted({_field_path(tuple(error["loc"])) for error in exc.errors()})
        raise BridgeError(
            ErrorCode.INVALID_REQUEST,
            "the arguments do not form a valid image request",
            details={"fields": fields[:_MAX_FIELDS_LISTED]},
            suggestions=[
                "Check the listed arguments against the tool's description "
                '(size is "auto" or WIDTHxHEIGHT, aspect_ratio is W:H).'
            ],
        ) from None


def request_data(
    prompt: str,
    operation: str,
    *,
    parameters: dict[str, Any],
    negative_prompt: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    compatibility: str | None = None,
    session_key: str | None = None,
    filename_prefix: str | None = None,
    directory: str | None = None,
    filename: str | None = None,
    timeout_ms: int | None = None,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON shape of the request the tool arguments describe (artifact delivery)."""
    output: dict[str, Any] = {"response_format": ResponseFormat.ARTIFACT.value}
    for key, value in (
        ("filename_prefix", filename_prefix),
        ("directory", directory),
        ("filename", filename),
    ):
        if value is not None:
            output[key] = value
    data: dict[str, Any] = {
        "prompt": prompt,
        "operation": operation,
        "parameters": {key: value for key, value in parameters.items() if value is not None},
        "output": output,
    }
    routing = {key: value for key, value in (("provider", provider), ("model", model)) if value}
    if routing:
        data["routing"] = routing
    if compatibility is not None:
        data["policies"] = {"compatibility": compatibility}
    if session_key is not None:
        data["session"] = {"mode": "persistent", "key": session_key}
    if negative_prompt is not None:
        data["negative_prompt"] = negative_prompt
    if timeout_ms is not None:
        data["timeout_ms"] = timeout_ms
    data.update(inputs or {})
    return data


def _redacted_request(job: ImageJob) -> dict[str, Any]:
    """A job as JSON with inline image payloads replaced by their size."""
    data = job.model_dump(mode="json")
    request = data.get("request", {})
    for key in ("images", "reference_images", "mask"):
        value = request.get(key)
        items = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
        for item in items:
            for payload in _INLINE_KEYS:
                if isinstance(item.get(payload), str):
                    item[payload] = f"(inline image, {len(item[payload])} characters)"
    return data


class _Tools:
    """The tool bodies, bound to one backend."""

    def __init__(self, backend: Backend, settings: McpSettings) -> None:
        self.backend = backend
        self.settings = settings

    async def guard(self, work: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
        try:
            return await work()
        except BridgeError as error:
            return error_result(error)
        except Exception:
            logger.exception("MCP tool failed unexpectedly")
            return error_result(internal_error())

    async def run(
        self, data: dict[str, Any], ctx: Context[Any, Any], *, preview: bool, include_image: bool
    ) -> CallToolResult:
        request = build_request(data)
        validate_request(request, self.backend.limits)
        request = await inline_file_inputs(request, self.backend.inputs)
        relay = ProgressRelay(ctx.report_progress, heartbeat_s=self.settings.heartbeat_s)
        async with relay.running():
            generation = await self.backend.generate(request, relay.on_event)
        return await generation_result(
            generation,
            self.backend.store,
            self.settings,
            preview=preview,
            include_image=include_image,
        )

    def job_artifacts(self, job: ImageJob) -> list[dict[str, Any]]:
        if job.result is None:
            return []
        records: list[dict[str, Any]] = []
        for item in job.result.data:
            if item.id is None:
                continue
            record: dict[str, Any] = {"index": item.index, "id": item.id, "name": item.name}
            url = self.backend.artifact_url(item.id)
            if url is not None:
                record["url"] = url
            else:
                record["uri"] = artifact_uri(item.id, OutputFormat(item.format).extension)
                try:
                    record["path"] = str(self.backend.store.local_path(item.id, LOCAL_OWNER))
                except BridgeError:
                    record["path"] = None
            records.append(record)
        return records


def register_tools(server: MCPServer[Any], backend: Backend, settings: McpSettings) -> None:
    """Add the image tools and the ``imagebridge://artifacts/…`` resources to ``server``."""
    tools = _Tools(backend, settings)

    @server.tool(annotations=GENERATES)
    async def generate_image(
        prompt: Prompt,
        ctx: Context[Any, Any],
        n: Count = None,
        size: Size = None,
        aspect_ratio: AspectRatio = None,
        resolution: Resolution = None,
        quality: Quality = None,
        output_format: Format = None,
        output_compression: Compression = None,
        background: Background = None,
        moderation: Moderation = None,
        negative_prompt: Negative = None,
        reference_images: ImageList = None,
        provider: Provider = None,
        model: Model = None,
        compatibility: Compatibility = None,
        session_key: SessionKey = None,
        filename_prefix: Prefix = None,
        directory: Directory = None,
        filename: Filename = None,
        timeout_ms: TimeoutMs = None,
        include_image: IncludeImage = False,
        preview: Preview = True,
    ) -> CallToolResult:
        """Generate images from a prompt and save them as files.

        Returns each image's absolute path, artifact id and name, plus small previews.
        """

        async def work() -> CallToolResult:
            data = request_data(
                prompt,
                "generate",
                parameters={
                    "n": n,
                    "size": size,
                    "aspect_ratio": aspect_ratio,
                    "resolution": resolution,
                    "quality": quality,
                    "output_format": output_format,
                    "output_compression": output_compression,
                    "background": background,
                    "moderation": moderation,
                },
                negative_prompt=negative_prompt,
                provider=provider,
                model=model,
                compatibility=compatibility,
                session_key=session_key,
                filename_prefix=filename_prefix,
                directory=directory,
                filename=filename,
                timeout_ms=timeout_ms,
                inputs=describe_inputs(None, None, reference_images),
            )
            return await tools.run(data, ctx, preview=preview, include_image=include_image)

        return await tools.guard(work)

    @server.tool(annotations=GENERATES)
    async def edit_image(
        prompt: Prompt,
        images: Annotated[
            list[str],
            Field(description="Images to edit: local file paths or data URLs."),
        ],
        ctx: Context[Any, Any],
        mask: Annotated[
            str | None, Field(description="Optional mask image (path or data URL).")
        ] = None,
        reference_images: ImageList = None,
        n: Count = None,
        size: Size = None,
        quality: Quality = None,
        output_format: Format = None,
        output_compression: Compression = None,
        background: Background = None,
        moderation: Moderation = None,
        input_fidelity: Annotated[
            str | None, Field(description='"low" or "high" fidelity to the input images.')
        ] = None,
        negative_prompt: Negative = None,
        provider: Provider = None,
        model: Model = None,
        compatibility: Compatibility = None,
        session_key: SessionKey = None,
        filename_prefix: Prefix = None,
        directory: Directory = None,
        filename: Filename = None,
        timeout_ms: TimeoutMs = None,
        include_image: IncludeImage = False,
        preview: Preview = True,
    ) -> CallToolResult:
        """Edit images following a prompt and save the results as files."""

        async def work() -> CallToolResult:
            data = request_data(
                prompt,
                "edit",
                parameters={
                    "n": n,
                    "size": size,
                    "quality": quality,
                    "output_format": output_format,
                    "output_compression": output_compression,
                    "background": background,
                    "moderation": moderation,
                    "input_fidelity": input_fidelity,
                },
                negative_prompt=negative_prompt,
                provider=provider,
                model=model,
                compatibility=compatibility,
                session_key=session_key,
                filename_prefix=filename_prefix,
                directory=directory,
                filename=filename,
                timeout_ms=timeout_ms,
                inputs=describe_inputs(images, mask, reference_images),
            )
            return await tools.run(data, ctx, preview=preview, include_image=include_image)

        return await tools.guard(work)

    @server.tool(annotations=GENERATES)
    async def apply_preset(
        name: Annotated[str, Field(description="Name of a stored preset.")],
        ctx: Context[Any, Any],
        prompt: Annotated[
            str | None, Field(description="Prompt to use instead of the preset's own.")
        ] = None,
        images: Annotated[
            list[str] | None,
            Field(description="Images for an edit preset: local file paths or data URLs."),
        ] = None,
        include_image: IncludeImage = False,
        preview: Preview = True,
    ) -> CallToolResult:
        """Generate (or edit) with a stored preset, optionally overriding its prompt."""

        async def work() -> CallToolResult:
            preset = await backend.preset(name)
            request = preset.template.request(prompt)  # prompt rules: caller's, else stored
            data = request.model_dump(mode="json")
            output = dict(data.get("output") or {})
            output["response_format"] = ResponseFormat.ARTIFACT.value
            data["output"] = output
            if request.images is not None or images is not None:
                data.update(describe_inputs(images or [], None, None))
            return await tools.run(data, ctx, preview=preview, include_image=include_image)

        return await tools.guard(work)

    @server.tool(annotations=READ_ONLY)
    async def list_providers() -> CallToolResult:
        """List the registered image providers and their models."""

        async def work() -> CallToolResult:
            items = await backend.providers()
            names = ", ".join(item.name for item in items) or "none"
            return json_result(
                f"Providers: {names}",
                {"providers": [item.model_dump(mode="json") for item in items]},
            )

        return await tools.guard(work)

    @server.tool(annotations=READ_ONLY)
    async def get_capabilities(
        provider: Annotated[
            str | None, Field(description="Provider name (default: the bridge's default).")
        ] = None,
        model: Model = None,
    ) -> CallToolResult:
        """What a provider supports: sizes, counts, formats, qualities, edits, sessions."""

        async def work() -> CallToolResult:
            capabilities = await backend.capabilities(provider, model)
            return json_result(
                f"Capabilities of {capabilities.provider}", capabilities.model_dump(mode="json")
            )

        return await tools.guard(work)

    @server.tool(annotations=READ_ONLY)
    async def get_job(
        job_id: Annotated[str, Field(description="Durable job id.")],
    ) -> CallToolResult:
        """A durable job's status, request, result artifacts or error."""

        async def work() -> CallToolResult:
            job = await backend.get_job(job_id)
            data = _redacted_request(job)
            data["artifacts"] = tools.job_artifacts(job)
            return json_result(f"Job {job.id}: {job.status.value}", data)

        return await tools.guard(work)

    @server.tool(annotations=READ_ONLY)
    async def list_jobs(
        limit: Annotated[int, Field(description="Jobs per page (1-100).")] = 20,
        cursor: Annotated[str | None, Field(description="next_cursor of a previous page.")] = None,
        status: Annotated[
            str | None,
            Field(description="queued, running, succeeded, failed, cancelled or interrupted."),
        ] = None,
        search: Annotated[
            str | None, Field(description="Case-insensitive text in the prompt.")
        ] = None,
    ) -> CallToolResult:
        """Recent durable jobs, newest first."""

        async def work() -> CallToolResult:
            if not 1 <= limit <= settings.max_job_page:
                raise BridgeError.invalid_request(
                    f"limit must be between 1 and {settings.max_job_page}", field="limit"
                )
            try:
                wanted = ImageJobStatus(status) if status is not None else None
            except ValueError:
                raise BridgeError.invalid_request(
                    "status is not a job status", field="status"
                ) from None
            page = await backend.list_jobs(
                JobFilter(limit=limit, cursor=cursor, status=wanted, search=search)
            )
            data = page.model_dump(mode="json")
            return json_result(f"{len(page.items)} job(s)", data)

        return await tools.guard(work)

    for output_format in OutputFormat:
        _register_artifact_resource(server, backend, output_format)


def _register_artifact_resource(
    server: MCPServer[Any], backend: Backend, output_format: OutputFormat
) -> None:
    import asyncio

    @server.resource(
        f"imagebridge://artifacts/{{artifact_id}}.{output_format.extension}",
        name=f"artifact-{output_format.value}",
        description=f"A generated {output_format.value} image from the artifact store.",
        mime_type=output_format.media_type,
    )
    async def artifact(artifact_id: str) -> bytes:
        content = await asyncio.to_thread(backend.store.read, artifact_id, LOCAL_OWNER)
        if content.info.format is not output_format:
            raise not_found()
        return content.data
