"""PostgreSQL URL redaction and schema names (no server needed)."""

from __future__ import annotations

import pytest

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.storage.postgres.url import check_schema_name, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:hunter2@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://u:p%40ss@h/db?sslmode=require", "postgresql://u:***@h/db?sslmode=require"),
        ("postgresql://h/db?user=u&password=hunter2", "postgresql://h/db?user=u&password=***"),
        ("postgresql://u:a:b@c@h/db", "postgresql://u:***@h/db"),
    ],
)
def test_redaction_hides_passwords(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_schema_names() -> None:
    for good in ("imagebridge", "_x", "a" * 48, "bridge_2"):
        assert check_schema_name(good) == good
    for bad in ("", "Imagebridge", "1abc", "a-b", "a b", "a" * 49, "pg_temp", 'x"; DROP', None):
        with pytest.raises(BridgeError) as caught:
            check_schema_name(bad)
        assert caught.value.code is ErrorCode.CONFIGURATION
        assert caught.value.field == "schema"
