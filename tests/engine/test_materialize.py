"""The materializer as a whole: its stages in order, their pixel work off the event loop.

Each stage's own behaviour (what the original's materialize.rs tests check) is tested
beside its module: test_verification, test_finishing, test_generation_record,
test_projection; storage faults during publication in test_storage_faults.
"""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from imagebridge.engine.materialize import Materializer
from imagebridge.engine.transparency import ChromaPlan
from tests.engine.outputs import keyed_fixture, request, response, rgba_png, worker_thread_calls
from tests.support.fakes import image_item

# -- the stages together -----------------------------------------------------------------------


async def test_chroma_postprocessing_is_applied_before_projection() -> None:
    plan = ChromaPlan("#00ff00", 12, 96, True)
    result = await Materializer().materialize(
        response([image_item(0, keyed_fixture())]), request(), plan, owner="o"
    )
    image = Image.open(io.BytesIO(base64.b64decode(result.data[0].b64_json or "")))
    assert image.mode == "RGBA"
    assert image.getpixel((0, 0)) == (0, 0, 0, 0)
    assert image.getpixel((10, 10)) == (220, 30, 20, 255)
    alpha = [n for n in result.normalizations if n.reason == "validated_chroma_key_alpha"]
    assert alpha and alpha[0].effective["transparent_pixels"] == 300  # type: ignore[index]
    assert result.data[0].sha256 != image_item(0, keyed_fixture()).sha256


async def test_pixel_work_runs_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    offloaded = worker_thread_calls(monkeypatch)
    plan = ChromaPlan("#00ff00", 12, 96, True)
    await Materializer().materialize(
        response([image_item(0, keyed_fixture())]), request(), plan, owner="o"
    )
    assert "remove_background" in offloaded
    eff = request(parameters={"background": "transparent"}, output={"metadata": "embedded"})
    await Materializer().materialize(
        response([image_item(0, rgba_png())]), eff, None, owner="o", original=eff
    )
    assert "inspect_transparent_alpha" in offloaded
    assert "embed" in offloaded  # the XMP container is rebuilt and re-verified off the loop
