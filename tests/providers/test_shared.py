"""Upstream text kept for the person (docs/providers.md, "Codex backend, as measured"):
bounded, one line, no credential."""

from __future__ import annotations

from imagebridge.providers.shared import upstream_message


def test_plain_text_is_kept_as_is() -> None:
    text = "The 'gpt-5.5' model is not supported when using Codex with a ChatGPT account."
    assert upstream_message(text) == text


def test_credentials_and_payload_runs_are_replaced() -> None:
    kept = upstream_message(
        "token tok-SECRET-1234 for acct-77 rejected; data " + "A" * 80,
        secrets=("tok-SECRET-1234", "acct-77"),
    )
    assert kept == "token <redacted> for <redacted> rejected; data <redacted>"


def test_controls_and_bidi_overrides_become_spaces() -> None:
    assert upstream_message("line\none\x1b[2J\u202etwo\x00") == "line one two"


def test_long_text_is_cut_with_an_ellipsis() -> None:
    kept = upstream_message("word " * 500, max_chars=40)
    assert kept is not None and len(kept) <= 40 and kept.endswith("…")


def test_nothing_usable_is_none() -> None:
    assert upstream_message(None) is None
    assert upstream_message(42) is None
    assert upstream_message(" \n\t ") is None
