"""Property tests: whatever a user types after --set/--unset, only BridgeError comes out."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagebridge.config import BridgeConfig, load_config, show
from imagebridge.config._tree import format_path, iter_leaves
from imagebridge.contract.errors import BridgeError

LEAVES = sorted(format_path(path) for path, _ in iter_leaves(show(BridgeConfig())))
KEYS = st.one_of(
    st.sampled_from(LEAVES),
    st.sampled_from(["runtime.providers.codex_responses.max_queued", 'runtime.providers."x y".a']),
    st.text(max_size=40),
    st.text(alphabet="abcdefgprstuvwxyz_.-\"'", max_size=40),
)
VALUES = st.one_of(
    st.text(max_size=60),
    st.sampled_from(
        [
            "unlimited",
            "auto",
            "0",
            "-1",
            "1e309",
            "nan",
            "inf",
            "[]",
            "{}",
            "{a=1}",
            "[[1]]",
            "true",
            "2024-01-01T00:00:00Z",
            '"x"',
            "'''",
            "99999999999999999999999",
            "0x10",
        ]
    ),
    st.integers().map(str),
)
ENV_NAMES = st.one_of(
    st.sampled_from(["IMAGEGEN_BRIDGE__SERVER__BIND", "IMAGEGEN_BRIDGE__RUNTIME__PROVIDERS__MOCK"]),
    st.text(alphabet="ABCDEFGIMNORSTU_", max_size=30).map(lambda rest: "IMAGEGEN_BRIDGE__" + rest),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sets=st.lists(
        st.one_of(st.text(max_size=80), st.tuples(KEYS, VALUES).map("=".join)), max_size=4
    ),
    unsets=st.lists(KEYS, max_size=2),
    env=st.dictionaries(ENV_NAMES, VALUES, max_size=2),
)
def test_arbitrary_overrides_raise_only_bridge_errors(
    tmp_path: Path, sets: list[str], unsets: list[str], env: dict[str, str]
) -> None:
    environ = {"IMAGEGEN_BRIDGE_DATA_DIR": str(tmp_path / "data"), **env}
    try:
        loaded = load_config(env=environ, sets=sets, unsets=unsets, cwd=tmp_path)
    except BridgeError as error:
        assert error.code.value == "configuration"
        return
    # A loaded configuration can always be checked and shown.
    assert isinstance(loaded.issues, list)
    assert len(loaded.origins) >= len(LEAVES)
    show(loaded.config)
