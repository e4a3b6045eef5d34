"""History query rules of ``GET /v1/jobs`` as pure values."""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.contract import BridgeError
from imagebridge.contract.enums import ImageJobStatus
from imagebridge.jobs import job_query
from imagebridge.storage import JobVisibility, encode_job_cursor


def test_absent_keys_take_the_defaults() -> None:
    query = job_query()
    assert (query.limit, query.visibility, query.status) == (20, JobVisibility.ACTIVE, None)
    assert (query.cursor, query.favorite, query.search) == (None, None, None)


@pytest.mark.parametrize(
    ("include_deleted", "visibility", "shown"),
    [
        (True, None, JobVisibility.ALL),
        (False, None, JobVisibility.ACTIVE),
        (None, "hidden", JobVisibility.HIDDEN),
        (False, "hidden", JobVisibility.HIDDEN),
        (False, "all", JobVisibility.ALL),
    ],
)
def test_include_deleted_is_an_alias_that_only_conflicts_when_true(
    include_deleted: bool | None, visibility: str | None, shown: JobVisibility
) -> None:
    assert job_query(include_deleted=include_deleted, visibility=visibility).visibility is shown


def test_values_are_normalized() -> None:
    cursor = encode_job_cursor(5, "01900000-0000-7000-8000-000000000001")
    query = job_query(limit=100, status="running", search="  Fox  ", cursor=cursor, favorite=True)
    assert query.status is ImageJobStatus.RUNNING and query.search == "Fox"
    assert (query.limit, query.cursor, query.favorite) == (100, cursor, True)
    assert job_query(search=" \t ").search is None


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"limit": True}, "limit"),
        ({"limit": "20"}, "limit"),
        ({"favorite": "true"}, "favorite"),
        ({"include_deleted": 1}, "include_deleted"),
        ({"status": 3}, "status"),
        ({"search": 5}, "search"),
    ],
)
def test_values_of_the_wrong_type_are_invalid_queries(values: dict[str, Any], field: str) -> None:
    with pytest.raises(BridgeError) as caught:
        job_query(**values)
    assert caught.value.message == "job query parameters are invalid"
    assert caught.value.field == field


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "MTox",  # "1:1": the id is not a UUID
        encode_job_cursor(5, "01900000-0000-7000-8000-000000000001") + "=",
        "x" * 300,
    ],
)
def test_malformed_cursors_are_refused(cursor: str) -> None:
    with pytest.raises(BridgeError) as caught:
        job_query(cursor=cursor)
    assert caught.value.message == "job cursor is malformed"


def test_search_of_512_bytes_is_accepted() -> None:
    assert job_query(search="é" * 256).search == "é" * 256
