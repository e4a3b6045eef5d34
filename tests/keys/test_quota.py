"""How one outcome of a key's request is split into usage rows by pool account."""

from __future__ import annotations

from imagebridge.keys import account_shares


def test_a_success_on_one_account_is_one_row_on_it() -> None:
    assert account_shares(2, 2, None, {"alpha": 2}) == [("alpha", 2, 2)]


def test_a_fan_out_over_two_accounts_is_a_row_each() -> None:
    assert account_shares(4, 4, None, {"alpha": 2, "beta": 2}) == [
        ("alpha", 2, 2),
        ("beta", 2, 2),
    ]


def test_images_no_account_is_known_for_stay_on_the_named_or_empty_account() -> None:
    # best effort: 3 of 4 delivered, the failed chunk's account is not known
    assert account_shares(4, 3, None, {"alpha": 3}) == [("alpha", 3, 3), ("", 1, 0)]
    # a failure names its account; nothing was served
    assert account_shares(2, 0, "beta", None) == [("beta", 2, 0)]
    # no pool at all: today's single row
    assert account_shares(1, 1, None, {}) == [("", 1, 1)]


def test_images_served_but_not_delivered_are_charged_to_their_account() -> None:
    assert account_shares(2, 1, None, {"alpha": 1, "beta": 1}) == [
        ("alpha", 1, 1),
        ("beta", 1, 0),
    ]
