"""Image capture from turn notifications, and the confinement of saved-image reads."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.providers.codex_app_server.images import (
    CaptureLimits,
    TurnImageCollector,
    collect_turn_images,
    read_generated_image,
    sniff_media_type,
)
from imagebridge.providers.codex_app_server.notifications import Notification
from tests.support.fake_codex import FINAL_PNG, PARTIAL_PNG

THREAD, TURN = "thread-1", "turn-1"
B64 = base64.b64encode(FINAL_PNG).decode()
SECRET_PROMPT = "a very private prompt about my neighbour"


def completed(item: dict[str, Any], *, turn: str = TURN) -> Notification:
    return Notification("item/completed", {"threadId": THREAD, "turnId": turn, "item": item})


def image(**fields: Any) -> dict[str, Any]:
    return {"type": "imageGeneration", "id": "call_1", "status": "completed", **fields}


def turn_done(status: str = "completed", *, error: Any = None, items: Any = ()) -> Notification:
    turn = {"id": TURN, "status": status, "items": list(items), "error": error}
    return Notification("turn/completed", {"threadId": THREAD, "turn": turn})


def collector(home: Path | None = None, **kwargs: Any) -> TurnImageCollector:
    return TurnImageCollector(thread_id=THREAD, turn_id=TURN, codex_home=home, **kwargs)


async def stream(notes: Iterable[Notification]) -> AsyncIterator[Notification]:
    for note in notes:
        yield note


def home_with_image(tmp_path: Path, data: bytes = FINAL_PNG) -> tuple[Path, Path]:
    home = tmp_path / "home"
    folder = home / "generated_images" / THREAD
    folder.mkdir(parents=True)
    saved = folder / "call_1.png"
    saved.write_bytes(data)
    return home, saved


# -- capture -----------------------------------------------------------------------------


async def test_inline_result_is_captured_and_signalled() -> None:
    c = collector()
    await c.feed(completed(image(result=B64, revisedPrompt="blue square")))
    assert c.image_arrived.is_set()
    result = c.result()
    assert not result.turn_completed
    (captured,) = result.images
    assert captured.data == FINAL_PNG
    assert captured.media_type == "image/png"
    assert captured.revised_prompt == "blue square"
    assert captured.source == "result"
    assert "bytes=" in repr(captured)
    assert B64[:20] not in repr(captured)


async def test_collect_stops_at_the_image_unless_asked_to_wait() -> None:
    notes = [
        completed({"type": "userMessage", "id": "u"}),
        completed(image(result=B64)),
        completed({"type": "agentMessage", "id": "m", "text": "done"}),
        turn_done(),
    ]
    early = await collect_turn_images(stream(notes), collector())
    assert not early.turn_completed
    full = await collect_turn_images(stream(notes), collector(), wait_for_turn_completed=True)
    assert full.turn_completed
    assert full.turn_status == "completed"
    assert full.diagnostics["item_types"] == {
        "agentMessage": 1,
        "imageGeneration": 1,
        "userMessage": 1,
    }


async def test_saved_path_is_read_from_the_generated_images_folder(tmp_path: Path) -> None:
    home, saved = home_with_image(tmp_path)
    c = collector(home)
    await c.feed(completed(image(result="", savedPath=str(saved))))
    (captured,) = c.result().images
    assert captured.data == FINAL_PNG
    assert captured.source == "saved_path"


async def test_file_id_only_items_are_found_by_item_id(tmp_path: Path) -> None:
    home, _ = home_with_image(tmp_path)
    c = collector(home)
    await c.feed(completed(image(fileId="file_abc")))
    (captured,) = c.result().images
    assert captured.source == "file_id"
    assert captured.data == FINAL_PNG


async def test_file_id_without_a_readable_file_is_a_protocol_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "generated_images").mkdir(parents=True)
    with pytest.raises(BridgeError) as caught:
        await collector(home).feed(completed(image(fileId="file_abc")))
    assert caught.value.code is ErrorCode.PROTOCOL


async def test_saved_path_needs_a_known_codex_home(tmp_path: Path) -> None:
    _, saved = home_with_image(tmp_path)
    with pytest.raises(BridgeError) as caught:
        await collector(None).feed(completed(image(savedPath=str(saved))))
    assert caught.value.details["reason"] == "codex_home_unknown"


async def test_non_final_image_items_are_not_captured() -> None:
    partial = base64.b64encode(PARTIAL_PNG).decode()
    c = collector()
    await c.feed(completed(image(status="in_progress", result=partial)))
    await c.feed(completed(image(status="generating", result=partial)))
    assert not c.image_arrived.is_set()
    await c.feed(completed(image(result=B64)))
    assert c.result().images[0].data == FINAL_PNG


async def test_notifications_of_other_turns_are_ignored() -> None:
    c = collector()
    await c.feed(completed(image(result=base64.b64encode(PARTIAL_PNG).decode()), turn="turn-0"))
    assert not c.image_arrived.is_set()
    assert c.diagnostics.notifications == 0


async def test_images_listed_only_in_the_completed_turn_are_captured() -> None:
    c = collector()
    done = await c.feed(turn_done(items=[image(result=B64)]))
    assert done
    assert c.result().images[0].data == FINAL_PNG


async def test_extra_images_beyond_the_wanted_count_are_only_counted() -> None:
    c = collector()
    await c.feed(completed(image(result=B64)))
    await c.feed(completed(image(id="call_2", result=B64)))
    assert len(c.result().images) == 1
    assert c.diagnostics.extra_image_items == 1


async def test_two_images_for_two_wanted() -> None:
    c = collector(expected_images=2)
    await c.feed(completed(image(result=B64)))
    assert not c.image_arrived.is_set()
    await c.feed(completed(image(id="call_2", result=B64)))
    assert c.image_arrived.is_set()
    assert [i.item_id for i in c.result().images] == ["call_1", "call_2"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"result": "not base64 !!"}, "not base64"),
        ({"result": base64.b64encode(b"GIF89a....").decode()}, "not a PNG"),
        ({"id": "", "result": B64}, "without an id"),
        ({"result": ""}, "without image data"),
        ({"result": B64, "revisedPrompt": "x" * 200}, "revised prompt"),
        ({"result": base64.b64encode(FINAL_PNG * 20).decode()}, "larger than"),
    ],
)
async def test_bad_image_items_are_protocol_errors(fields: dict[str, Any], message: str) -> None:
    c = collector(limits=CaptureLimits(max_encoded_bytes=1024, max_revised_prompt_bytes=100))
    with pytest.raises(BridgeError) as caught:
        await c.feed(completed(image(**fields)))
    assert caught.value.code is ErrorCode.PROTOCOL
    assert message in caught.value.message


async def test_the_same_image_item_twice_is_a_protocol_error() -> None:
    c = collector(expected_images=2)
    await c.feed(completed(image(result=B64)))
    with pytest.raises(BridgeError):
        await c.feed(completed(image(result=B64)))


# -- endings -----------------------------------------------------------------------------


async def test_completed_without_an_image_reports_safe_diagnostics_only() -> None:
    c = collector()
    await c.feed(
        completed({"type": "userMessage", "id": "u", "content": [{"text": SECRET_PROMPT}]})
    )
    await c.feed(completed(image(status="failed", result="", revisedPrompt=SECRET_PROMPT)))
    await c.feed(completed({"type": "agentMessage", "id": "m", "text": SECRET_PROMPT}))
    await c.feed(turn_done(items=[{"type": "agentMessage", "text": SECRET_PROMPT}]))
    with pytest.raises(BridgeError) as caught:
        c.result()
    error = caught.value
    assert error.code is ErrorCode.UPSTREAM
    assert error.message == "Codex turn completed without an image"
    diagnostics = error.details["turn_diagnostics"]
    assert diagnostics["failed_image_items"] == 1
    assert diagnostics["completed_image_items"] == 0
    assert diagnostics["terminal_item_count"] == 1
    assert diagnostics["item_statuses"] == {"failed": 1}
    assert SECRET_PROMPT not in json.dumps(error.to_dict())


async def test_a_failed_image_with_a_usage_limit_explains_the_missing_image() -> None:
    c = collector()
    failure = {"type": "usageLimitExceeded", "limitId": "images", "resetsAt": 4_000_000_000}
    await c.feed(completed(image(status="failed", result="", failure=failure)))
    await c.feed(turn_done())
    with pytest.raises(BridgeError) as caught:
        c.result()
    assert caught.value.code is ErrorCode.RATE_LIMITED
    assert caught.value.details["retry_after_ms"] > 0


async def test_a_failed_turn_uses_its_error_or_the_last_error_notification() -> None:
    policy = {"message": "rejected by our safety system", "codexErrorInfo": "other"}
    c = collector()
    await c.feed(
        Notification(
            "error", {"threadId": THREAD, "turnId": TURN, "error": policy, "willRetry": False}
        )
    )
    await c.feed(turn_done("failed", error=None))
    with pytest.raises(BridgeError) as caught:
        c.result()
    assert caught.value.code is ErrorCode.SAFETY_REJECTED

    limited = {
        "message": "x",
        "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}},
    }
    c = collector()
    await c.feed(turn_done("failed", error=limited))
    with pytest.raises(BridgeError) as caught:
        c.result()
    assert caught.value.code is ErrorCode.RATE_LIMITED


async def test_retried_errors_do_not_decide_the_outcome() -> None:
    c = collector()
    transient = {"message": "reconnecting", "codexErrorInfo": "serverOverloaded"}
    await c.feed(
        Notification(
            "error", {"threadId": THREAD, "turnId": TURN, "error": transient, "willRetry": True}
        )
    )
    await c.feed(turn_done("failed"))
    with pytest.raises(BridgeError) as caught:
        c.result()
    assert caught.value.code is ErrorCode.UPSTREAM


async def test_an_interrupted_turn_is_cancelled() -> None:
    c = collector()
    await c.feed(turn_done("interrupted"))
    with pytest.raises(BridgeError) as caught:
        c.result()
    assert caught.value.code is ErrorCode.CANCELLED
    assert caught.value.details["outcome"] == "cancelled"
    assert caught.value.details["terminal_status"] == "interrupted"


async def test_an_image_wins_over_a_later_turn_failure() -> None:
    c = collector()
    await c.feed(completed(image(result=B64)))
    await c.feed(turn_done("failed", error={"message": "second call failed"}))
    assert len(c.result().images) == 1


async def test_events_ending_before_the_turn_completed_are_a_protocol_error() -> None:
    with pytest.raises(BridgeError) as caught:
        await collect_turn_images(stream([completed({"type": "userMessage"})]), collector())
    assert caught.value.code is ErrorCode.PROTOCOL


# -- confinement of saved paths ----------------------------------------------------------


def test_sniffing_recognises_only_image_formats() -> None:
    assert sniff_media_type(FINAL_PNG) == "image/png"
    assert sniff_media_type(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_media_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_media_type(b"<svg>") is None


def test_a_file_inside_the_folder_is_read(tmp_path: Path) -> None:
    home, saved = home_with_image(tmp_path)
    assert read_generated_image(home, saved, 1 << 20) == FINAL_PNG
    # the path may be spelled with `..` as long as it resolves inside
    twisted = saved.parent / ".." / THREAD / saved.name
    assert read_generated_image(home, twisted, 1 << 20) == FINAL_PNG


def _reason(home: Path, path: Path | str, limit: int = 1 << 20) -> str:
    with pytest.raises(BridgeError) as caught:
        read_generated_image(home, path, limit)
    assert caught.value.code is ErrorCode.PROTOCOL
    return str(caught.value.details["reason"])


def test_a_path_outside_the_folder_is_refused(tmp_path: Path) -> None:
    home, _ = home_with_image(tmp_path)
    outside = home / "auth.json"
    outside.write_text("{}")
    assert _reason(home, outside) == "outside_generated_images"
    assert (
        _reason(home, home / "generated_images" / ".." / "auth.json") == "outside_generated_images"
    )
    assert _reason(home, home / "generated_images") == "outside_generated_images"


def test_a_symlink_leading_outside_is_refused(tmp_path: Path) -> None:
    home, saved = home_with_image(tmp_path)
    secret = tmp_path / "secret.png"
    secret.write_bytes(FINAL_PNG)
    link = saved.parent / "link.png"
    link.symlink_to(secret)
    assert _reason(home, link) == "outside_generated_images"
    escape_dir = home / "generated_images" / "escape"
    escape_dir.symlink_to(tmp_path)
    assert _reason(home, escape_dir / "secret.png") == "outside_generated_images"


def test_a_symlinked_generated_images_folder_cannot_be_used_to_escape(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.png").write_bytes(FINAL_PNG)
    (home / "generated_images").symlink_to(elsewhere)
    # The folder itself is codex's choice; files must still be inside its real location.
    assert read_generated_image(home, elsewhere / "x.png", 1 << 20) == FINAL_PNG
    other = tmp_path / "other.png"
    other.write_bytes(FINAL_PNG)
    assert _reason(home, other) == "outside_generated_images"


def test_relative_missing_special_and_oversize_files_are_refused(tmp_path: Path) -> None:
    home, saved = home_with_image(tmp_path)
    assert _reason(home, "generated_images/thread-1/call_1.png") == "relative_path"
    assert _reason(home, saved.parent / "missing.png") == "not_found"
    fifo = saved.parent / "pipe.png"
    os.mkfifo(fifo)
    assert _reason(home, fifo) == "not_a_regular_file"
    assert _reason(home, saved, limit=10) == "too_large"
    assert _reason(tmp_path / "nohome", saved) == "generated_images_missing"


async def test_a_saved_path_outside_the_folder_fails_the_capture(tmp_path: Path) -> None:
    home, _ = home_with_image(tmp_path)
    outside = tmp_path / "outside.png"
    outside.write_bytes(FINAL_PNG)
    with pytest.raises(BridgeError) as caught:
        await collector(home).feed(completed(image(result="", savedPath=str(outside))))
    assert caught.value.details["reason"] == "outside_generated_images"
