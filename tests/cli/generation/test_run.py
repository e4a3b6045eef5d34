"""Input loading, signal-driven cancellation and the in-process engine path."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from pathlib import Path

import pytest

from imagebridge.cli.generation.progress import ProgressReporter, make_reporter
from imagebridge.cli.generation.run import (
    execute_in_process,
    resolve_file_inputs,
    run_cancellable,
)
from imagebridge.cli.output import Output, OutputMode
from imagebridge.config import BridgeConfig, load_config
from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.cancellation import CancelToken
from tests.cli.conftest import OFFLINE
from tests.support.images import png_bytes


def _config(tmp_path: Path, *sets: str) -> BridgeConfig:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path / "data"), **OFFLINE}
    return load_config(env=env, sets=[f'inputs.local_roots=["{tmp_path}"]', *sets],
                       cwd=tmp_path).require_valid()  # fmt: skip


def _edit(path: Path) -> ImageRequest:
    return ImageRequest.model_validate(
        {"prompt": "x", "operation": "edit",
         "images": [{"type": "file", "path": str(path), "filename": path.name}]}
    )  # fmt: skip


def test_file_inputs_become_verified_inline_images(tmp_path: Path) -> None:
    data = png_bytes(16, 16, (200, 30, 30))
    (tmp_path / "in.png").write_bytes(data)
    resolved = asyncio.run(resolve_file_inputs(_edit(tmp_path / "in.png"), _config(tmp_path)))
    image = resolved.edit_images[0]
    assert image.type == "base64" and image.media_type == "image/png"
    assert base64.b64decode(image.payload) == data and image.filename == "in.png"


def test_file_inputs_are_confined_to_the_local_roots(tmp_path: Path) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    outside = tmp_path / "outside.png"
    outside.write_bytes(png_bytes(16, 16, (200, 30, 30)))
    config = _config(inside, f'inputs.local_roots=["{inside}"]')
    with pytest.raises(BridgeError) as caught:
        asyncio.run(resolve_file_inputs(_edit(outside), config))
    assert caught.value.code is ErrorCode.INPUT


def test_non_images_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.png").write_text("not an image")
    with pytest.raises(BridgeError) as caught:
        asyncio.run(resolve_file_inputs(_edit(tmp_path / "notes.png"), _config(tmp_path)))
    assert caught.value.code is ErrorCode.INPUT


def _silent() -> ProgressReporter:
    return make_reporter(Output(mode=OutputMode.JSON), "x", 1)


def test_first_signal_cancels_through_the_token(tmp_path: Path) -> None:
    config = _config(tmp_path)
    request = ImageRequest.model_validate(
        {"prompt": "slow [mock:latency=20000]", "operation": "generate",
         "parameters": {"size": "8x8"}}
    )  # fmt: skip
    reporter = _silent()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, os.kill, os.getpid(), signal.SIGINT)
        await run_cancellable(
            lambda token: execute_in_process(request, config, token, reporter),
            reporter,
        )

    with pytest.raises(BridgeError) as caught:
        asyncio.run(asyncio.wait_for(scenario(), 15))
    assert caught.value.code is ErrorCode.CANCELLED
    assert caught.value.details["outcome"] == "unknown"


def test_second_signal_abandons_the_wait(tmp_path: Path) -> None:
    async def stubborn(token: CancelToken) -> None:
        await asyncio.sleep(30)  # ignores the token, like a provider that never stops

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.1, os.kill, os.getpid(), signal.SIGINT)
        loop.call_later(0.3, os.kill, os.getpid(), signal.SIGINT)
        await run_cancellable(stubborn, _silent())

    with pytest.raises(BridgeError, match="abandoned after a second interrupt") as caught:
        asyncio.run(asyncio.wait_for(scenario(), 15))
    assert caught.value.outcome_unknown


def test_signal_handlers_are_removed_afterwards(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)

    async def quick(token: CancelToken) -> str:
        return "done"

    assert asyncio.run(run_cancellable(quick, _silent())) == "done"
    assert signal.getsignal(signal.SIGINT) == before
