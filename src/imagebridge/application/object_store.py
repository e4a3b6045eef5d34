"""``[artifacts.s3]`` → the plain settings of the S3 object layer, keys read from the environment.

The object layer (:mod:`imagebridge.artifacts.s3.objects`) never reads configuration or the
environment: this turns the section into :class:`S3Settings`, reading the static keys from
the variables the ``*_env`` keys name (all unset: ``credentials=None``, the standard AWS
chain). A named variable that is unset or empty is a ``configuration`` error naming the
field, never the value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import cast

from imagebridge.artifacts.s3.objects import AddressingStyle, S3Credentials, S3Settings
from imagebridge.config.model import S3ArtifactSettings
from imagebridge.contract.errors import BridgeError, ErrorCode

__all__ = ["s3_settings"]


def _read(environ: Mapping[str, str], field: str, name: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "an environment variable named by [artifacts.s3] is unset or empty",
            details={"field": f"artifacts.s3.{field}", "variable": name},
        )
    return value


def s3_settings(
    section: S3ArtifactSettings, environ: Mapping[str, str] | None = None
) -> S3Settings:
    """The object layer's settings for ``section`` (checked by ``config check`` before)."""
    env = os.environ if environ is None else environ
    credentials = None
    if section.access_key_id_env is not None and section.secret_access_key_env is not None:
        credentials = S3Credentials(
            access_key_id=_read(env, "access_key_id_env", section.access_key_id_env),
            secret_access_key=_read(env, "secret_access_key_env", section.secret_access_key_env),
            session_token=(
                _read(env, "session_token_env", section.session_token_env)
                if section.session_token_env is not None
                else None
            ),
        )
    if section.bucket is None:
        raise BridgeError(
            ErrorCode.CONFIGURATION,
            "the S3 artifact backend needs a bucket",
            details={"field": "artifacts.s3.bucket"},
        )
    return S3Settings(
        bucket=section.bucket,
        endpoint=section.endpoint,
        region=section.region,
        key_prefix=section.key_prefix,
        addressing_style=cast(AddressingStyle, section.addressing_style),
        credentials=credentials,
        part_size_bytes=section.part_size_bytes,
        connect_timeout_secs=section.connect_timeout_ms / 1000,
        read_timeout_secs=section.read_timeout_ms / 1000,
        max_attempts=section.max_attempts,
    )
