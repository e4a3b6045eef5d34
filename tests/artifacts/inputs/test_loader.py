from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from imagebridge.artifacts.inputs.loader import InputLoader
from imagebridge.artifacts.inputs.remote import RemoteFetchPolicy, RemoteImageFetcher
from imagebridge.contract.enums import OutputFormat
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.imaging.inspect import ImageLimits
from tests.artifacts.http_server import Route, local_server
from tests.artifacts.images import jpeg, png, png_bomb


@dataclass
class FileInput:
    path: str
    type: str = "file"
    media_type: str | None = None
    filename: str | None = None


@dataclass
class Base64Input:
    data: str
    type: str = "base64"
    media_type: str | None = "image/png"
    filename: str | None = "input.png"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    directory = tmp_path / "root"
    directory.mkdir()
    (directory / "input.png").write_bytes(png(2, 3))
    return directory


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "outside.png").write_bytes(png(1, 1))
    return directory


def input_error(loader: InputLoader, kind: str, payload: str, **kwargs: str) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        loader.load(kind, payload, **kwargs)
    assert caught.value.code is ErrorCode.INPUT
    return caught.value


def test_loads_bounded_base64_and_verifies_type() -> None:
    data = png(2, 2)
    loader = InputLoader([])
    image = loader.load_input(Base64Input(base64.b64encode(data).decode()))
    assert image.data == data
    assert (image.info.format, image.info.width) == (OutputFormat.PNG, 2)
    assert image.filename == "input.png"
    assert "data=" not in repr(image) and str(data[:8]) not in repr(image)


def test_base64_bounds_are_checked_before_decoding() -> None:
    data = png(2, 2)
    limits = ImageLimits(max_encoded_bytes=len(data) - 1)
    loader = InputLoader([], limits)
    encoded = base64.b64encode(data).decode()
    too_long = encoded + "A" * (len(encoded) + 16)
    assert input_error(loader, "base64", too_long).message == (
        "base64 input exceeds the configured byte limit"
    )
    assert input_error(loader, "base64", encoded).message == (
        "decoded input exceeds the configured byte limit"
    )
    for bad in ("not base64!", "QUJD\nREVG", "QUJ"):
        assert input_error(InputLoader([]), "base64", bad).message == "base64 input is malformed"


def test_data_urls() -> None:
    data = jpeg(4, 4)
    url = "data:image/jpeg;base64," + base64.b64encode(data).decode()
    assert InputLoader([]).load("data_url", url).data == data
    for bad in ("data:text/plain;base64,QUJD", "data:image/png,QUJD", "no comma"):
        assert input_error(InputLoader([]), "data_url", bad).code is ErrorCode.INPUT


def test_declared_media_type_must_match_the_bytes() -> None:
    encoded = base64.b64encode(jpeg(4, 4)).decode()
    error = input_error(InputLoader([]), "base64", encoded, media_type="image/png")
    assert error.message == "declared media type does not match image bytes; detected image/jpeg"
    assert InputLoader([]).load("base64", encoded, media_type="image/jpg").info.width == 4


def test_the_format_comes_from_the_bytes_never_from_the_name(root: Path) -> None:
    (root / "photo.png").write_bytes(jpeg(6, 4))
    loader = InputLoader([root])
    image = loader.load("file", "photo.png", filename="photo.png")
    assert (image.info.format, image.info.media_type) == (OutputFormat.JPEG, "image/jpeg")
    error = input_error(loader, "file", "photo.png", media_type="image/png")
    assert error.message == "declared media type does not match image bytes; detected image/jpeg"


def test_image_problems_surface_as_input_errors(root: Path) -> None:
    loader = InputLoader([root])
    bomb = base64.b64encode(png_bomb()).decode()
    assert (
        input_error(loader, "base64", bomb).message == "image dimensions exceed configured limits"
    )
    (root / "truncated.png").write_bytes(png(8, 8)[:-10])
    assert input_error(loader, "file", "truncated.png").message == (
        "image payload is malformed or incomplete"
    )


def test_loads_file_beneath_allowed_root(root: Path) -> None:
    loader = InputLoader([root])
    assert loader.load_input(FileInput("input.png")).info.height == 3
    assert loader.load("file", "./input.png").info.height == 3
    assert loader.load("file", str(root / "input.png")).info.height == 3
    (root / "nested").mkdir()
    (root / "nested" / "deep.png").write_bytes(png(5, 5))
    assert loader.load("file", "nested/deep.png").info.width == 5


def test_relative_paths_are_tried_per_root_in_order(root: Path, outside: Path) -> None:
    loader = InputLoader([root, outside])
    assert loader.load("file", "outside.png").info.width == 1
    assert loader.load("file", "input.png").info.width == 2


