"""``artifacts migrate --to s3|filesystem`` and ``artifacts verify``, against a real S3 server.

Artifacts made by the CLI on the filesystem are copied into a bucket with their ids,
names, owners and sidecars; a second run copies nothing (resumable); the copies verify,
read back byte for byte through the S3 store, and a copy altered in the bucket fails
``verify`` with exit status 1. What the filesystem does not vouch for is never copied.
Back: the bucket's artifacts are published into an empty ``artifacts.root`` with the
same ids, names, bytes and sidecars, resumably; what the bucket does not vouch for (an
altered object) is never copied, and a name taken by another file is never overwritten.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from imagebridge.application.object_store import s3_settings
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.artifacts.s3.store import S3ArtifactStore
from imagebridge.config.model import S3ArtifactSettings
from tests.artifacts.images import png
from tests.cli.conftest import Cli
from tests.support.s3 import S3Server

pytestmark = pytest.mark.s3


def s3_env(server: S3Server, prefix: str) -> dict[str, str]:
    section = "IMAGEGEN_BRIDGE__ARTIFACTS__S3__"
    return {
        f"{section}ENDPOINT": json.dumps(server.endpoint),
        f"{section}BUCKET": json.dumps(server.bucket),
        f"{section}REGION": json.dumps(server.region),
        f"{section}KEY_PREFIX": json.dumps(prefix),
        f"{section}ADDRESSING_STYLE": '"path"',
        f"{section}ACCESS_KEY_ID_ENV": '"BRIDGE_S3_KEY"',
        f"{section}SECRET_ACCESS_KEY_ENV": '"BRIDGE_S3_SECRET"',
        "BRIDGE_S3_KEY": server.access_key_id,
        "BRIDGE_S3_SECRET": server.secret_access_key,
    }


async def compare_and_alter(cli: Cli, server: S3Server, prefix: str, ids: list[str]) -> None:
    """Each copy reads back as the filesystem's bytes; then one image is altered."""
    section = S3ArtifactSettings.model_validate(
        {
            "endpoint": server.endpoint,
            "bucket": server.bucket,
            "key_prefix": prefix,
            "addressing_style": "path",
            "access_key_id_env": "K",
            "secret_access_key_env": "S",
        }
    )
    settings = s3_settings(section, {"K": server.access_key_id, "S": server.secret_access_key})
    async with S3ObjectStore(settings) as objects:
        store = S3ArtifactStore(objects)
        for artifact_id in ids:
            copy = await store.read(artifact_id, None)
            assert copy.data == (cli.artifacts / copy.name).read_bytes()
            assert await store.read_sidecar(artifact_id, None) is not None
        image_keys = [i.key for i in await objects.list_objects("images/", limit=10)]
        await objects.put(image_keys[0], png(3, 3))


def test_artifacts_move_into_the_bucket_verified_and_resumably(
    cli: Cli, s3_server: S3Server, s3_prefix: str
) -> None:
    env = s3_env(s3_server, s3_prefix)
    made = cli(
        "--json", "generate", "a fox", "--size", "16x16", "-n", "2",
        "--response-format", "artifact", "--metadata", "sidecar",
    )  # fmt: skip
    assert made.code == 0, made.stderr
    ids = sorted(item["id"] for item in made.json()["data"])
    (cli.artifacts / "stray.png").write_bytes(png(2, 2))  # not the bridge's: never copied

    dry = cli("--json", "artifacts", "migrate", "--to", "s3", "--dry-run", env=env)
    assert dry.code == 0, dry.stderr
    assert (dry.json()["scanned"], dry.json()["copied"]) == (2, 2)
    assert cli("--json", "artifacts", "verify", "--store", "s3", env=env).json()["scanned"] == 0

    moved = cli("--json", "artifacts", "migrate", "--to", "s3", "--force", env=env)
    assert moved.code == 0, moved.stderr
    assert (moved.json()["copied"], moved.json()["failed"]) == (2, [])
    again = cli("--json", "artifacts", "migrate", "--to", "s3", "--force", env=env).json()
    assert (again["copied"], again["already_present"]) == (0, 2)

    verified = cli("--json", "artifacts", "verify", "--store", "s3", env=env)
    assert verified.code == 0 and verified.json()["verified"] == 2
    local = cli("--json", "artifacts", "verify", env=env)
    assert local.code == 0 and local.json()["verified"] == 2

    asyncio.run(compare_and_alter(cli, s3_server, s3_prefix, ids))

    broken = cli("--json", "artifacts", "verify", "--store", "s3", env=env)
    assert broken.code == 1
    assert len(broken.json()["failed"]) == 1 and broken.json()["verified"] == 1


