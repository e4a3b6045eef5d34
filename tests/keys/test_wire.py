"""Bodies read with the key rules (each fault keeps its own answer), the admin API's
declared bodies in step with the contract models, and a record shown as a key view."""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.contract.keys import BridgeKeyCreate
from imagebridge.keys import KeyService, read_create, read_update
from tests.keys.conftest import make_key


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"images_per_day": -1}, "images_per_day", "must be an integer from 0 to 2147483648"),
        ({"images_per_week": True}, "images_per_week", "must be an integer from 0"),
        ({"images_per_month": "5"}, "images_per_month", "must be an integer from 0"),
        ({"max_concurrent": 0}, "max_concurrent", "must be an integer from 1"),
        ({"providers": []}, "providers", "providers must be a list of 1 to 32 provider names"),
        ({"expires_at": "2030"}, "expires_at", "expires_at must be a Unix time from 0"),
        ({"expires_at": -1}, "expires_at", "expires_at must be a Unix time from 0"),
        ({"expires_at": 2**63}, "expires_at", "to 9223372036854775807"),
        ({"colour": "red", "b": 1}, "b", "unknown key field: b"),  # the first, sorted
        ({"name": "bob"}, "name", "unknown key field: name"),  # an update has no name
    ],
)
def test_an_update_body_keeps_each_rules_own_answer(
    body: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(BridgeError) as refused:
        read_update(body)
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    assert refused.value.details["field"] == field and message in refused.value.message


def test_a_creation_checks_its_limits_and_leaves_the_name_to_the_store() -> None:
    with pytest.raises(BridgeError) as refused:
        read_create({"name": "bad name!", "images_per_day": -1})
    assert refused.value.details["field"] == "images_per_day"  # limits first, as before
    assert read_create({"name": 5}).name == ""  # refused by the store with the name's error
    made = read_create({"name": "ann", "providers": ["mock", "mock"], "max_concurrent": None})
    assert made == BridgeKeyCreate(name="ann", providers=["mock", "mock"], max_concurrent=None)
    assert made.changes() == {"providers": ["mock", "mock"], "max_concurrent": None}


async def test_a_name_the_store_refuses_answers_on_the_name(keys: KeyService) -> None:
    for name in ("", "bad name!"):
        with pytest.raises(BridgeError) as refused:
            await keys.create(read_create({"name": name}), actor="test")
        assert refused.value.details["field"] == "name"


async def test_a_key_view_shows_its_limits_and_a_reading_per_limited_window(
    keys: KeyService,
) -> None:
    record = await make_key(keys, "ann", images_per_day=5, providers=["mock", "mock"])
    view = keys.view(record)
    assert (view.name, view.state, view.providers) == ("ann", "active", ["mock"])
    assert list(view.remaining) == ["day"]
    assert view.remaining["day"].remaining == 5
    assert view.remaining["day"].reset_at == keys.windows().end("day")
    revoked = await keys.revoke(record.id, actor="test")
    assert revoked.state == "revoked" and revoked.revoked_at is not None
    issued = await keys.rotate((await make_key(keys, "bob")).id, actor="test")
    assert issued.secret.startswith(issued.key.prefix)
    with pytest.raises(BridgeError):
        await keys.rotate(record.id, actor="test")  # a revoked key keeps no secret
    assert [entry.action for entry in await keys.audit(record.id)] == ["create", "revoke"]


async def test_usage_names_each_rows_key_and_a_filter_that_names_none_finds_nothing(
    keys: KeyService,
) -> None:
    from imagebridge.storage.records import KeyUsage

    record = await make_key(keys, "ann")
    await keys.store.record_usage(KeyUsage(record.id, "2026-01-04", "mock", "", 1, 1, 0, 0))
    await keys.store.record_usage(KeyUsage("key_gone", "2026-01-04", "mock", "", 1, 0, 1, 0))
    rows = await keys.usage()
    assert rows is not None and [row.key_name for row in rows] == ["ann", None]
    for key in ("ann", record.id):
        by_key = await keys.usage(key=key)
        assert by_key is not None and [row.key_id for row in by_key] == [record.id]
    assert await keys.usage(key="nobody") is None
    assert (await keys.find("ann")).id == record.id
    assert (await keys.find(record.id)).name == "ann"
