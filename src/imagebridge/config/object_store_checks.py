"""Checks of ``artifacts.backend`` and ``[artifacts.s3]`` (the S3-compatible object store).

The section is checked whatever the backend, so a mistake shows before anyone switches to
it; ``backend = "s3"`` needs a bucket.
"""

from __future__ import annotations

import re

from imagebridge.config._net import ENV_NAME_RULE, is_env_name, valid_service_endpoint
from imagebridge.config.model import (
    ARTIFACT_BACKENDS,
    ARTIFACT_URL_MODES,
    S3_ADDRESSING_STYLES,
    S3_SERVE_MODES,
    BridgeConfig,
)
from imagebridge.config.store_checks import Report

__all__ = ["check_object_store"]

_MiB = 1024 * 1024
_MIN_PART = 5 * _MiB
_MAX_PART = 5 * 1024 * _MiB
_MAX_TIMEOUT_MS = 10 * 60 * 1000
_MIN_STALE_UPLOAD_SECS = 60
_MAX_STALE_UPLOAD_SECS = 30 * 24 * 60 * 60
_MAX_PREFIX_BYTES = 512
# S3's bucket naming rules: 3-63 lowercase letters, digits, dots and hyphens, starting and
# ending with a letter or digit, not shaped like an IP address.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+")
_REGION = re.compile(r"[a-z0-9-]{1,32}")


def _valid_prefix(value: str) -> bool:
    return (
        len(value.encode()) <= _MAX_PREFIX_BYTES
        and not value.startswith("/")
        and "//" not in value
        and ".." not in value.split("/")
        and all(ch.isprintable() for ch in value)
    )


def check_object_store(config: BridgeConfig, report: Report) -> None:
    """``artifacts.backend`` and every ``artifacts.s3`` key."""
    artifacts = config.artifacts
    s3 = artifacts.s3
    if artifacts.backend not in ARTIFACT_BACKENDS:
        report("artifacts.backend", "invalid", "must be one of: " + ", ".join(ARTIFACT_BACKENDS))
    elif artifacts.backend == "s3" and s3.bucket is None:
        report("artifacts.s3.bucket", "required", 'a bucket is required with backend "s3"')
    if artifacts.url_mode not in ARTIFACT_URL_MODES:
        report("artifacts.url_mode", "invalid", "must be one of: " + ", ".join(ARTIFACT_URL_MODES))
    elif artifacts.url_mode == "presigned" and artifacts.backend != "s3":
        report(
            "artifacts.url_mode",
            "inconsistent",
            'presigned URLs need backend "s3" (a filesystem has no object store to sign for)',
        )
    if s3.endpoint is not None and not valid_service_endpoint(s3.endpoint):
        report(
            "artifacts.s3.endpoint",
            "invalid_url",
            "must be an http(s) URL without credentials, query or fragment",
        )
    if not _REGION.fullmatch(s3.region):
        report("artifacts.s3.region", "invalid", "must be a region name such as us-east-1")
    if s3.bucket is not None and (
        not _BUCKET.fullmatch(s3.bucket) or ".." in s3.bucket or _IPV4.fullmatch(s3.bucket)
    ):
        report(
            "artifacts.s3.bucket",
            "invalid",
            "must be an S3 bucket name: 3-63 lowercase letters, digits, dots and hyphens",
        )
    if not _valid_prefix(s3.key_prefix):
        report(
            "artifacts.s3.key_prefix",
            "invalid",
            "must be at most 512 bytes of printable text, not starting with '/', "
            "without '//' or '..' segments",
        )
    if s3.addressing_style not in S3_ADDRESSING_STYLES:
        report(
            "artifacts.s3.addressing_style",
            "invalid",
            "must be one of: " + ", ".join(S3_ADDRESSING_STYLES),
        )
    names = {
        "access_key_id_env": s3.access_key_id_env,
        "secret_access_key_env": s3.secret_access_key_env,
        "session_token_env": s3.session_token_env,
    }
    for field, name in names.items():
        if name is not None and not is_env_name(name):
            report(f"artifacts.s3.{field}", "invalid", ENV_NAME_RULE)
    if (s3.access_key_id_env is None) != (s3.secret_access_key_env is None):
        report(
            "artifacts.s3.secret_access_key_env",
            "inconsistent",
            "access_key_id_env and secret_access_key_env are set together or not at all",
        )
    if s3.session_token_env is not None and s3.access_key_id_env is None:
        report(
            "artifacts.s3.session_token_env",
            "inconsistent",
            "a session token needs access_key_id_env and secret_access_key_env",
        )
    if not _MIN_PART <= s3.part_size_bytes <= _MAX_PART:
        report("artifacts.s3.part_size_bytes", "out_of_range", "must be from 5 MiB to 5 GiB")
    for field in ("connect_timeout_ms", "read_timeout_ms"):
        if not 1 <= getattr(s3, field) <= _MAX_TIMEOUT_MS:
            report(f"artifacts.s3.{field}", "out_of_range", "must be from 1 ms to 10 minutes")
    if s3.serve not in S3_SERVE_MODES:
        report("artifacts.s3.serve", "invalid", "must be one of: " + ", ".join(S3_SERVE_MODES))
    if not 1 <= s3.max_attempts <= 10:
        report("artifacts.s3.max_attempts", "out_of_range", "must be from 1 to 10")
    if not _MIN_STALE_UPLOAD_SECS <= s3.stale_upload_secs <= _MAX_STALE_UPLOAD_SECS:
        report(
            "artifacts.s3.stale_upload_secs",
            "out_of_range",
            "must be from 1 minute to 30 days",
        )
