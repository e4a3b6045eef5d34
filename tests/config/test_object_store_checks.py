"""``artifacts.backend`` and ``[artifacts.s3]``: what ``config check`` says about them.

``backend = "s3"`` is accepted with a bucket (the bridge then publishes and serves from
it); the section itself is checked whatever the backend.
"""

from __future__ import annotations

from typing import Any

import pytest

from imagebridge.config import BridgeConfig, check
from imagebridge.config.loader import load_config
from imagebridge.contract.errors import BridgeError


def issues(**s3: Any) -> set[tuple[str, str]]:
    backend = s3.pop("backend", "filesystem")
    config = BridgeConfig.model_validate({"artifacts": {"backend": backend, "s3": s3}})
    return {
        (issue.field, issue.code)
        for issue in check(config)
        if issue.field.startswith(("artifacts.backend", "artifacts.s3"))
    }


def test_the_defaults_are_the_filesystem_and_report_nothing() -> None:
    config = BridgeConfig()
    assert config.artifacts.backend == "filesystem"
    assert issues() == set()


def test_the_s3_backend_is_accepted_with_a_bucket_and_needs_one() -> None:
    assert issues(backend="s3", bucket="images") == set()
    assert issues(backend="s3") == {("artifacts.s3.bucket", "required")}


def _url_mode_issues(mode: str, backend: str) -> set[tuple[str, str]]:
    config = BridgeConfig.model_validate(
        {"artifacts": {"backend": backend, "url_mode": mode, "s3": {"bucket": "images"}}}
    )
    return {(i.field, i.code) for i in check(config) if i.field == "artifacts.url_mode"}


def test_presigned_url_mode_needs_the_s3_backend() -> None:
    assert _url_mode_issues("presigned", "s3") == set()
    assert _url_mode_issues("signed", "filesystem") == set()
    assert _url_mode_issues("presigned", "filesystem") == {("artifacts.url_mode", "inconsistent")}
    assert _url_mode_issues("public", "s3") == {("artifacts.url_mode", "invalid")}


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"backend": "ftp"}, ("artifacts.backend", "invalid")),
        ({"endpoint": "ftp://store.example"}, ("artifacts.s3.endpoint", "invalid_url")),
        ({"endpoint": "https://k:s@store.example"}, ("artifacts.s3.endpoint", "invalid_url")),
        ({"endpoint": "https://store.example/?x=1"}, ("artifacts.s3.endpoint", "invalid_url")),
        ({"endpoint": "https://store.example:99999"}, ("artifacts.s3.endpoint", "invalid_url")),
        ({"region": "US East"}, ("artifacts.s3.region", "invalid")),
        ({"bucket": "Images"}, ("artifacts.s3.bucket", "invalid")),
        ({"bucket": "ab"}, ("artifacts.s3.bucket", "invalid")),
        ({"bucket": "192.168.1.1"}, ("artifacts.s3.bucket", "invalid")),
        ({"bucket": "a..b"}, ("artifacts.s3.bucket", "invalid")),
        ({"key_prefix": "/abs/"}, ("artifacts.s3.key_prefix", "invalid")),
        ({"key_prefix": "a/../b/"}, ("artifacts.s3.key_prefix", "invalid")),
        ({"key_prefix": "a//b"}, ("artifacts.s3.key_prefix", "invalid")),
        ({"key_prefix": "tab\there/"}, ("artifacts.s3.key_prefix", "invalid")),
        ({"addressing_style": "dns"}, ("artifacts.s3.addressing_style", "invalid")),
        ({"serve": "mirror"}, ("artifacts.s3.serve", "invalid")),
        ({"access_key_id_env": "lower"}, ("artifacts.s3.access_key_id_env", "invalid")),
        ({"access_key_id_env": "S3_KEY"}, ("artifacts.s3.secret_access_key_env", "inconsistent")),
        ({"session_token_env": "S3_TOKEN"}, ("artifacts.s3.session_token_env", "inconsistent")),
        ({"part_size_bytes": 4 * 1024 * 1024}, ("artifacts.s3.part_size_bytes", "out_of_range")),
        ({"connect_timeout_ms": 0}, ("artifacts.s3.connect_timeout_ms", "out_of_range")),
        ({"read_timeout_ms": 600_001}, ("artifacts.s3.read_timeout_ms", "out_of_range")),
        ({"max_attempts": 0}, ("artifacts.s3.max_attempts", "out_of_range")),
        ({"stale_upload_secs": 59}, ("artifacts.s3.stale_upload_secs", "out_of_range")),
    ],
)
def test_each_rule_reports_its_issue(settings: dict[str, Any], expected: tuple[str, str]) -> None:
    assert expected in issues(**settings)


@pytest.mark.parametrize(
    "settings",
    [
        {"endpoint": "http://127.0.0.1:7480", "addressing_style": "path", "bucket": "img-1"},
        {"endpoint": "https://s3.example.com", "region": "eu-central-1", "bucket": "a.b-c"},
        {"key_prefix": "bridge/prod/"},
        {"access_key_id_env": "S3_KEY", "secret_access_key_env": "S3_SECRET"},
        {
            "access_key_id_env": "S3_KEY",
            "secret_access_key_env": "S3_SECRET",
            "session_token_env": "S3_TOKEN",
        },
        {"part_size_bytes": 5 * 1024 * 1024, "stale_upload_secs": 60, "max_attempts": 10},
    ],
)
def test_valid_settings_report_nothing(settings: dict[str, Any]) -> None:
    assert issues(**settings) == set()


def test_the_section_loads_from_toml_and_unknown_keys_are_refused(tmp_path: Any) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[artifacts.s3]\nendpoint = "http://127.0.0.1:7480"\nbucket = "images"\n'
        "part_size_bytes = 16777216\n"
    )
    loaded = load_config(config_path=path, env={}, cwd=tmp_path)
    assert loaded.config.artifacts.s3.part_size_bytes == 16 * 1024 * 1024
    path.write_text('[artifacts.s3]\nbuckets = "images"\n')
    with pytest.raises(BridgeError) as caught:
        load_config(config_path=path, env={}, cwd=tmp_path)
    assert "artifacts.s3.buckets" in str(caught.value.details)
