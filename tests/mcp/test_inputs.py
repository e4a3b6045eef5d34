"""Image arguments: data URLs, paths and file URLs become request inputs."""

from __future__ import annotations

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.mcp.inputs import describe_inputs


def test_data_urls_paths_and_file_urls() -> None:
    data = describe_inputs(
        ["data:image/png;base64,AAAA", "/home/me/photo.png", "file:///tmp/with%20space.png"],
        "relative/mask.png",
        ["~/ref.webp"],
    )
    assert data["images"][0] == {"type": "data_url", "data_url": "data:image/png;base64,AAAA"}
    assert data["images"][1] == {
        "type": "file",
        "path": "/home/me/photo.png",
        "filename": "photo.png",
    }
    assert data["images"][2]["path"] == "/tmp/with space.png"
    assert data["mask"]["path"] == "relative/mask.png"
    assert not data["reference_images"][0]["path"].startswith("~")


def test_empty_and_remote_file_urls_are_refused() -> None:
    with pytest.raises(BridgeError) as caught:
        describe_inputs(["  "], None, None)
    assert caught.value.field == "images[0]"
    with pytest.raises(BridgeError) as caught:
        describe_inputs(["file://otherhost/photo.png"], None, None)
    assert caught.value.code is ErrorCode.INPUT


def test_unprintable_file_names_are_not_passed_on() -> None:
    data = describe_inputs(["/tmp/bad\x07name.png"], None, None)
    assert data["images"][0]["filename"] is None
