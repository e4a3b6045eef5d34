from __future__ import annotations

import pytest

from imagebridge.artifacts.naming import (
    is_safe_filename,
    is_safe_relative,
    sanitize_prefix,
    suffixed_filename,
    with_extension,
)
from imagebridge.contract.enums import OutputFormat


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("My portrait", "my-portrait"),
        ("source.png", "sourcepng"),  # as the original names a staged reference image
        ("  --Héllo\tWörld--  ", "hllo-wrld"),
        ("***", "image"),
        ("", "image"),
        ("a" * 70, "a" * 64),
        ("-" * 63 + "ab", "a"),  # cut to 64 first, then trimmed
        ("x\x1fy", "xy"),  # ASCII unit separator is not whitespace
        ("x\u00a0y", "x-y"),  # no-break space is
        ("Under_Score-OK", "under_score-ok"),
    ],
)
def test_prefix_sanitiser(raw: str, expected: str) -> None:
    assert sanitize_prefix(raw) == expected


@pytest.mark.parametrize(
    "value", ["portraits", "portraits/people", "a/b.c/d_e-f", "x" * 160, "/".join(["ab"] * 170)]
)
def test_safe_relative_accepts(value: str) -> None:
    assert is_safe_relative(value) is (len(value) <= 512)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "/abs",
        "a//b",
        "a/",
        ".hidden",
        "a/../b",
        "..",
        ".",
        "a/./b",
        "a\\b",
        "sp ace",
        "x" * 161,
        "é",
        ".imagegen-bridge-ownership",
    ],
)
def test_safe_relative_rejects(value: str) -> None:
    assert not is_safe_relative(value)


def test_filenames_and_extensions() -> None:
    assert is_safe_filename("alice", OutputFormat.PNG)
    assert is_safe_filename("alice.PNG", OutputFormat.PNG)
    assert is_safe_filename("photo.jpeg", OutputFormat.JPEG)
    assert is_safe_filename("photo.jpg", OutputFormat.JPEG)
    assert not is_safe_filename("photo.png", OutputFormat.JPEG)
    assert not is_safe_filename("a/b.png", OutputFormat.PNG)
    assert not is_safe_filename(".png", OutputFormat.PNG)
    assert with_extension("alice", OutputFormat.JPEG) == "alice.jpg"
    assert with_extension("alice.jpeg", OutputFormat.JPEG) == "alice.jpeg"
    assert suffixed_filename("portrait.png", 2) == "portrait-2.png"
    assert suffixed_filename("a.b.webp", 10) == "a.b-10.webp"
