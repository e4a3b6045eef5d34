"""What a store's schema may be: a plain identifier to record it under, steps numbered 1..n."""

from __future__ import annotations

import pytest

from imagebridge.storage.rules.schema import Migration, StoreSchema


def _step(conn: object, recorded: bool) -> None:
    """A step that is never run: only the definition is checked."""


def test_schema_definitions_are_checked() -> None:
    with pytest.raises(ValueError, match="identifier"):
        StoreSchema(recorded_as="bad name; DROP", migrations=())
    with pytest.raises(ValueError, match="numbered"):
        StoreSchema(recorded_as="ok", migrations=(Migration(2, _step),))
    schema = StoreSchema(recorded_as="ok", migrations=(Migration(1, _step), Migration(2, _step)))
    assert schema.current_version == 2
