"""Painting a mask in Chromium the way people do, and checking what the page made of it.

Strokes are real input: the mouse through Playwright, the pen and the finger through the
DevTools protocol (``Input.dispatchMouseEvent`` with ``pointerType: "pen"``,
``Input.dispatchTouchEvent``), so the page sees trusted pointer events of each type.
Coordinates are the source image's pixels, mapped onto the painter's canvas as it is shown.

The expected mask is computed here from the strokes: a pixel may change when its centre is
within the brush radius of a stroke (minus what the eraser took back). Pixels within one
pixel of a stroke's edge may go either way (the pointer's position is rounded to the
screen's pixels), every other pixel must be exactly as expected.
"""

from __future__ import annotations

import base64
import io
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

Point = tuple[float, float]
EDGE_TOLERANCE = 1.0


@dataclass(frozen=True)
class Stroke:
    points: tuple[Point, ...]
    radius: float
    erase: bool = False


def canvas_box(page: Any) -> dict[str, float]:
    box: dict[str, float] = page.locator("#mask-canvas").bounding_box()
    return box


def to_screen(page: Any, point: Point, size: tuple[int, int]) -> Point:
    box = canvas_box(page)
    return (
        box["x"] + point[0] * box["width"] / size[0],
        box["y"] + point[1] * box["height"] / size[1],
    )


def _path(start: Point, end: Point, steps: int) -> list[Point]:
    return [
        (start[0] + (end[0] - start[0]) * i / steps, start[1] + (end[1] - start[1]) * i / steps)
        for i in range(steps + 1)
    ]


def mouse_stroke(page: Any, start: Point, end: Point, size: tuple[int, int]) -> None:
    points = [to_screen(page, point, size) for point in _path(start, end, 12)]
    page.mouse.move(*points[0])
    page.mouse.down()
    for point in points[1:]:
        page.mouse.move(*point)
    page.mouse.up()


def pen_stroke(page: Any, start: Point, end: Point, size: tuple[int, int]) -> None:
    session = page.context.new_cdp_session(page)
    points = [to_screen(page, point, size) for point in _path(start, end, 12)]
    common = {"button": "left", "pointerType": "pen"}
    session.send(
        "Input.dispatchMouseEvent",
        {"type": "mousePressed", "x": points[0][0], "y": points[0][1], "clickCount": 1, **common},
    )
    for x, y in points[1:]:
        session.send(
            "Input.dispatchMouseEvent",
            {"type": "mouseMoved", "x": x, "y": y, "buttons": 1, **common},
        )
    last = points[-1]
    session.send(
        "Input.dispatchMouseEvent",
        {"type": "mouseReleased", "x": last[0], "y": last[1], "clickCount": 1, **common},
    )
    session.detach()


def touch_stroke(page: Any, start: Point, end: Point, size: tuple[int, int]) -> None:
    session = page.context.new_cdp_session(page)
    points = [to_screen(page, point, size) for point in _path(start, end, 12)]
    session.send(
        "Input.dispatchTouchEvent",
        {"type": "touchStart", "touchPoints": [{"x": points[0][0], "y": points[0][1]}]},
    )
    for x, y in points[1:]:
        session.send(
            "Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x, "y": y}]}
        )
    session.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    session.detach()


def tap(page: Any, selector: str) -> None:
    """A finger's tap on ``selector`` (touch start and end in place, through the DevTools
    protocol like the strokes)."""
    box = page.locator(selector).bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    session = page.context.new_cdp_session(page)
    session.send(
        "Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]}
    )
    session.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    session.detach()


def tap_until(
    page: Any,
    selector: str,
    done: str,
    *,
    attempts: int = 5,
    tapper: Callable[[Any, str], None] | None = None,
) -> None:
    """Tap ``selector`` until ``done`` (a selector) is visible, at most ``attempts`` times.

    A finger lifted from a drag takes a moment to reach a button: Chromium's gesture
    recognizer ignores a tap that comes too soon after it, and on a busy machine "too soon"
    has no fixed length. A tap that did not take leaves the page as it was, so it is tapped
    again once the page has had a second to react. ``tapper`` taps (default :func:`tap`).
    """
    for _ in range(attempts):
        (tapper or tap)(page, selector)
        try:
            page.locator(done).wait_for(state="visible", timeout=1500)
        except PlaywrightTimeoutError:
            pass  # the tap did not take: tap again
        else:
            return
    raise AssertionError(f"{attempts} taps on {selector} never showed {done}")


def swipe(page: Any, selector: str, dx: float) -> None:
    """A finger dragged sideways by ``dx`` pixels across the middle of ``selector``."""
    box = page.locator(selector).bounding_box()
    x, y = box["x"] + box["width"] / 2 - dx / 2, box["y"] + box["height"] / 2
    session = page.context.new_cdp_session(page)
    session.send(
        "Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]}
    )
    for step in range(1, 9):
        point = {"x": x + dx * step / 8, "y": y}
        session.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [point]})
    session.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    session.detach()


def _distance_to_segment(p: Point, a: Point, b: Point) -> float:
    dx, dy = b[0] - a[0], b[1] - a[1]
    length = dx * dx + dy * dy
    t = (
        0.0
        if length == 0
        else max(0.0, min(1.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / length))
    )
    return math.hypot(p[0] - (a[0] + t * dx), p[1] - (a[1] + t * dy))


def _distance(p: Point, stroke: Stroke) -> float:
    points = stroke.points
    if len(points) == 1:
        return math.hypot(p[0] - points[0][0], p[1] - points[0][1])
    return min(_distance_to_segment(p, a, b) for a, b in itertools.pairwise(points))


def expected_state(x: int, y: int, strokes: Sequence[Stroke]) -> bool | None:
    """Whether pixel (x, y) may change after ``strokes`` (in order), or ``None`` when it is
    within EDGE_TOLERANCE of a stroke's edge that decides it."""
    centre = (x + 0.5, y + 0.5)
    state: bool | None = False
    for stroke in strokes:
        d = _distance(centre, stroke)
        if d <= stroke.radius - EDGE_TOLERANCE:
            state = not stroke.erase
        elif d <= stroke.radius + EDGE_TOLERANCE:
            state = None
    return state


def decode_data_url(url: str) -> Image.Image:
    head, payload = url.split(",", 1)
    assert head == "data:image/png;base64", head
    image = Image.open(io.BytesIO(base64.b64decode(payload)))
    image.load()
    return image


def mask_mismatches(mask: Image.Image, strokes: Sequence[Stroke]) -> tuple[list[str], int]:
    """Pixels the mask gets wrong (the first ten of them) and how many may change in it."""
    assert mask.mode == "RGBA", mask.mode
    wrong: list[str] = []
    editable = 0
    pixels = mask.load()
    for y in range(mask.height):
        for x in range(mask.width):
            r, g, b, alpha = pixels[x, y]
            assert alpha in (0, 255) and (r, g, b) == (0, 0, 0), (x, y, pixels[x, y])
            changes = alpha == 0
            editable += changes
            wanted = expected_state(x, y, strokes)
            if wanted is not None and wanted != changes and len(wrong) < 10:
                wrong.append(f"({x},{y}) {'transparent' if changes else 'opaque'}")
    return wrong, editable
