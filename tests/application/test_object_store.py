"""``[artifacts.s3]`` becomes the object layer's settings, keys from the named variables.

The last test goes all the way: a config section and an environment that name the real S3
server's keys make a store that stores and reads an object there.
"""

from __future__ import annotations

import pytest

from imagebridge.application.object_store import s3_settings
from imagebridge.artifacts.s3.objects import S3ObjectStore
from imagebridge.config.model import S3ArtifactSettings
from imagebridge.contract.errors import BridgeError, ErrorCode
from tests.support.s3 import S3Server

NAMED = {"access_key_id_env": "BRIDGE_S3_KEY", "secret_access_key_env": "BRIDGE_S3_SECRET"}


def section(**values: object) -> S3ArtifactSettings:
    return S3ArtifactSettings.model_validate({"bucket": "images", **values})


def test_without_named_variables_the_standard_aws_chain_is_used() -> None:
    settings = s3_settings(section(), {"AWS_ACCESS_KEY_ID": "ignored-here"})
    assert settings.credentials is None
    assert (settings.bucket, settings.region, settings.addressing_style) == (
        "images",
        "us-east-1",
        "auto",
    )
    assert (settings.connect_timeout_secs, settings.read_timeout_secs) == (5.0, 30.0)


def test_named_variables_supply_the_keys_and_never_show_in_repr() -> None:
    settings = s3_settings(
        section(**NAMED, session_token_env="BRIDGE_S3_TOKEN"),
        {"BRIDGE_S3_KEY": "AKIAEXAMPLE", "BRIDGE_S3_SECRET": "s3cr3t", "BRIDGE_S3_TOKEN": "tok"},
    )
    assert settings.credentials is not None
    assert settings.credentials.access_key_id == "AKIAEXAMPLE"
    assert settings.credentials.secret_access_key == "s3cr3t"
    assert settings.credentials.session_token == "tok"
    assert "s3cr3t" not in repr(settings) and "AKIAEXAMPLE" not in repr(settings)


@pytest.mark.parametrize("environ", [{}, {"BRIDGE_S3_KEY": "k", "BRIDGE_S3_SECRET": ""}])
def test_a_named_variable_that_is_missing_is_a_configuration_error(
    environ: dict[str, str],
) -> None:
    with pytest.raises(BridgeError) as caught:
        s3_settings(section(**NAMED), environ)
    assert caught.value.code is ErrorCode.CONFIGURATION
    assert caught.value.details["field"].startswith("artifacts.s3.")


def test_no_bucket_is_a_configuration_error() -> None:
    with pytest.raises(BridgeError) as caught:
        s3_settings(S3ArtifactSettings())
    assert caught.value.details == {"field": "artifacts.s3.bucket"}


@pytest.mark.s3
async def test_a_configured_store_reaches_the_real_server(
    s3_server: S3Server, s3_prefix: str
) -> None:
    settings = s3_settings(
        section(
            **NAMED,
            bucket=s3_server.bucket,
            endpoint=s3_server.endpoint,
            region=s3_server.region,
            key_prefix=s3_prefix,
            addressing_style="path",
        ),
        {
            "BRIDGE_S3_KEY": s3_server.access_key_id,
            "BRIDGE_S3_SECRET": s3_server.secret_access_key,
        },
    )
    async with S3ObjectStore(settings) as store:
        await store.check()
        await store.put("configured.txt", b"configured")
        async with await store.get("configured.txt") as stream:
            assert await stream.read(100) == b"configured"
