"""``imagegen-bridge keys …``: the key store in the jobs database, administered locally."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from imagebridge.storage import SqliteKeyStore
from imagebridge.storage.records import KeyUsage
from tests.cli.conftest import Cli


def test_create_prints_the_secret_once_and_keeps_only_its_hash(cli: Cli) -> None:
    made = cli("--json", "keys", "create", "alice", "--images-per-day", "5",
               "--providers", "mock,codex-responses", "--expires", "2099-12-31")  # fmt: skip
    assert made.code == 0, made.stderr
    body = made.json()
    secret = body["secret"]
    assert secret.startswith("ibk_") and len(secret) >= 47
    assert body["key"]["images_per_day"] == 5
    assert body["key"]["providers"] == ["mock", "codex-responses"]
    # Valid through 2099-12-31 (UTC by default): it expires at the next midnight.
    assert body["key"]["expires_at"] == int(datetime(2100, 1, 1, tzinfo=UTC).timestamp())

    listed = cli("--json", "keys", "list")
    shown = cli("--json", "keys", "show", "alice")
    assert [k["name"] for k in listed.json()["items"]] == ["alice"]
    assert shown.json()["prefix"] == secret[:12]
    assert secret not in listed.stdout + shown.stdout
    database = cli.data / "jobs.sqlite3"
    assert secret.encode() not in database.read_bytes()

    human = cli("keys", "create", "bob")
    assert human.code == 0
    assert "shown once" in human.stderr
    assert any(line.startswith("ibk_") for line in human.stdout.splitlines())


def test_update_revoke_rotate_and_audit(cli: Cli) -> None:
    cli("--json", "keys", "create", "carol", "--images-per-week", "10")
    updated = cli("--json", "keys", "update", "carol", "--images-per-week", "none",
                  "--max-concurrent", "2")  # fmt: skip
    assert updated.code == 0, updated.stderr
    assert updated.json()["images_per_week"] is None
    assert updated.json()["max_concurrent"] == 2
    rotated = cli("--json", "keys", "rotate", "carol")
    assert rotated.json()["secret"].startswith("ibk_")
    revoked = cli("--json", "keys", "revoke", "carol")
    assert revoked.json()["state"] == "revoked"
    again = cli("--json", "keys", "rotate", "carol")
    assert again.code == 2
    missing = cli("--json", "keys", "show", "nobody")
    assert missing.code == 2 and missing.error()["code"] == "invalid_request"

    audit = cli("--json", "keys", "audit", "--key", "carol").json()["items"]
    assert [entry["action"] for entry in audit] == ["create", "update", "rotate", "revoke"]
    assert all(entry["actor"].startswith("cli") for entry in audit)
    bad = cli("--json", "keys", "update", "carol", "--images-per-day", "lots")
    assert bad.code == 2


def test_an_expiry_before_1970_is_refused_on_its_field(cli: Cli) -> None:
    for args in (("create", "eve"), ("update", "dan")):
        if args[0] == "update":
            assert cli("--json", "keys", "create", "dan").code == 0
        refused = cli("--json", "keys", *args, "--expires", "1960-01-01")
        assert refused.code == 2, refused.stderr
        error = refused.error()
        assert (error["code"], error["details"]["field"]) == ("invalid_request", "expires_at")
    assert [k["name"] for k in cli("--json", "keys", "list").json()["items"]] == ["dan"]


def test_usage_as_json_and_csv(cli: Cli) -> None:
    key_id = cli("--json", "keys", "create", "dan").json()["key"]["id"]

    async def record() -> None:
        store = await SqliteKeyStore.open(cli.data / "jobs.sqlite3")
        try:
            await store.record_usage(KeyUsage(key_id, "2026-01-04", "mock", "", 3, 2, 1, 0))
            await store.record_usage(KeyUsage(key_id, "2026-01-05", "mock", "a", 1, 0, 0, 1))
        finally:
            await store.close()

    asyncio.run(record())
    rows = cli("--json", "keys", "usage", "--key", "dan").json()["items"]
    assert [(r["day"], r["requested"], r["key_name"]) for r in rows] == [
        ("2026-01-04", 3, "dan"),
        ("2026-01-05", 1, "dan"),
    ]
    table = cli("keys", "usage", "--csv", "--since", "2026-01-05")
    assert table.code == 0
    assert table.stdout.splitlines() == [
        "day,key_name,key_id,provider,account,requested,delivered,failed,unknown,total_tokens",
        f"2026-01-05,dan,{key_id},mock,a,1,0,0,1,0",
    ]
