"""Job and preset cursors: exact round trips and strict refusal of anything else."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    decode_job_cursor,
    decode_preset_cursor,
    encode_job_cursor,
    encode_preset_cursor,
)

ID = "01900000-0000-7000-8000-00000000002a"


def raw(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def test_job_cursor_format_is_base64url_without_padding() -> None:
    cursor = encode_job_cursor(1_700_000_000, ID)
    assert cursor == raw(f"1700000000:{ID}")
    assert "=" not in cursor
    assert decode_job_cursor(cursor) == (1_700_000_000, ID)


@given(created=st.integers(0, 2**63 - 1), value=st.uuids())
def test_job_cursor_round_trips(created: int, value: object) -> None:
    assert decode_job_cursor(encode_job_cursor(created, str(value))) == (created, str(value))


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "!!!!",
        "a",  # impossible base64 length
        raw(f"1:{ID}") + "=",  # padding is not part of the format
        raw(f"1:{ID}")[:-1] + "+",  # standard, not url-safe, alphabet
        raw(ID),  # no created part
        raw(f":{ID}"),
        raw(f"-1:{ID}"),
        raw(f"01:{ID}"),  # non-canonical number
        raw(f"{2**63}:{ID}"),
        raw(f"1:{ID.upper()}"),
        raw("1:not-a-uuid"),
        raw(f"1:{ID}:extra"),
        "A" * 300,
    ],
)
def test_malformed_job_cursors_are_refused(cursor: str) -> None:
    with pytest.raises(BridgeError) as caught:
        decode_job_cursor(cursor)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.message == "job cursor is malformed"
    assert caught.value.field == "cursor"
    assert caught.value.http_status == 422


def test_non_canonical_base64_is_refused() -> None:
    good = raw("1:" + ID)
    # Flip unused trailing bits of the last character: decodes the same, spelled differently.
    last = good[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = good[:-1] + alphabet[alphabet.index(last) ^ 1]
    assert twin != good
    assert base64.urlsafe_b64decode(twin + "=") == base64.urlsafe_b64decode(good + "=")
    with pytest.raises(BridgeError):
        decode_job_cursor(twin)


def test_preset_cursor_round_trip_and_refusals() -> None:
    assert decode_preset_cursor(encode_preset_cursor("my.preset-1")) == "my.preset-1"
    for bad in ("", raw("-lead"), raw("a" * 65), raw("é"), "***"):
        with pytest.raises(BridgeError) as caught:
            decode_preset_cursor(bad)
        assert caught.value.message == "preset cursor is malformed"