def test_artifacts_move_back_from_the_bucket_verified_and_resumably(
    cli: Cli, s3_server: S3Server, s3_prefix: str
) -> None:
    env = s3_env(s3_server, s3_prefix)
    made = cli(
        "--json", "generate", "a fox", "--size", "16x16", "-n", "3",
        "--response-format", "artifact", "--metadata", "sidecar",
    )  # fmt: skip
    assert made.code == 0, made.stderr
    items = {item["id"]: item for item in made.json()["data"]}
    assert cli("--json", "artifacts", "migrate", "--to", "s3", "--force", env=env).code == 0
    originals = {
        path.relative_to(cli.artifacts): path.read_bytes()
        for path in cli.artifacts.rglob("*")
        if path.is_file() and path.suffix in {".png", ".json"} and ".imagegen" not in str(path)
    }
    assert len(originals) == 6  # three images and three sidecars

    # back into an empty root on another host
    elsewhere = cli.data / "elsewhere"
    back_env = {**env, "IMAGEGEN_BRIDGE__ARTIFACTS__ROOT": json.dumps(str(elsewhere))}
    dry = cli("--json", "artifacts", "migrate", "--to", "filesystem", "--dry-run", env=back_env)
    assert dry.code == 0, dry.stderr
    assert (dry.json()["scanned"], dry.json()["copied"]) == (3, 3)
    assert not any(elsewhere.rglob("*.png"))  # a dry run writes nothing

    # one object altered in the bucket: the bucket does not vouch for it, never copied
    altered = sorted(items)[0]
    asyncio.run(alter_image(s3_server, s3_prefix, altered, items[altered]["name"]))
    moved = cli("--json", "artifacts", "migrate", "--to", "filesystem", "--force", env=back_env)
    assert moved.code == 0, moved.stderr
    report = moved.json()
    assert (report["copied"], report["skipped"], report["failed"]) == (2, 1, [])
    assert "artifacts migrate: 3/3" in moved.stderr or '"done": 3' in moved.stderr
    again = cli("--json", "artifacts", "migrate", "--to", "filesystem", "--force", env=back_env)
    assert (again.json()["copied"], again.json()["already_present"]) == (0, 2)

    for artifact_id, item in items.items():
        image = elsewhere / item["name"]
        if artifact_id == altered:
            assert not image.exists()
            continue
        assert image.read_bytes() == originals[image.relative_to(elsewhere)]
        sidecar = elsewhere / item["metadata_name"]
        assert sidecar.is_file()
        assert json.loads(sidecar.read_text()) == json.loads(
            originals[sidecar.relative_to(elsewhere)]
        )
    local = cli("--json", "artifacts", "verify", env=back_env)
    assert local.code == 0 and local.json()["verified"] == 2
    shown = cli("--json", "artifacts", "verify", "--store", "s3", env=back_env)
    assert shown.json()["verified"] == 2  # the bucket is left as it was (one still altered)

    # a name another file holds is never overwritten: failed, and the file kept
    crowded = cli.data / "crowded"
    crowded.mkdir()
    victim = next(i for i in items.values() if i["id"] != altered)
    (crowded / victim["name"]).write_bytes(b"someone else's file")
    crowded_env = {**env, "IMAGEGEN_BRIDGE__ARTIFACTS__ROOT": json.dumps(str(crowded))}
    clash = cli("--json", "artifacts", "migrate", "--to", "filesystem", "--force", env=crowded_env)
    assert clash.code == 1
    assert clash.json()["failed"] == [victim["id"]] and clash.json()["copied"] == 1
    assert (crowded / victim["name"]).read_bytes() == b"someone else's file"


async def alter_image(server: S3Server, prefix: str, artifact_id: str, name: str) -> None:
    section = S3ArtifactSettings.model_validate(
        {
            "endpoint": server.endpoint,
            "bucket": server.bucket,
            "key_prefix": prefix,
            "addressing_style": "path",
            "access_key_id_env": "K",
            "secret_access_key_env": "S",
        }
    )
    settings = s3_settings(section, {"K": server.access_key_id, "S": server.secret_access_key})
    async with S3ObjectStore(settings) as objects:
        await objects.put(f"images/{artifact_id}/{name}", png(3, 3))


def test_a_migration_names_its_target(cli: Cli) -> None:
    assert cli("artifacts", "migrate", "--to", "ftp", "--force").code == 2
    assert cli("artifacts", "migrate", "--to", "s3").code == 2  # neither --dry-run nor --force
    assert cli("artifacts", "migrate", "--to", "filesystem").code == 2
