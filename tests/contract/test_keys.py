"""The admin API's shapes (``contract/keys.py``) against the answers the bridge gave before
they existed: each decodes strictly into its model and encodes back byte for byte.

The answers were recorded from ``/v1/keys``, ``/v1/usage`` and ``imagegen-bridge --json keys
audit`` while those were still built from plain dicts (ids and secrets replaced by others of
the same shape); tests/server/auth/test_keys.py decodes the live answers the same way.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from imagebridge.contract.keys import (
    KEY_LIMIT_FIELDS,
    BridgeKey,
    BridgeKeyAuditEntry,
    BridgeKeyCreate,
    BridgeKeyIssued,
    BridgeKeyList,
    BridgeKeyUpdate,
    BridgeKeyUsageReport,
)

ANN = (
    '{"id":"key_647dfb947e0ccde6","name":"ann","prefix":"ibk_5p7qeOaX","state":"active",'
    '"created_at":1796612936,"updated_at":1796612936,"revoked_at":null,"images_per_day":5,'
    '"images_per_week":null,"images_per_month":40,"max_concurrent":2,"providers":["mock"],'
    '"expires_at":4102444800,"remaining":{"day":{"limit":5,"remaining":3,"reset_at":1796688000},'
    '"month":{"limit":40,"remaining":38,"reset_at":1798761600}}}'
)
BOB = (
    '{"id":"key_bc63f3a3fad9ac53","name":"bob","prefix":"ibk_9bRvFNQP","state":"revoked",'
    '"created_at":1796612936,"updated_at":1796612937,"revoked_at":1796612937,'
    '"images_per_day":null,"images_per_week":null,"images_per_month":null,'
    '"max_concurrent":null,"providers":null,"expires_at":null,"remaining":{}}'
)
EXPIRED = (
    '{"id":"key_647dfb947e0ccde6","name":"ann","prefix":"ibk_5p7qeOaX","state":"expired",'
    '"created_at":1796612936,"updated_at":1796612937,"revoked_at":null,"images_per_day":5,'
    '"images_per_week":3,"images_per_month":40,"max_concurrent":null,"providers":["mock"],'
    '"expires_at":1,"remaining":{"day":{"limit":5,"remaining":3,"reset_at":1796688000},'
    '"week":{"limit":3,"remaining":1,"reset_at":1797206400},'
    '"month":{"limit":40,"remaining":38,"reset_at":1798761600}}}'
)
SECRET = "ibk_5p7qeOaXnotAsecretJustItsShape0000000000000"
OLD_USAGE_ROW = (
    '{"key_id":"key_647dfb947e0ccde6","day":"2026-12-07","provider":"mock","account":"",'
    '"requested":3,"delivered":2,"failed":1,"unknown":0,"total_tokens":206,"key_name":"ann"}'
)
"""A usage row as recorded before issue 39 added ``kept`` and ``replayed``."""
USAGE_ROW = (
    '{"key_id":"key_647dfb947e0ccde6","day":"2026-12-07","provider":"mock","account":"",'
    '"requested":3,"delivered":2,"failed":1,"unknown":0,"total_tokens":206,"kept":1,'
    '"replayed":2,"key_name":"ann"}'
)
AUDIT = [
    '{"seq":1,"at":1796612939,"actor":"cli:root","action":"create","key_id":"key_23abc393c688597c",'
    '"key_name":"alice","details":{"expires_at":4102444800,"images_per_day":5,'
    '"images_per_month":null,"images_per_week":null,"max_concurrent":null,'
    '"providers":["mock","codex-responses"]}}',
    '{"seq":3,"at":1796612940,"actor":"cli:root","action":"update","key_id":"key_23abc393c688597c",'
    '"key_name":"alice","details":{"expires_at":null,"images_per_week":null,"max_concurrent":2}}',
    '{"seq":4,"at":1796612940,"actor":"cli:root","action":"rotate","key_id":"key_23abc393c688597c",'
    '"key_name":"alice","details":{"prefix":"ibk_rONF7QKg"}}',
    '{"seq":5,"at":1796612940,"actor":"admin-api","action":"revoke",'
    '"key_id":"key_65046691ba903944","key_name":"bob","details":{}}',
]

ANSWERS: list[tuple[type[BaseModel], str]] = [
    (BridgeKey, ANN),
    (BridgeKey, BOB),
    (BridgeKey, EXPIRED),
    (BridgeKeyList, f'{{"data":[{ANN},{BOB}]}}'),
    (BridgeKeyList, '{"data":[]}'),
    (BridgeKeyIssued, f'{{"key":{ANN},"secret":"{SECRET}"}}'),
    (BridgeKeyUsageReport, f'{{"group_by":"day","time_zone":"UTC","data":[{USAGE_ROW}]}}'),
    (BridgeKeyUsageReport, '{"group_by":"day","data":[]}'),  # the key filter named no key
    *((BridgeKeyAuditEntry, entry) for entry in AUDIT),
]


@pytest.mark.parametrize(("model", "answer"), ANSWERS)
def test_each_recorded_answer_decodes_strictly_and_encodes_back_unchanged(
    model: type[BaseModel], answer: str
) -> None:
    decoded = model.model_validate_json(answer, strict=True)
    assert decoded.model_dump_json() == answer


@pytest.mark.parametrize(
    "change",
    [
        {"colour": "red"},  # a key the shape does not have
        {"images_per_day": "5"},  # a number as text
        {"state": "paused"},  # a state keys do not have
        {"remaining": {"year": {"limit": 1, "remaining": 1, "reset_at": 1}}},
    ],
)
def test_a_view_with_anything_else_is_refused(change: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        BridgeKey.model_validate_json(json.dumps({**json.loads(ANN), **change}), strict=True)


def test_an_update_tells_a_cleared_limit_from_one_left_alone() -> None:
    update = BridgeKeyUpdate.model_validate({"images_per_day": None, "max_concurrent": 2})
    assert update.changes() == {"images_per_day": None, "max_concurrent": 2}
    assert BridgeKeyUpdate().changes() == {}
    create = BridgeKeyCreate.model_validate({"name": "ann", "providers": ["mock"]})
    assert create.changes() == {"providers": ["mock"]}  # the name is not a limit
    assert set(KEY_LIMIT_FIELDS) == set(BridgeKeyUpdate.model_fields)


def test_a_usage_row_from_before_kept_and_replayed_still_decodes() -> None:
    """Issue 39 added ``kept`` and ``replayed`` to our own usage rows (the original has no
    keys); an answer of the earlier shape decodes, both counts 0."""
    report = BridgeKeyUsageReport.model_validate_json(
        f'{{"group_by":"day","time_zone":"UTC","data":[{OLD_USAGE_ROW}]}}', strict=True
    )
    [row] = report.data
    assert (row.delivered, row.kept, row.replayed) == (2, 0, 0)
