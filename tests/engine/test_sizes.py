"""Honest sizes: the caller's ask against the delivered pixels, and the match statistics."""

from __future__ import annotations

from imagebridge.contract.enums import Resolution, SizeMismatchPolicy
from imagebridge.contract.request import GenerationParameters
from imagebridge.engine.size_stats import SizeMatchStats
from imagebridge.engine.sizes import size_mismatch_error, size_report


def params(**values: object) -> GenerationParameters:
    return GenerationParameters.model_validate(values)


def test_nothing_asked_nothing_reported() -> None:
    assert size_report(params(), "auto", [(0, 10, 10)]) is None


def test_an_ask_normalized_away_is_reported_against_the_ask() -> None:
    report = size_report(params(size="2048x2048"), "auto", [(0, 1254, 1254)])
    assert report is not None and not report.matched
    [change] = report.normalizations
    assert (change.field, change.requested, change.effective) == (
        "parameters.size",
        "2048x2048",
        "1254x1254",
    )


def test_the_original_normalization_is_not_repeated() -> None:
    report = size_report(params(size="2048x2048"), "2048x2048", [(0, 1254, 1254)])
    assert report is not None and not report.matched and report.normalizations == []


def test_a_resolution_tier_is_compared_by_tier() -> None:
    report = size_report(params(resolution="2k"), "auto", [(0, 2048, 1152), (1, 1254, 1254)])
    assert report is not None and not report.matched
    assert [(n.field, n.requested, n.effective) for n in report.normalizations] == [
        ("data[1].resolution", "2k", "1k")
    ]
    matched = size_report(params(resolution="2k"), "auto", [(0, 2048, 1152)])
    assert matched is not None and matched.matched


def test_fail_policy_refuses_a_mismatch_only() -> None:
    report = size_report(params(size="64x64"), "64x64", [(0, 32, 32)])
    assert report is not None
    error = size_mismatch_error(report, SizeMismatchPolicy.FAIL)
    assert error is not None and error.details["billed"] is True
    assert size_mismatch_error(report, SizeMismatchPolicy.ACCEPT) is None
    assert size_mismatch_error(report, None) is None


def test_stats_keep_the_last_window_and_pick_the_best() -> None:
    stats = SizeMatchStats(window=3)
    for matched in (True, True, True, False):
        stats.record("a", "m", Resolution.TWO_K, matched)
    stats.record("b", "m", Resolution.TWO_K, True)
    rate = stats.rate("a", Resolution.TWO_K)
    assert rate is not None and (rate.calls, rate.matched) == (3, 2)
    assert stats.best(["a", "b"], Resolution.TWO_K) == "b"
    assert stats.best(["a", "b"], Resolution.FOUR_K) is None
    assert stats.snapshot()["a"]["m"]["2k"] == {"calls": 3, "matched": 2, "rate": 0.6667}