FORBIDDEN = "local input path contains a forbidden component"
OUTSIDE = "local input is outside allowed roots or cannot be opened"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../../etc/passwd", FORBIDDEN),
        ("../outside/outside.png", FORBIDDEN),
        ("nested/../../x.png", FORBIDDEN),
        ("", FORBIDDEN),
        ("/etc/passwd", OUTSIDE),
    ],
)
def test_rejects_traversal_and_paths_outside_the_roots(
    root: Path, outside: Path, path: str, message: str
) -> None:
    assert input_error(InputLoader([root]), "file", path).message == message
    assert input_error(InputLoader([root]), "file", str(outside / "outside.png")).message == (
        OUTSIDE
    )


def test_rejects_symlink_that_escapes_allowed_root(root: Path, outside: Path) -> None:
    (root / "escape").symlink_to(outside)
    (root / "escape.png").symlink_to(outside / "outside.png")
    (root / "relative.png").symlink_to("../outside/outside.png")
    loader = InputLoader([root])
    for path in ("escape/outside.png", "escape.png", "relative.png"):
        error = input_error(loader, "file", path)
        assert error.message == "local input escapes the allowed root"


def test_symlinks_that_stay_inside_the_root_are_followed(root: Path) -> None:
    (root / "pictures").mkdir()
    (root / "pictures" / "a.png").write_bytes(png(6, 6))
    (root / "alias").symlink_to("pictures")
    (root / "absolute.png").symlink_to(root / "pictures" / "a.png")
    (root / "pictures" / "up.png").symlink_to("../input.png")
    loader = InputLoader([root])
    assert loader.load("file", "alias/a.png").info.width == 6
    assert loader.load("file", "absolute.png").info.width == 6
    assert loader.load("file", "pictures/up.png").info.width == 2


def test_symlink_loops_are_bounded(root: Path) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    assert input_error(InputLoader([root]), "file", "a").message == (
        "local input has too many symbolic links"
    )


def test_only_regular_files_within_the_size_cap_are_read(root: Path) -> None:
    os.mkfifo(root / "fifo.png")
    (root / "dir.png").mkdir()
    loader = InputLoader([root])
    assert input_error(loader, "file", "fifo.png").message == "local input is not a regular file"
    assert input_error(loader, "file", "dir.png").message == "local input is not a regular file"
    small = InputLoader([root], ImageLimits(max_encoded_bytes=10))
    assert input_error(small, "file", "input.png").message == (
        "local input exceeds the configured byte limit"
    )


def test_local_files_can_be_disabled_and_roots_must_exist(tmp_path: Path) -> None:
    assert input_error(InputLoader([]), "file", "input.png").message == (
        "local file inputs are disabled"
    )
    with pytest.raises(BridgeError) as caught:
        InputLoader([tmp_path / "missing"])
    assert caught.value.code is ErrorCode.CONFIGURATION


@pytest.mark.usefixtures("no_external_network")
async def test_url_inputs_need_an_enabled_fetcher(root: Path) -> None:
    for loader in (
        InputLoader([root]),
        InputLoader([root], remote=RemoteImageFetcher(RemoteFetchPolicy())),
    ):
        assert input_error(loader, "url", "http://example.com/a.png").message == (
            "remote image inputs are disabled"
        )
        with pytest.raises(BridgeError) as caught:
            await loader.aload("url", "http://example.com/a.png")
        assert caught.value.message == "remote image inputs are disabled"


@pytest.mark.usefixtures("no_external_network")
async def test_url_inputs_go_through_the_remote_fetcher(root: Path) -> None:
    async with local_server() as server:
        server.routes["/a.png"] = Route(body=png(3, 3))
        policy = RemoteFetchPolicy(
            enabled=True, allowed_ports=frozenset({server.port}), allow_private_networks=True
        )
        loader = InputLoader([root], remote=RemoteImageFetcher(policy))
        image = await loader.aload("url", f"{server.origin}/a.png", filename="a.png")
        assert (image.info.width, image.filename) == (3, "a.png")
        with pytest.raises(BridgeError) as caught:
            await loader.aload("url", f"{server.origin}/a.png", media_type="image/webp")
        assert caught.value.message.startswith("declared media type does not match")
        refusing = InputLoader(
            [root],
            remote=RemoteImageFetcher(
                RemoteFetchPolicy(enabled=True, allowed_ports=frozenset({server.port}))
            ),
        )
        with pytest.raises(BridgeError) as caught:
            await refusing.aload("url", f"{server.origin}/a.png")
        assert "private or reserved" in caught.value.message


async def test_async_loading_of_files(root: Path) -> None:
    loader = InputLoader([root])
    image = await loader.aload_input(FileInput("input.png", media_type="image/png"))
    assert image.info.height == 3


def test_unknown_input_types_are_refused() -> None:
    assert input_error(InputLoader([]), "ftp", "x").message == "image input type is not supported"
