"""``artifacts.backend = "s3"`` wiring, in process, on the real S3 server.

The engine publishes into the bucket (nothing under the local root, where no filesystem
store is built), the application's one backend reads it back, and ``artifacts.url_mode``
decides what a ``url`` output is: the bridge's signed link (``signed``, the default) or a
presigned URL of the object store, fetched from the store itself with no credentials
(``presigned``). With ``artifacts.s3.serve = "redirect"`` the artifact route answers a
verified artifact with a 307 to a presigned URL of its object.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from imagebridge.application import Application, build_application
from imagebridge.artifacts.publication import Publication
from imagebridge.config import BridgeConfig, load_config
from imagebridge.contract.request import ImageRequest
from imagebridge.engine.runtime import ExecutionContext
from imagebridge.imaging.ids import uuid7
from imagebridge.server.app import create_app
from imagebridge.server.state import BridgeState
from tests.artifacts.images import png
from tests.support.s3 import S3Server

pytestmark = pytest.mark.s3

BASE = "http://bridge.test/"


def bridge_state_of(app: Any) -> BridgeState:
    state: BridgeState = app.state.bridge
    return state


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch, s3_server: S3Server) -> None:
    """The S3 keys, in the variables the configuration names (read as the bridge starts)."""
    monkeypatch.setenv("TEST_S3_KEY", s3_server.access_key_id)
    monkeypatch.setenv("TEST_S3_SECRET", s3_server.secret_access_key)


def s3_config(tmp_path: Path, server: S3Server, prefix: str, *sets: str) -> BridgeConfig:
    env = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path)}
    s3 = [
        'default_provider="mock"',
        "providers.codex_responses.enabled=false",
        "providers.codex_app_server.enabled=false",
        'artifacts.backend="s3"',
        f"artifacts.s3.endpoint={json.dumps(server.endpoint)}",
        f"artifacts.s3.region={json.dumps(server.region)}",
        f"artifacts.s3.bucket={json.dumps(server.bucket)}",
        f"artifacts.s3.key_prefix={json.dumps(prefix)}",
        'artifacts.s3.addressing_style="path"',
        'artifacts.s3.access_key_id_env="TEST_S3_KEY"',
        'artifacts.s3.secret_access_key_env="TEST_S3_SECRET"',
    ]
    return load_config(env=env, sets=[*s3, *sets], cwd=tmp_path).config


async def url_output(app: Application) -> str:
    response = await app.runtime.execute(
        ImageRequest.model_validate(
            {
                "operation": "generate",
                "prompt": "a linked fox",
                "parameters": {"size": "16x16"},
                "output": {"response_format": "url"},
            }
        ),
        ExecutionContext(owner="anonymous-local", link_base=BASE),
    )
    [item] = response.data
    assert item.type == "url" and item.url is not None
    return item.url


async def test_the_engine_publishes_into_the_bucket(
    tmp_path: Path, s3_server: S3Server, s3_prefix: str
) -> None:
    app = build_application(s3_config(tmp_path, s3_server, s3_prefix))
    root = Path(app.config.artifacts.root)
    try:
        response = await app.runtime.execute(
            ImageRequest.model_validate(
                {
                    "operation": "generate",
                    "prompt": "fox",
                    "parameters": {"n": 2, "size": "16x16"},
                    "output": {"response_format": "artifact"},
                }
            )
        )
        for item in response.data:
            assert item.id is not None
            content = await app.artifacts.read(item.id, "anonymous-local")
            assert content.info.sha256 == item.sha256
            assert not (root / content.name).exists()
        # one backend: no filesystem store was built beside the bucket
        assert not (root / ".imagegen-bridge-ownership").exists()
        assert app.object_store is not None
        listed = await app.object_store.list_objects("ownership/", limit=10)
        assert len(listed) == 2
    finally:
        await app.aclose()


async def test_url_mode_signed_is_the_bridge_link_and_presigned_the_store_url(
    tmp_path: Path, s3_server: S3Server, s3_prefix: str
) -> None:
    signed = build_application(s3_config(tmp_path, s3_server, s3_prefix))
    try:
        assert (await url_output(signed)).startswith(BASE + "v1/artifact-links/")
    finally:
        await signed.aclose()
    app = build_application(
        s3_config(tmp_path, s3_server, s3_prefix, 'artifacts.url_mode="presigned"')
    )
    try:
        url = await url_output(app)
        assert url.startswith(s3_server.endpoint + "/")
        async with httpx.AsyncClient(timeout=30) as client:
            fetched = await client.get(url)  # no credentials: the signature is the permission
            assert fetched.status_code == 200
            assert fetched.content.startswith(b"\x89PNG")
            assert fetched.headers["content-type"] == "image/png"
            altered = await client.get(url.replace("Signature=", "Signature=0"))
            assert altered.status_code == 403
    finally:
        await app.aclose()


async def test_reads_redirect_to_a_presigned_url_when_configured(
    tmp_path: Path, s3_server: S3Server, s3_prefix: str
) -> None:
    config = s3_config(tmp_path, s3_server, s3_prefix, 'artifacts.s3.serve="redirect"')
    application = build_application(config)
    transport = httpx.ASGITransport(app=create_app(config, application=application))
    try:
        response = await application.runtime.execute(
            ImageRequest.model_validate(
                {
                    "operation": "generate",
                    "prompt": "a redirected fox",
                    "parameters": {"size": "16x16"},
                    "output": {"response_format": "artifact"},
                }
            ),
            ExecutionContext(owner="anonymous-local"),
        )
        [item] = response.data
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as bridge:
            answer = await bridge.get(f"/v1/artifacts/{item.id}")
            assert answer.status_code == 307
            assert answer.headers["cache-control"] == "private, no-store"
            location = answer.headers["location"]
            assert location.startswith(s3_server.endpoint + "/")
            thumbnail = await bridge.get(f"/v1/artifacts/{item.id}/thumbnail")
            assert thumbnail.status_code == 200  # made here, never redirected
            unknown = await bridge.get(f"/v1/artifacts/{uuid7()}")
            assert unknown.status_code == 404  # verified before any redirect
        async with httpx.AsyncClient(timeout=30) as client:
            fetched = await client.get(location)
        assert fetched.status_code == 200
        assert hashlib.sha256(fetched.content).hexdigest() == item.sha256
    finally:
        await application.aclose()


async def test_the_servers_repair_runs_on_the_bucket(
    tmp_path: Path, s3_server: S3Server, s3_prefix: str
) -> None:
    """The repair the server runs at start and periodically acts on the S3 backend: an
    ownership record whose image is gone (a crash mid-delete) is removed."""
    config = s3_config(tmp_path, s3_server, s3_prefix)
    application = build_application(config)
    state = bridge_state_of(create_app(config, application=application))
    try:
        published = await application.artifacts.publish(
            Publication(png(8, 8), expected_format="png", owner="anonymous-local")
        )
        assert application.object_store is not None
        await application.object_store.delete(f"images/{published.id}/{published.name}")
        assert state.recovery is not None
        report = await state.recovery.run_once()
        assert report is not None
        assert (report.orphaned_records, report.repaired) == (1, 1)
        assert await application.object_store.list_objects("", limit=10) == []
    finally:
        await application.aclose()
