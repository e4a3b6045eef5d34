"""Hypothesis over the codex app-server link: whatever the child writes, only
``BridgeError`` reaches the bridge.

A fake child feeds :class:`RpcConnection` arbitrary lines — responses with odd ids and
error objects, notifications with random params, server requests, garbage, over-long
lines, a cut-off last line — while a request is pending and a turn is subscribed. The
notifications the subscriber receives then go through the turn image collector, as the
provider does. Afterwards: the pending request ended with a result or a
``BridgeError``; the link, if closed, says ``protocol`` or ``upstream`` (never the
reader's catch-all ``internal``); every reply the bridge wrote is one valid JSON line;
nothing is left running.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.images import (
    TurnImageCollector,
    read_generated_image,
)
from imagebridge.providers.codex_app_server.options import AppServerOptions
from imagebridge.providers.codex_app_server.rpc import RpcConnection
from tests.support.images import png_b64

FUZZ: Final = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
OPTIONS: Final = AppServerOptions(
    rpc_max_message_bytes=8_192,
    rpc_max_notification_bytes=6_144,
    rpc_timeout_ms=2_000,
    notification_capacity=64,
    slow_consumer_timeout_ms=500,
)
THREAD: Final = "thr-1"
PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
TURN: Final = "turn-1"


PNG_B64: Final = png_b64(2, 2, (1, 2, 3))


class Child:
    """The codex end: collects what the bridge writes; its output is a StreamReader."""

    def __init__(self) -> None:
        self.to_bridge = asyncio.StreamReader()
        self.written: list[bytes] = []
        self._closing = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self._closing = True

    def is_closing(self) -> bool:
        return self._closing


leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from([THREAD, TURN, "imageGeneration", "completed", "failed", PNG_B64, "!!"])
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "threadId",
                    "turnId",
                    "turn",
                    "item",
                    "id",
                    "type",
                    "status",
                    "result",
                    "revisedPrompt",
                    "savedPath",
                    "items",
                    "error",
                    "code",
                    "message",
                    "willRetry",
                ]
            )
            | st.text(max_size=8),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)
image_item = st.fixed_dictionaries(
    {
        "type": st.just("imageGeneration"),
        "id": st.sampled_from(["img-1", "img-2", "img-9", ""]) | st.text(max_size=5),
        "status": st.sampled_from(["completed", "completed", "generating", "failed"]),
    },
    optional={
        "result": st.sampled_from([PNG_B64, PNG_B64, "", "not base64"]) | st.text(max_size=10),
        "savedPath": st.sampled_from(
            [
                "{home}/generated_images/thr-1/img-9.png",
                "{home}/generated_images/../outside.png",
                "{home}/outside.png",
                "/etc/hostname",
                "relative/img.png",
                "{home}/generated_images/thr-1/img\x00-9.png",
                "{home}/generated_images",
                "",
            ]
        )
        | st.text(max_size=12),
        "fileId": st.sampled_from(["file-1", ""]),
        "revisedPrompt": st.text(max_size=10),
    },
)
ids = {"threadId": st.sampled_from([THREAD, THREAD, THREAD, "other"]), "turnId": st.just(TURN)}
turns = st.fixed_dictionaries(
    {"id": st.just(TURN), "status": st.sampled_from(["completed", "failed", "interrupted"])},
    optional={"items": st.lists(image_item | values, max_size=2), "error": values},
)
notifications = st.one_of(
    st.fixed_dictionaries(
        {
            "method": st.just("item/completed"),
            "params": st.fixed_dictionaries({**ids, "item": image_item | image_item | values}),
        }
    ),
    st.fixed_dictionaries(
        {
            "method": st.just("turn/completed"),
            "params": st.fixed_dictionaries({**ids, "turn": turns | turns | values}),
        }
    ),
    st.fixed_dictionaries(
        {
            "method": st.just("error"),
            "params": st.fixed_dictionaries(
                ids, optional={"error": values, "willRetry": st.booleans()}
            ),
        }
    ),
    st.fixed_dictionaries(
        {"method": st.text(max_size=10), "params": st.fixed_dictionaries(ids) | values}
    ),
)
responses = st.fixed_dictionaries(
    {"id": st.sampled_from([1, 2, "1", True, None, 1.5, -1]) | leaves},
    optional={"result": values, "error": values},
)
server_requests = st.fixed_dictionaries(
    {
        "id": st.integers(-5, 5) | st.text(max_size=4) | st.booleans() | st.none(),
        "method": st.sampled_from(
            ["item/commandExecution/requestApproval", "applyPatchApproval", "execCommandApproval"]
        )
        | st.text(max_size=12),
    },
    optional={"params": values},
)
well_formed = st.one_of(
    notifications.map(json.dumps),
    notifications.map(json.dumps),
    notifications.map(json.dumps),
    responses.map(json.dumps),
    server_requests.map(json.dumps),
)
breaking = st.one_of(
    values.map(json.dumps),
    st.text(max_size=40),
    st.just("x" * 9_000),
    st.just(json.dumps({"method": "item/completed", "params": {"pad": "y" * 7_000}})),
)


@st.composite
def child_output(draw: st.DrawFn) -> list[str]:
    """Mostly well-formed traffic (so turns get far), sometimes one line that breaks it."""
    feed = draw(st.lists(well_formed, max_size=12))
    if draw(st.integers(0, 3)) == 0:
        feed.insert(draw(st.integers(0, len(feed))), draw(breaking))
    return feed


async def _drive(feed: list[str], cut_last: bool, home: Path) -> None:
    child = Child()
    link = RpcConnection(child.to_bridge, child, OPTIONS)
    link.start()
    channel = link.subscribe(thread_id=THREAD)
    pending = asyncio.create_task(link.request("account/read"))
    await asyncio.sleep(0)
    for index, raw in enumerate(feed):
        line = raw.replace("{home}", str(home))
        data = line.encode("utf-8", "surrogatepass")
        last = index == len(feed) - 1
        child.to_bridge.feed_data(data if (cut_last and last) else data + b"\n")
        await asyncio.sleep(0)
    child.to_bridge.feed_eof()

    try:
        await asyncio.wait_for(pending, timeout=5)
    except BridgeError as failed:
        assert failed.code in {ErrorCode.UPSTREAM, ErrorCode.PROTOCOL, ErrorCode.SAFETY_REJECTED}
    collector = TurnImageCollector(thread_id=THREAD, turn_id=TURN, codex_home=home)
    with contextlib.suppress(BridgeError):
        while not channel.closed or len(channel):
            notification = await asyncio.wait_for(channel.receive(), timeout=5)
            with contextlib.suppress(BridgeError):
                if await collector.feed(notification):
                    break
    with contextlib.suppress(BridgeError):
        result = collector.result()
        for image in result.images:
            assert image.data.startswith(PNG_SIGNATURE), "only the planted image is readable"
    closed = link.close_error
    assert closed is not None, "end of output closes the link"
    assert closed.code in {ErrorCode.UPSTREAM, ErrorCode.PROTOCOL}, closed.to_dict()
    await link.close()
    for written in child.written:
        for reply in written.splitlines():
            assert isinstance(json.loads(reply), dict)
    reader = link._reader_task
    assert reader is not None and reader.done() and not reader.cancelled()
    assert reader.exception() is None


@pytest.fixture(scope="module")
def codex_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CODEX_HOME with one image codex saved, and a file outside the allowed folder."""
    home = tmp_path_factory.mktemp("codex-home")
    saved = home / "generated_images" / THREAD
    saved.mkdir(parents=True)
    (saved / "img-9.png").write_bytes(base64.b64decode(PNG_B64))
    (home / "outside.png").write_bytes(b"SECRET-not-an-image")
    return home


