"""The S3 object layer against a real S3 server (Ceph RADOS Gateway, ``scripts/s3-server``).

What a caller of :class:`S3ObjectStore` can observe: bytes round-trip through one PUT and
through a multipart upload; a failed or cancelled multipart upload leaves no object and
no upload; a process killed mid-upload leaves an upload that the stale sweep aborts once it
is old enough (and not before); a presigned URL works with no credentials and not when
tampered with; a stopped server, wrong keys and a missing bucket are ``artifact`` errors
with stable reasons, and the same store works again once the server is back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from imagebridge.artifacts.s3.leftovers import abort_stale_uploads
from imagebridge.artifacts.s3.objects import MIN_PART_SIZE, S3Credentials, S3ObjectStore, S3Settings
from imagebridge.contract.errors import BridgeError, ErrorCode
from tests.support.s3 import S3Server

pytestmark = pytest.mark.s3

DEADLINE_S = 60.0


def settings_for(server: S3Server, prefix: str, **changes: object) -> S3Settings:
    quick = {
        "part_size_bytes": MIN_PART_SIZE,
        "connect_timeout_secs": 2.0,
        "read_timeout_secs": 20.0,
    }
    return server.settings(prefix, **{**quick, **changes})


@pytest.fixture
async def store(s3_server: S3Server, s3_prefix: str) -> AsyncIterator[S3ObjectStore]:
    async with S3ObjectStore(settings_for(s3_server, s3_prefix)) as opened:
        yield opened


async def read_all(store: S3ObjectStore, key: str) -> bytes:
    async with await store.get(key) as stream:
        return b"".join([chunk async for chunk in stream.chunks(256 * 1024)])


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310 - a test URL
            return int(answer.status), bytes(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def reason(error: BridgeError) -> object:
    return error.details.get("reason")


async def test_an_object_round_trips_with_its_type_metadata_and_listing(
    store: S3ObjectStore,
) -> None:
    payload = os.urandom(4 * 1024 * 1024)
    put = await store.put(
        "a/image.png", payload, content_type="image/png", metadata={"artifact-id": "x1"}
    )
    assert put.size == len(payload) and put.etag

    head = await store.head("a/image.png")
    assert head is not None
    assert (head.size, head.content_type, dict(head.metadata)) == (
        len(payload),
        "image/png",
        {"artifact-id": "x1"},
    )
    assert head.etag == put.etag
    async with await store.get("a/image.png") as stream:
        assert stream.info.size == len(payload)
        pieces = [chunk async for chunk in stream.chunks(1024 * 1024)]
    assert max(len(p) for p in pieces) <= 1024 * 1024 and b"".join(pieces) == payload
    await store.put("b/other.txt", b"other")
    assert [info.key for info in await store.list_objects("a/", limit=10)] == ["a/image.png"]
    assert [info.key for info in await store.list_objects(limit=10)] == [
        "a/image.png",
        "b/other.txt",
    ]
    assert len(await store.list_objects(limit=1)) == 1

    await store.delete("a/image.png")
    await store.delete("a/image.png")  # absent: not an error
    assert await store.head("a/image.png") is None
    with pytest.raises(BridgeError) as caught:
        await store.get("a/image.png")
    assert caught.value.code is ErrorCode.ARTIFACT and reason(caught.value) == "not_found"


async def test_a_large_object_goes_up_in_parts_and_reads_back_whole(
    store: S3ObjectStore,
) -> None:
    payload = os.urandom(2 * MIN_PART_SIZE + 12345)
    info = await store.put("big.bin", payload)
    assert info.size == len(payload)
    assert info.etag.strip('"').endswith("-3")  # a multipart ETag names its part count
    assert await read_all(store, "big.bin") == payload
    assert await store.incomplete_uploads(limit=10) == []


async def test_a_multipart_upload_whose_source_fails_is_aborted(store: S3ObjectStore) -> None:
    async def failing() -> AsyncIterator[bytes]:
        yield os.urandom(MIN_PART_SIZE + 1)  # one part goes up before the failure
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        await store.put_stream("broken.bin", failing())
    assert await store.head("broken.bin") is None
    assert await store.incomplete_uploads(limit=10) == []


async def test_an_upload_cancelled_while_the_store_creates_it_is_aborted(
    store: S3ObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = asyncio.Event()
    create = store._s3.create_multipart_upload

    async def slow_answer(**arguments: Any) -> Any:
        answer = await create(**arguments)
        created.set()  # the store made it; its answer is late (a loaded machine)
        await asyncio.sleep(1.0)
        return answer

    monkeypatch.setattr(store._s3, "create_multipart_upload", slow_answer)

    async def chunks() -> AsyncIterator[bytes]:
        yield os.urandom(10)

    task = asyncio.create_task(store.put_stream("created.bin", chunks()))
    await asyncio.wait_for(created.wait(), DEADLINE_S)
    assert [upload.key for upload in await store.incomplete_uploads(limit=10)] == ["created.bin"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.incomplete_uploads(limit=10) == []


async def test_a_cancelled_multipart_upload_is_aborted(store: S3ObjectStore) -> None:
    never = asyncio.Event()

    async def stalls() -> AsyncIterator[bytes]:
        yield os.urandom(MIN_PART_SIZE)
        yield os.urandom(10)  # part 1 is uploaded before the source is asked again
        await never.wait()

    task = asyncio.create_task(store.put_stream("stalled.bin", stalls()))
    deadline = time.monotonic() + DEADLINE_S
    while not await store.incomplete_uploads(limit=10):
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.incomplete_uploads(limit=10) == []
    assert await store.head("stalled.bin") is None


_KILLED_WRITER = textwrap.dedent(
    """
    import asyncio, os, sys, json
    from imagebridge.artifacts.s3.objects import S3Credentials, S3ObjectStore, S3Settings

    async def main():
        s = json.loads(sys.argv[1])
        settings = S3Settings(
            bucket=s["bucket"], endpoint=s["endpoint"], region=s["region"],
            key_prefix=s["prefix"], addressing_style="path", part_size_bytes=s["part"],
            credentials=S3Credentials(s["key"], s["secret"]),
        )
        async def source():
            yield os.urandom(s["part"])
            yield b"x"  # asked for once part 1 is stored
            print("part stored", flush=True)
            await asyncio.Event().wait()
        async with S3ObjectStore(settings) as store:
            await store.put_stream("killed.bin", source())

    asyncio.run(main())
    """
)


async def test_an_upload_left_by_a_killed_process_is_aborted_by_the_stale_sweep(
    s3_server: S3Server, s3_prefix: str, store: S3ObjectStore
) -> None:
    import json

    spec = {
        "bucket": s3_server.bucket,
        "endpoint": s3_server.endpoint,
        "region": s3_server.region,
        "prefix": s3_prefix,
        "part": MIN_PART_SIZE,
        "key": s3_server.access_key_id,
        "secret": s3_server.secret_access_key,
    }
    writer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _KILLED_WRITER, json.dumps(spec), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert writer.stdout is not None
        line = await asyncio.wait_for(writer.stdout.readline(), DEADLINE_S)
        assert line.strip() == b"part stored"
    finally:
        writer.send_signal(signal.SIGKILL)
        await asyncio.wait_for(writer.wait(), DEADLINE_S)

    [left] = await store.incomplete_uploads(limit=10)
    assert left.key == "killed.bin"
    assert await abort_stale_uploads(store, 3600, limit=10) == 0  # a live writer's age
    assert len(await store.incomplete_uploads(limit=10)) == 1
    assert await abort_stale_uploads(store, 0, limit=10, now=time.time() + 5) == 1
    assert await store.incomplete_uploads(limit=10) == []
    assert await store.head("killed.bin") is None


async def test_a_presigned_get_needs_no_credentials_and_cannot_be_altered(
    store: S3ObjectStore,
) -> None:
    await store.put("shared.png", b"presigned bytes", content_type="image/png")
    url = await store.presign_get("shared.png", 60)
    assert await asyncio.to_thread(fetch, url) == (200, b"presigned bytes")
    await store.put("other.png", b"not for you")
    tampered = url.replace("shared.png", "other.png")
    status, _ = await asyncio.to_thread(fetch, tampered)
    assert status == 403
    with pytest.raises(BridgeError) as caught:
        await store.presign_get("shared.png", 0)
    assert reason(caught.value) == "invalid_expiry"


async def test_a_stopped_server_is_a_retryable_error_and_the_store_works_when_it_returns(
    s3_server: S3Server, s3_prefix: str
) -> None:
    # Two attempts per call (one retry, as by default, but a shorter wait for the test).
    async with S3ObjectStore(settings_for(s3_server, s3_prefix, max_attempts=2)) as store:
        await _stop_and_resume(s3_server, store)


async def _stop_and_resume(s3_server: S3Server, store: S3ObjectStore) -> None:
    await store.put("before.txt", b"before")
    s3_server.halt_gateway()
    try:
        started = time.monotonic()
        for attempt in (
            store.put("during.txt", b"during"),
            store.get("before.txt"),
            store.head("before.txt"),
            store.check(),
        ):
            with pytest.raises(BridgeError) as caught:
                await attempt
            error = caught.value
            assert error.code is ErrorCode.ARTIFACT
            assert reason(error) == "store_unavailable" and error.retryable
            assert "127.0.0.1" not in error.message and s3_server.access_key_id not in str(
                error.details
            )
        assert time.monotonic() - started < DEADLINE_S
    finally:
        s3_server.resume_gateway()
    await store.check()
    await store.put("after.txt", b"after")
    assert await read_all(store, "before.txt") == b"before"
    assert await read_all(store, "after.txt") == b"after"
    assert await store.head("during.txt") is None


async def test_wrong_keys_and_a_missing_bucket_are_not_retryable(
    s3_server: S3Server, s3_prefix: str
) -> None:
    wrong = settings_for(
        s3_server, s3_prefix, credentials=S3Credentials(s3_server.access_key_id, "x" * 40)
    )
    async with S3ObjectStore(wrong) as store:
        with pytest.raises(BridgeError) as caught:
            await store.put("k", b"v")
    assert reason(caught.value) == "store_refused" and not caught.value.retryable
    assert caught.value.details.get("status") == 403

    missing = settings_for(s3_server, s3_prefix, bucket="no-such-bucket-here")
    async with S3ObjectStore(missing) as store:
        with pytest.raises(BridgeError) as caught:
            await store.put("k", b"v")
    assert reason(caught.value) == "bucket_missing" and not caught.value.retryable


async def test_a_read_is_bounded_and_keys_are_checked(store: S3ObjectStore) -> None:
    await store.put("sized.bin", b"x" * 1000)
    async with await store.get("sized.bin") as stream:
        with pytest.raises(BridgeError) as caught:
            await stream.read(999)
    assert reason(caught.value) == "too_large"
    async with await store.get("sized.bin") as stream:
        assert await stream.read(1000) == b"x" * 1000
    for bad in ("", "/absolute", "nul\x00byte", "k" * 1000):
        with pytest.raises(BridgeError) as caught:
            await store.put(bad, b"v")
        assert reason(caught.value) == "invalid_key"
