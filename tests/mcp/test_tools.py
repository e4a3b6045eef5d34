"""The MCP tools over the in-process engine, through an in-memory MCP client session."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from mcp_types import ImageContent, ResourceLink, TextContent

from imagebridge.application import request_limits
from imagebridge.contract.presets import ImagePresetCreate
from imagebridge.jobs import PresetService
from imagebridge.mcp import TOOL_NAMES, McpSettings
from imagebridge.storage import open_preset_store
from tests.mcp.conftest import Progress, Workspace, connected, decode
from tests.support.images import png_bytes, png_data_url


def text(result: object) -> str:
    content = result.content  # type: ignore[attr-defined]
    assert isinstance(content[0], TextContent)
    return content[0].text


def links(result: object) -> list[ResourceLink]:
    return [c for c in result.content if isinstance(c, ResourceLink)]  # type: ignore[attr-defined]


def images(result: object) -> list[ImageContent]:
    return [c for c in result.content if isinstance(c, ImageContent)]  # type: ignore[attr-defined]


async def test_the_tools_are_listed_with_descriptions(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        listed = await session.client.list_tools()
        assert [tool.name for tool in listed.tools] == list(TOOL_NAMES)
        generate = next(tool for tool in listed.tools if tool.name == "generate_image")
        assert generate.description
        assert generate.input_schema["required"] == ["prompt"]
        assert "include_image" in generate.input_schema["properties"]
        assert "ctx" not in generate.input_schema["properties"]
        edit = next(tool for tool in listed.tools if tool.name == "edit_image")
        assert edit.input_schema["required"] == ["prompt", "images"]


async def test_generate_saves_files_and_returns_paths_links_and_small_previews(
    workspace: Workspace,
) -> None:
    async with connected(workspace) as session:
        progress = Progress()
        result = await session.call(
            "generate_image", {"prompt": "a fox", "n": 2, "size": "400x300"}, progress
        )
        assert result.is_error is False
        records = result.structured_content["images"]
        assert [record["index"] for record in records] == [0, 1]
        for record, link in zip(records, links(result), strict=True):
            path = Path(record["path"])
            assert path.is_absolute() and path.is_file()
            assert path.is_relative_to(workspace.config.artifacts.root)
            assert record["name"] == path.relative_to(workspace.config.artifacts.root).as_posix()
            assert decode(path.read_bytes()).size == (400, 300)
            assert hashlib.sha256(path.read_bytes()).hexdigest() == record["sha256"]
            assert link.uri == record["uri"] == f"imagebridge://artifacts/{record['id']}.png"
            assert record["path"] in text(result)
        previews = images(result)
        assert len(previews) == 2
        for preview in previews:
            thumbnail = decode(base64.b64decode(preview.data))
            assert preview.mime_type == "image/png"
            assert max(thumbnail.size) <= 256
        assert progress.messages[0] == "started"
        assert progress.messages[-1] == "completed"
        assert [p for p, _, _ in progress.events] == sorted({p for p, _, _ in progress.events})


async def test_include_image_embeds_the_full_images(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        result = await session.call(
            "generate_image", {"prompt": "a fox", "size": "300x200", "include_image": True}
        )
        [full] = images(result)
        path = Path(result.structured_content["images"][0]["path"])
        assert base64.b64decode(full.data) == path.read_bytes()


async def test_previews_can_be_turned_off_and_are_capped(workspace: Workspace) -> None:
    async with connected(workspace, settings=McpSettings(max_previews=1)) as session:
        capped = await session.call("generate_image", {"prompt": "fox", "n": 3, "size": "64x64"})
        assert len(images(capped)) == 1
        assert len(links(capped)) == 3
        none = await session.call(
            "generate_image", {"prompt": "fox", "size": "64x64", "preview": False}
        )
        assert images(none) == []


async def test_full_images_beyond_the_inline_budget_are_listed_not_embedded(
    workspace: Workspace,
) -> None:
    async with connected(workspace, settings=McpSettings(max_inline_bytes=10)) as session:
        result = await session.call(
            "generate_image", {"prompt": "fox", "size": "64x64", "include_image": True}
        )
    assert images(result) == []
    assert "too large to embed" in text(result)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"size": "1024X1024"}, "parameters.size"),
        ({"size": "99999x10"}, "parameters.size: size edges must not exceed"),
        ({"n": 0}, "parameters.n"),
        ({"quality": "ultra"}, "parameters.quality"),
        ({"filename": "a.png", "n": 2}, "output.filename"),
        ({"output_compression": 80}, "parameters.output_compression"),
    ],
)
async def test_invalid_arguments_are_tool_errors_with_suggestions(
    workspace: Workspace, arguments: dict[str, object], fragment: str
) -> None:
    async with connected(workspace) as session:
        result = await session.call("generate_image", {"prompt": "a secret fox", **arguments})
        assert result.is_error is True
        message = text(result)
        assert message.startswith("Error (invalid_request)")
        assert fragment in message
        assert "Suggestions:" in message
        assert result.structured_content["error"]["code"] == "invalid_request"
        assert "a secret fox" not in message


async def test_provider_failures_are_tool_errors(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        result = await session.call("generate_image", {"prompt": "[mock:fail=safety_rejected] fox"})
        assert result.is_error is True
        assert text(result).startswith("Error (safety_rejected)")
        overloaded = await session.call("generate_image", {"prompt": "[mock:fail=overloaded] fox"})
        assert "temporary" in text(overloaded)


async def test_the_server_survives_arguments_of_the_wrong_type(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        result = await session.call("generate_image", {"prompt": "fox", "n": "many"})
        assert result.is_error is True
        again = await session.call("list_providers", {})
        assert again.is_error is False


async def test_edit_reads_local_files_inside_the_allowed_roots(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        source = workspace.inputs / "photo.png"
        source.write_bytes(png_bytes(48, 24, "blue"))
        by_path = await session.call(
            "edit_image", {"prompt": "make it green", "images": [str(source)], "size": "48x24"}
        )
        assert by_path.is_error is False, text(by_path)
        relative = await session.call(
            "edit_image", {"prompt": "again", "images": ["photo.png"], "size": "48x24"}
        )
        assert relative.is_error is False, text(relative)
        data_url = png_data_url(20, 10)
        inline = await session.call(
            "edit_image", {"prompt": "inline", "images": [data_url], "size": "20x10"}
        )
        assert inline.is_error is False, text(inline)
        file_url = await session.call(
            "edit_image", {"prompt": "url", "images": [source.as_uri()], "size": "48x24"}
        )
        assert file_url.is_error is False, text(file_url)


async def test_edit_refuses_files_outside_the_roots(workspace: Workspace, tmp_path: Path) -> None:
    async with connected(workspace) as session:
        outside = tmp_path / "outside.png"
        outside.write_bytes(png_bytes(16, 16, "red"))
        for path in (str(outside), "../outside.png", str(workspace.inputs / "missing.png")):
            result = await session.call("edit_image", {"prompt": "x", "images": [path]})
            assert result.is_error is True
            assert text(result).startswith("Error (input)")
            assert str(tmp_path) not in text(result)


async def test_apply_preset_uses_the_stored_template(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        store = await open_preset_store(workspace.config.server.jobs.database)
        service = PresetService(store, request_limits(workspace.config))
        await service.create(
            ImagePresetCreate.model_validate(
                {
                    "name": "banner",
                    "template": {"prompt": "a banner", "parameters": {"size": "96x32"}},
                }
            )
        )
        await store.close()
        result = await session.call("apply_preset", {"name": "banner"})
        assert result.is_error is False, text(result)
        record = result.structured_content["images"][0]
        assert (record["width"], record["height"]) == (96, 32)
        override = await session.call("apply_preset", {"name": "banner", "prompt": "other words"})
        assert override.structured_content["revised_prompt"].startswith("other words")
        missing = await session.call("apply_preset", {"name": "nope"})
        assert missing.is_error is True


async def test_apply_preset_without_a_database_is_a_clear_error(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        result = await session.call("apply_preset", {"name": "banner"})
        assert result.is_error is True
        assert "preset was not found" in text(result)


async def test_providers_and_capabilities(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        providers = await session.call("list_providers", {})
        assert providers.structured_content["providers"][0]["name"] == "mock"
        capabilities = await session.call("get_capabilities", {})
        assert capabilities.structured_content["provider"] == "mock"
        unknown = await session.call("get_capabilities", {"provider": "nope"})
        assert unknown.is_error is True
        assert "list_providers" in text(unknown)


async def test_jobs_without_a_database(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        page = await session.call("list_jobs", {})
        assert page.structured_content == {"items": []}
        missing = await session.call("get_job", {"job_id": "019f0000-0000-7000-8000-000000000000"})
        assert missing.is_error is True
        bad = await session.call("list_jobs", {"status": "sleeping"})
        assert bad.is_error is True and "status" in text(bad)
        too_many = await session.call("list_jobs", {"limit": 1000})
        assert too_many.is_error is True


async def test_artifacts_are_readable_as_resources(workspace: Workspace) -> None:
    async with connected(workspace) as session:
        result = await session.call("generate_image", {"prompt": "fox", "size": "40x20"})
        [link] = links(result)
        read = await session.client.read_resource(link.uri)
        [content] = read.contents
        assert content.mime_type == "image/png"
        path = Path(result.structured_content["images"][0]["path"])
        assert base64.b64decode(content.blob) == path.read_bytes()  # type: ignore[union-attr]
        wrong_type = link.uri.replace(".png", ".webp")
        with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK raises its protocol error
            await session.client.read_resource(wrong_type)