NUL_SAVED_PATH: Final = json.dumps(
    {
        "method": "item/completed",
        "params": {
            "threadId": THREAD,
            "turnId": TURN,
            "item": {
                "type": "imageGeneration",
                "id": "img-1",
                "status": "completed",
                "savedPath": "{home}/generated_images/thr-1/img\x00-9.png",
            },
        },
    }
)


@FUZZ
@given(feed=child_output(), cut_last=st.booleans())
@example(feed=[NUL_SAVED_PATH], cut_last=False)
async def test_any_child_output_ends_in_bridge_errors_only(
    codex_home: Path, feed: list[str], cut_last: bool
) -> None:
    await asyncio.wait_for(_drive(feed, cut_last, codex_home), timeout=20)


def test_a_saved_path_with_a_nul_byte_is_refused_not_raised(codex_home: Path) -> None:
    """Found by the fuzz above: ``savedPath`` with ``\\u0000`` raised ValueError."""
    bad = codex_home / "generated_images" / THREAD / "img\x00-9.png"
    with pytest.raises(BridgeError) as caught:
        read_generated_image(codex_home, bad, 1 << 20)
    assert caught.value.code is ErrorCode.PROTOCOL
    assert caught.value.details["reason"] == "not_found"
    good = codex_home / "generated_images" / THREAD / "img-9.png"
    assert read_generated_image(codex_home, good, 1 << 20).startswith(PNG_SIGNATURE)
