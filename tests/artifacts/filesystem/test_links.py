"""Signed artifact links: one shared key per artifact root, one artifact per link."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from imagebridge.artifacts.filesystem.links import KEY_FILENAME, LinkKeySource, SignedArtifactLinks
from imagebridge.contract import BridgeError, ErrorCode
from imagebridge.engine.publishing import PublishedArtifact

ID = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
OTHER = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"


def links(root: Path, now: float = 1_000_000.0, ttl: int = 3600) -> SignedArtifactLinks:
    return SignedArtifactLinks(LinkKeySource(root), ttl, clock=lambda: now)


def parts(link: str) -> tuple[str, str, str, str]:
    path, query = link.split("?")
    _, _, artifact_id, basename = path.split("/")
    fields = dict(item.split("=") for item in query.split("&"))
    return artifact_id, basename, fields["expires"], fields["signature"]


def refused(signer: SignedArtifactLinks, *args: str) -> str:
    with pytest.raises(BridgeError) as caught:
        signer.verify(*args)
    assert caught.value.code is ErrorCode.PERMISSION_DENIED
    reason: str = caught.value.details["reason"]
    return reason


async def test_a_link_names_its_artifact_and_expires_after_the_ttl(tmp_path: Path) -> None:
    link = await links(tmp_path).link(PublishedArtifact(ID, "shots/red/hero.png"))
    assert link.startswith(f"v1/artifact-links/{ID}/hero.png?expires=1003600&signature=")
    artifact_id, basename, expires, signature = parts(link)
    assert links(tmp_path, now=1_003_599).verify(artifact_id, basename, expires, signature) == ID
    assert refused(links(tmp_path, now=1_003_600), *parts(link)) == "expired_link"


async def test_any_changed_part_breaks_the_signature(tmp_path: Path) -> None:
    signer = links(tmp_path)
    artifact_id, basename, expires, signature = parts(
        await signer.link(PublishedArtifact(ID, "a.png"))
    )
    flipped = ("B" if signature[0] == "A" else "A") + signature[1:]
    for changed in (
        (OTHER, basename, expires, signature),
        (artifact_id, "b.png", expires, signature),
        (artifact_id, basename, str(int(expires) + 1), signature),
        (artifact_id, basename, expires, flipped),
        (artifact_id.upper(), basename, expires, signature),
        (artifact_id, basename, "", signature),
        (artifact_id, basename, expires, ""),
        (artifact_id, "../a.png", expires, signature),
        ("not-an-id", basename, expires, signature),
    ):
        assert refused(signer, *changed) == "invalid_link"


async def test_an_expired_and_altered_link_is_invalid_not_expired(tmp_path: Path) -> None:
    link = await links(tmp_path).link(PublishedArtifact(ID, "a.png"))
    artifact_id, _, expires, signature = parts(link)
    late = links(tmp_path, now=2_000_000)
    assert refused(late, artifact_id, "b.png", expires, signature) == "invalid_link"


async def test_instances_on_one_root_share_one_key(tmp_path: Path) -> None:
    first, second = links(tmp_path), links(tmp_path)
    barrier = threading.Barrier(8)
    keys: list[bytes] = []

    def load() -> None:
        barrier.wait()
        keys.append(SignedArtifactLinks(LinkKeySource(tmp_path), 60).key())

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(set(keys)) == 1
    link = await first.link(PublishedArtifact(ID, "a.png"))
    assert second.verify(*parts(link)) == ID
    key_file = tmp_path / KEY_FILENAME
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert bytes.fromhex(key_file.read_text()) == keys[0]
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILENAME]  # no temp file left


async def test_another_root_does_not_accept_the_link(tmp_path: Path) -> None:
    link = await links(tmp_path / "a").link(PublishedArtifact(ID, "a.png"))
    assert refused(links(tmp_path / "b"), *parts(link)) == "invalid_link"


def test_a_malformed_key_file_is_an_artifact_error(tmp_path: Path) -> None:
    (tmp_path / KEY_FILENAME).write_text("not a key")
    with pytest.raises(BridgeError) as caught:
        links(tmp_path).key()
    assert caught.value.code is ErrorCode.ARTIFACT
    assert caught.value.details == {"field": "artifacts.root", "file": KEY_FILENAME}


async def test_a_key_from_the_environment_replaces_the_file(tmp_path: Path) -> None:
    secret = "s" * 40
    source = LinkKeySource(tmp_path, env_name="LINK_KEY", environ={"LINK_KEY": secret})
    signer = SignedArtifactLinks(source, 60, clock=lambda: 5.0)
    assert signer.key() == secret.encode()
    assert not (tmp_path / KEY_FILENAME).exists()
    link = await signer.link(PublishedArtifact(ID, "a.png"))
    assert signer.verify(*parts(link)) == ID
    short = LinkKeySource(tmp_path, env_name="LINK_KEY", environ={"LINK_KEY": "short"})
    with pytest.raises(BridgeError) as caught:
        await SignedArtifactLinks(short, 60).ready()
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert "short" not in caught.value.message


def test_a_root_reached_through_a_symlink_holds_the_key(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    key = links(tmp_path / "linked").key()
    assert bytes.fromhex((tmp_path / "real" / KEY_FILENAME).read_text()) == key
