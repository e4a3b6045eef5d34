"""SqlitePresetStore: the original's sqlite_presets.rs test, name/description/template rules,
paging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage import (
    PresetStore,
    SqliteJobStore,
    SqlitePresetStore,
    encode_preset_cursor,
)
from imagebridge.storage.sqlite.presets import inspect_preset_schema

from ..conftest import SCOPE, job_id, request

TEMPLATE: dict[str, Any] = {"prompt": "a watercolor fox", "parameters": {"quality": "high"}}


def assert_not_found(error: BridgeError) -> None:
    assert error.code is ErrorCode.INVALID_REQUEST
    assert error.message == "preset was not found"
    assert error.details["resource"] == "preset"
    assert error.http_status == 404


async def test_preset_crud_is_durable_and_conflict_safe(db_path: Path) -> None:
    store = await SqlitePresetStore.open(db_path)
    created = await store.create("fox", description="watercolor", template_json=TEMPLATE, now=10)
    assert (created.created_at, created.updated_at) == (10, 10)
    assert created.template() == TEMPLATE
    assert [p.name for p in (await store.list()).items] == ["fox"]

    with pytest.raises(BridgeError) as duplicate:
        await store.create("fox", description=None, template_json={}, now=11)
    assert duplicate.value.code is ErrorCode.IDEMPOTENCY_CONFLICT
    assert duplicate.value.message == "a preset with this name already exists"
    assert duplicate.value.details == {"field": "name", "resource": "preset"}
    assert duplicate.value.http_status == 409
    assert (await store.get("fox")).template() == TEMPLATE

    replaced = await store.replace(
        "fox", description=None, template_json={"prompt": "an oil fox"}, now=12
    )
    assert (replaced.created_at, replaced.updated_at, replaced.description) == (10, 12, None)
    await store.close()

    reopened = await SqlitePresetStore.open(db_path)
    try:
        again = await reopened.get("fox")
        assert (again.created_at, again.updated_at) == (10, 12)
        assert again.template() == {"prompt": "an oil fox"}
        await reopened.delete("fox")
        with pytest.raises(BridgeError) as gone:
            await reopened.get("fox")
        assert_not_found(gone.value)
    finally:
        await reopened.close()


async def test_missing_presets_are_not_found(db_path: Path) -> None:
    async with await SqlitePresetStore.open(db_path) as store:
        for call in (
            store.get("nope"),
            store.replace("nope", description=None, template_json={}, now=1),
            store.delete("nope"),
        ):
            with pytest.raises(BridgeError) as caught:
                await call
            assert_not_found(caught.value)


@pytest.mark.parametrize("name", ["", "-lead", ".lead", "_lead", "a" * 65, "sp ace", "é", "a/b"])
async def test_invalid_names_are_refused_on_every_operation(db_path: Path, name: str) -> None:
    async with await SqlitePresetStore.open(db_path) as store:
        for call in (
            store.create(name, description=None, template_json={}, now=1),
            store.get(name),
            store.replace(name, description=None, template_json={}, now=1),
            store.delete(name),
        ):
            with pytest.raises(BridgeError) as caught:
                await call
            assert caught.value.code is ErrorCode.INVALID_REQUEST
            assert caught.value.field == "name"
            assert caught.value.http_status == 422


async def test_name_edges_are_accepted(db_path: Path) -> None:
    async with await SqlitePresetStore.open(db_path) as store:
        for name in ("a", "9", "A" + "b" * 63, "v1.2_final-cut"):
            assert (
                await store.create(name, description=None, template_json={}, now=1)
            ).name == name


async def test_description_rules(db_path: Path) -> None:
    async with await SqlitePresetStore.open(db_path) as store:
        for description in ("x" * 513, "é" * 257, "line\nbreak", "\x7f"):
            with pytest.raises(BridgeError) as caught:
                await store.create("p", description=description, template_json={}, now=1)
            assert caught.value.field == "description"
        edge = "é" * 256
        assert (await store.create("p", description=edge, template_json={}, now=1)).description
        assert (await store.create("q", description="", template_json={}, now=1)).description == ""


async def test_template_rules(db_path: Path) -> None:
    async with await SqlitePresetStore.open(db_path) as store:
        cases: list[tuple[Any, str]] = [
            ({"prompt": "   "}, "template.prompt"),
            ({"prompt": 3}, "template.prompt"),
            ({"images": []}, "template.images"),
            ({"reference_images": []}, "template.reference_images"),
            ({"mask": {}}, "template.mask"),
            ({"idempotency_key": "k"}, "template.idempotency_key"),
            ({"version": "1"}, "template.version"),
            ([1, 2], "template"),
            ("not json", "template"),
            ({"prompt": "x" * 300_000}, "template"),
        ]
        for template, field in cases:
            with pytest.raises(BridgeError) as caught:
                await store.create("p", description=None, template_json=template, now=1)
            assert caught.value.code is ErrorCode.INVALID_REQUEST
            assert caught.value.field == field, template
        assert (await store.list()).items == []
        stored = await store.create(
            "p", description=None, template_json='{"operation": "edit"}', now=1
        )
        assert stored.template() == {"operation": "edit"}


async def test_list_pages_by_name_after_an_exclusive_cursor(db_path: Path) -> None:
    names = ["beta", "Alpha", "alpha", "0-zero", "gamma"]
    async with await SqlitePresetStore.open(db_path) as store:
        for n, name in enumerate(names):
            await store.create(name, description=None, template_json={}, now=n)
        seen: list[str] = []
        cursor = None
        while True:
            page = await store.list(cursor=cursor, limit=2)
            seen.extend(p.name for p in page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == sorted(names)
        after_beta = await store.list(cursor=encode_preset_cursor("beta"))
        assert [p.name for p in after_beta.items] == ["gamma"]
        for bad in ("!!", encode_preset_cursor("-bad"), "a", "YWxwaGE="):
            with pytest.raises(BridgeError) as caught:
                await store.list(cursor=bad)
            assert caught.value.message == "preset cursor is malformed"
        for limit in (0, 101):
            with pytest.raises(BridgeError):
                await store.list(limit=limit)


async def test_presets_share_the_jobs_database_file(db_path: Path) -> None:
    jobs = await SqliteJobStore.open(db_path)
    presets = await SqlitePresetStore.open(db_path)
    try:
        await jobs.create(
            SCOPE, job_id(1), request("x"), "x", now=1, max_pending=5, max_database_bytes=1 << 30
        )
        await presets.create("shared", description=None, template_json={}, now=1)
        assert (await jobs.statistics()).total == 1
        assert (await presets.get("shared")).name == "shared"
    finally:
        await presets.close()
        await jobs.close()
    # Reopening in the other order still migrates cleanly, and each schema is reported apart.
    presets = await SqlitePresetStore.open(db_path)
    jobs = await SqliteJobStore.open(db_path)
    await jobs.close()
    await presets.close()
    assert (await inspect_preset_schema(db_path)).to_dict() == {
        "initialized": True,
        "version": 2,
        "current_version": 2,
    }


async def test_store_satisfies_the_protocol(db_path: Path) -> None:
    async with await SqlitePresetStore.open(db_path) as store:
        assert isinstance(store, PresetStore)


OWNER_A, OWNER_B = "key:aaaaaaaa", "key:bbbbbbbb"


async def test_each_owner_has_its_own_presets_and_reads_the_shared_ones_under_them(
    db_path: Path,
) -> None:
    async with await SqlitePresetStore.open(db_path) as store:
        await store.create("house", description="shared", template_json=TEMPLATE, now=1)
        await store.create("mine", description="a", template_json=TEMPLATE, now=2, owner=OWNER_A)
        # a name is unique per owner: B may take A's name, and A may shadow a shared one
        await store.create("mine", description="b", template_json={}, now=3, owner=OWNER_B)
        await store.create("house", description="a's", template_json={}, now=4, owner=OWNER_A)

        async def names(owner: str, *, shared: bool, limit: int = 10) -> list[str]:
            listed: list[str] = []
            cursor = None
            while True:
                page = await store.list(owner=owner, shared=shared, cursor=cursor, limit=limit)
                listed += [f"{p.name}:{p.description}" for p in page.items]
                if page.next_cursor is None:
                    return listed
                cursor = page.next_cursor

        assert await names("", shared=False) == ["house:shared"]
        assert await names(OWNER_A, shared=False) == ["house:a's", "mine:a"]
        assert await names(OWNER_A, shared=True, limit=1) == ["house:a's", "mine:a"]
        assert await names(OWNER_B, shared=True, limit=1) == ["house:shared", "mine:b"]

        assert (await store.get("house", owner=OWNER_A, shared=True)).description == "a's"
        assert (await store.get("house", owner=OWNER_B, shared=True)).description == "shared"
        assert (await store.get("mine", owner=OWNER_B)).description == "b"
        for call in (
            store.get("house", owner=OWNER_B),  # the shared one only with shared=True
            store.get("mine"),  # a key's preset is not shared
            store.replace("house", description=None, template_json={}, now=5, owner=OWNER_B),
            store.delete("house", owner=OWNER_B),
        ):
            with pytest.raises(BridgeError) as missing:
                await call
            assert_not_found(missing.value)

        await store.delete("mine", owner=OWNER_A)
        assert (await store.get("mine", owner=OWNER_B)).description == "b"
        await store.replace("house", description="new", template_json={}, now=6, owner=OWNER_A)
        assert (await store.get("house")).description == "shared"


async def test_a_database_of_presets_without_owners_is_migrated_to_shared_ones(
    db_path: Path,
) -> None:
    from imagebridge.storage.lifecycle import PRESET_STORE
    from imagebridge.storage.rules.schema import StoreSchema
    from imagebridge.storage.sqlite.database import SqliteDatabase
    from imagebridge.storage.sqlite.presets import PRESET_SCHEMA

    old = StoreSchema(PRESET_SCHEMA.recorded_as, PRESET_SCHEMA.migrations[:1])
    database = await SqliteDatabase.open(
        db_path, store_schema=old, code=PRESET_STORE.code, label=PRESET_STORE.label
    )
    await database.run(
        lambda conn: conn.execute(
            "INSERT INTO image_presets VALUES ('fox', 'old', '{\"prompt\": \"a fox\"}', 1, 2)"
        )
    )
    await database.close()
    assert (await inspect_preset_schema(db_path)).version == 1

    async with await SqlitePresetStore.open(db_path) as store:
        kept = await store.get("fox")
        assert (kept.description, kept.created_at, kept.updated_at) == ("old", 1, 2)
        assert kept.template() == {"prompt": "a fox"}
        assert (await store.get("fox", owner=OWNER_A, shared=True)).description == "old"
        await store.create("fox", description="a's", template_json={}, now=3, owner=OWNER_A)
    assert (await inspect_preset_schema(db_path)).version == 2
