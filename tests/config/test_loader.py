"""Loading: layers and their precedence, env/--set parsing, file rules, discovery, errors."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

import platformdirs
import pytest

from imagebridge.config import BridgeConfig, LoadedConfig, load_config, show
from imagebridge.config._tree import format_path, iter_leaves
from imagebridge.contract.errors import BridgeError, ErrorCode

from .conftest import World

SECRET = "sk-proj-SECRET-VALUE-4242"


def _fails(world: World, **kwargs: object) -> BridgeError:
    with pytest.raises(BridgeError) as caught:
        world.load(**kwargs)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.CONFIGURATION
    return caught.value


def _rendered(error: BridgeError) -> str:
    """Everything a user or a log could see of an error, including its traceback."""
    return "\n".join(
        [
            str(error),
            repr(error),
            str(error.to_dict()),
            "".join(traceback.format_exception(error)),
        ]
    )


# -- the original's example ------------------------------------------------------------


def test_example_file_loads_unchanged_without_issues(world: World, example_file: Path) -> None:
    loaded = world.load(config_path=example_file)
    assert loaded.path == example_file
    assert loaded.issues == []
    # The example spells out the defaults, except that its data paths are ./data/…
    expected = show(world.load().config)
    expected["artifacts"]["root"] = "data/artifacts"
    expected["server"]["jobs"]["database"] = "data/jobs.sqlite3"
    expected["providers"]["codex_app_server"]["session_database"] = "data/state.sqlite3"
    assert show(loaded.config) == expected
    assert loaded.config.artifacts.root == Path("./data/artifacts")  # kept relative


def test_example_keys_are_attributed_to_the_file(world: World, example_file: Path) -> None:
    loaded = world.load(config_path=example_file)
    origin = loaded.origin("runtime.circuit_breaker.open_duration_ms")
    assert origin is not None
    assert (origin.source, origin.key) == ("file", "runtime.circuit_breaker.open_duration_ms")
    added = loaded.origin("providers.mock.enabled")
    assert added is not None and added.source == "default"


# -- precedence ------------------------------------------------------------------------

KEY = "runtime.default_timeout_ms"
ENV = "IMAGEGEN_BRIDGE__RUNTIME__DEFAULT_TIMEOUT_MS"


def test_precedence_defaults_file_env_set_unset(world: World) -> None:
    file = world.write("bridge.toml", "[runtime]\ndefault_timeout_ms = 1000\n")

    def value_and_origin(loaded: LoadedConfig) -> tuple[object, str, str]:
        origin = loaded.origin(KEY)
        assert origin is not None
        return loaded.config.runtime.default_timeout_ms, origin.source, origin.key

    assert value_and_origin(world.load()) == (300_000, "default", KEY)
    assert value_and_origin(world.load(config_path=file)) == (1000, "file", KEY)
    assert value_and_origin(world.load(config_path=file, **{ENV: "2000"})) == (
        2000,
        "environment",
        ENV,
    )
    assert value_and_origin(
        world.load(config_path=file, sets=[f"{KEY}=3000"], **{ENV: "2000"})
    ) == (3000, "override", KEY)

    # --unset is part of the top layer too: it clears an optional key the file set.
    file = world.write("bridge.toml", '[artifacts]\npublic_base_url = "https://images.example/"\n')
    loaded = world.load(
        config_path=file,
        unsets=["artifacts.public_base_url"],
        IMAGEGEN_BRIDGE__ARTIFACTS__PUBLIC_BASE_URL="https://env.example/",
    )
    assert loaded.config.artifacts.public_base_url is None
    origin = loaded.origin("artifacts.public_base_url")
    assert origin is not None and (origin.source, origin.key) == (
        "override",
        "artifacts.public_base_url",
    )


def test_unsets_apply_before_sets(world: World) -> None:
    loaded = world.load(
        sets=["runtime.providers.mock.max_queued=0"],
        unsets=["runtime.providers.mock"],
        IMAGEGEN_BRIDGE__RUNTIME__PROVIDERS__MOCK__MAX_CONCURRENT="2",
    )
    gate = loaded.config.runtime.providers["mock"]
    assert (gate.max_concurrent, gate.max_queued) == ("unlimited", 0)
    origin = loaded.origin("runtime.providers.mock.max_concurrent")
    assert origin is not None and origin.source == "default"


# -- environment and --set values ------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("8", 8),
        ("[8080, 8443]", [8080, 8443]),
        ("true", True),
        ('"quoted"', "quoted"),
        ("codex-app-server", "codex-app-server"),
        ("", ""),
        ("2024-01-01", "2024-01-01"),
        ("1\nx = 2", "1\nx = 2"),
        ("{max_concurrent = 3}", {"max_concurrent": 3}),
    ],
)
def test_values_are_toml_with_a_string_fallback(world: World, raw: str, expected: object) -> None:
    from imagebridge.config.overrides import parse_value

    assert parse_value(raw) == expected


def test_env_values_are_parsed_as_toml(world: World) -> None:
    loaded = world.load(
        IMAGEGEN_BRIDGE__INPUTS__REMOTE__ALLOWED_PORTS="[8080, 8443]",
        IMAGEGEN_BRIDGE__SERVER__METRICS__ENABLED="true",
        IMAGEGEN_BRIDGE__DEFAULT_PROVIDER="mock",
        IMAGEGEN_BRIDGE__PROVIDERS__CODEX_RESPONSES__MAX_PARALLEL_OUTPUTS="auto",
        IMAGEGEN_BRIDGE__PROVIDERS__MOCK__FAILURE_RATE="0.25",
    )
    config = loaded.config
    assert config.inputs.remote.allowed_ports == [8080, 8443]
    assert config.server.metrics.enabled is True
    assert config.default_provider == "mock"
    assert config.providers.codex_responses.max_parallel_outputs == "auto"
    assert config.providers.mock.failure_rate == 0.25
    origin = loaded.origin("inputs.remote.allowed_ports")
    assert origin is not None and origin.key == "IMAGEGEN_BRIDGE__INPUTS__REMOTE__ALLOWED_PORTS"


def test_env_is_applied_in_sorted_name_order(world: World) -> None:
    # Insertion order puts the specific variable first; sorted order applies it last.
    env = {
        "IMAGEGEN_BRIDGE__RUNTIME__GLOBAL__MAX_CONCURRENT": "5",
        "IMAGEGEN_BRIDGE__RUNTIME__GLOBAL": "{max_concurrent = 3, max_queued = 7}",
    }
    loaded = world.load(**env)
    assert loaded.config.runtime.global_.max_concurrent == 5
    assert loaded.config.runtime.global_.max_queued == 7
    queued = loaded.origin("runtime.global.max_queued")
    assert queued is not None and queued.key == "IMAGEGEN_BRIDGE__RUNTIME__GLOBAL"


def test_unrelated_environment_variables_are_ignored(world: World) -> None:
    loaded = world.load(IMAGEGEN_BRIDGE_TOKEN=SECRET, PATH="/bin", OPENAI_API_KEY=SECRET)
    assert loaded.config == world.load().config


@pytest.mark.parametrize(
    "name",
    [
        "IMAGEGEN_BRIDGE__",
        "IMAGEGEN_BRIDGE__runtime__X",
        "IMAGEGEN_BRIDGE__A____B",
        "IMAGEGEN_BRIDGE__A-B",
    ],
)
def test_malformed_env_names_are_rejected_without_the_value(world: World, name: str) -> None:
    error = _fails(world, **{name: SECRET})
    assert SECRET not in _rendered(error)


@pytest.mark.parametrize(
    ("env", "sets"),
    [
        ({"IMAGEGEN_BRIDGE__RUNTIME__PROVIDERS__CODEX_RESPONSES__MAX_CONCURRENT": "2"}, []),
        ({}, ["runtime.providers.codex_responses.max_concurrent=2"]),
        ({}, ['runtime.providers."codex-responses".max_concurrent=2']),
        ({}, ["runtime.providers.'codex-responses'.max_concurrent=2"]),
        ({}, ["runtime.providers.codex-responses.max_concurrent=2"]),
    ],
)
def test_hyphenated_provider_keys_are_reachable(
    world: World, env: dict[str, str], sets: list[str]
) -> None:
    loaded = world.load(sets=sets, **env)
    assert loaded.config.runtime.providers["codex-responses"].max_concurrent == 2
    assert loaded.issues == []


def test_breaker_map_keys_map_underscores_too(world: World) -> None:
    loaded = world.load(
        sets=["runtime.circuit_breakers.codex_app_server.failure_threshold=9"],
        IMAGEGEN_BRIDGE__RUNTIME__CIRCUIT_BREAKERS__CODEX_RESPONSES__ENABLED="false",
    )
    breakers = loaded.config.runtime.circuit_breakers
    assert breakers["codex-app-server"].failure_threshold == 9
    assert breakers["codex-responses"].enabled is False
    # Only the provider segment of those two maps is mapped: field names keep their _.
    assert loaded.origin("runtime.circuit_breakers.codex-app-server.failure_threshold") is not None


def test_set_replaces_a_subtree_by_merging(world: World) -> None:
    loaded = world.load(sets=["runtime.global={max_queued = 0}"])
    assert loaded.config.runtime.global_.max_queued == 0
    assert loaded.config.runtime.global_.max_concurrent == "unlimited"


@pytest.mark.parametrize(
    "item",
    [
        SECRET,  # no '='
        f"=_{SECRET}",
        f"bad key={SECRET}",
        f"a..b={SECRET}",
        f"a.={SECRET}",
        f'a."unterminated={SECRET}',
        f'a.""={SECRET}',
    ],
)
def test_malformed_set_arguments_name_their_position_not_their_value(
    world: World, item: str
) -> None:
    error = _fails(world, sets=["version=1", item])
    assert error.details["position"] == 2
    assert SECRET not in _rendered(error)


def test_oversize_override_is_rejected(world: World) -> None:
    error = _fails(world, sets=["providers.openai.model=" + "x" * (1024 * 1024 + 1)])
    assert "1 MiB" in error.message
    world.load(sets=["providers.openai.model=" + "x" * 1024])


def test_unset_clears_optional_fields_only(world: World) -> None:
    loaded = world.load(unsets=["providers.openai.organization_env", "server.bearer_token_env"])
    assert loaded.config.providers.openai.organization_env is None
    error = _fails(world, unsets=["providers.openai.api_key_env"])
    assert error.details["field"] == "providers.openai.api_key_env"
    assert "providers.openai.api_key_env" in " ".join(error.suggestions)
    error = _fails(world, unsets=["runtime.global"])
    assert error.details["field"] == "runtime.global"
    error = _fails(world, unsets=["providers.nothing"])
    assert error.details == {"field": "providers.nothing", "reason": "unknown_key"}


def test_unset_of_a_map_clears_it(world: World) -> None:
    file = world.write("c.toml", "[runtime.providers.mock]\nmax_concurrent = 1\n")
    loaded = world.load(config_path=file, unsets=["runtime.providers"])
    assert loaded.config.runtime.providers == {}


# -- schema errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sets": [f"runtime.unknown_secret={SECRET}"]}, "runtime.unknown_secret"),
        ({"IMAGEGEN_BRIDGE__UNKNOWN_SECRET": SECRET}, "unknown_secret"),
        (
            {"sets": [f'runtime.providers."codex-responses".token="{SECRET}"']},
            "runtime.providers.codex-responses.token",
        ),
        ({"sets": [f'server.max_body_bytes="{SECRET}"']}, "server.max_body_bytes"),
        ({"sets": [f"runtime.global.max_concurrent={SECRET}"]}, "runtime.global.max_concurrent"),
        ({"sets": [f"server.bind.inner={SECRET}"]}, "server.bind"),
        ({"sets": [f"version.x={SECRET}"]}, "version"),
    ],
)
def test_schema_errors_name_the_field_and_never_the_value(
    world: World, kwargs: dict[str, object], field: str
) -> None:
    error = _fails(world, **kwargs)
    assert error.message == "effective configuration does not match the schema"
    assert error.details["field"] == field
    assert SECRET not in _rendered(error)
    assert error.__cause__ is None


def test_unknown_file_key_is_rejected_with_its_dotted_path(world: World) -> None:
    file = world.write(
        "c.toml", f'[server.jobs]\nenabled = true\n\n[server.jobs.extra]\napi_key = "{SECRET}"\n'
    )
    error = _fails(world, config_path=file)
    assert error.details == {"field": "server.jobs.extra", "reason": "unknown_key"}
    assert SECRET not in _rendered(error)


def test_odd_map_keys_are_quoted_in_error_paths(world: World) -> None:
    file = world.write("c.toml", '[runtime.providers."a.b"]\nbogus = 1\n')
    error = _fails(world, config_path=file)
    assert error.details["field"] == 'runtime.providers."a.b".bogus'


def test_semantic_problems_do_not_raise(world: World) -> None:
    loaded = world.load(sets=["server.bind=0.0.0.0:8787"])
    assert [(i.field, i.code) for i in loaded.issues] == [
        ("server.bearer_token_env", "required_for_remote_bind")
    ]
    with pytest.raises(BridgeError):
        loaded.require_valid()


# -- files -------------------------------------------------------------------------------


def test_symlinked_file_is_rejected(world: World, example_file: Path) -> None:
    link = world.cwd / "link.toml"
    link.symlink_to(example_file)
    error = _fails(world, config_path=link)
    assert "symbolic link" in error.message


def test_symlink_in_a_discovery_location_is_rejected_not_skipped(
    world: World, example_file: Path
) -> None:
    (world.cwd / "imagegen-bridge.toml").symlink_to(example_file)
    assert "symbolic link" in _fails(world).message


def test_oversize_file_is_rejected(world: World) -> None:
    file = world.write("big.toml", "# " + "x" * (1024 * 1024) + "\nversion = 1\n")
    error = _fails(world, config_path=file)
    assert "limit" in error.message
    small = load_config(
        config_path=world.write("ok.toml", "version = 1\n"),
        env=world.env,
        cwd=world.cwd,
        max_file_bytes=12,
    )
    assert small.config.version == 1
    with pytest.raises(BridgeError):
        load_config(config_path=file, env=world.env, cwd=world.cwd, max_file_bytes=12)


def test_directory_is_rejected(world: World) -> None:
    directory = world.cwd / "dir.toml"
    directory.mkdir()
    assert "regular file" in _fails(world, config_path=directory).message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_named_pipe_is_rejected_without_blocking(world: World) -> None:
    fifo = world.cwd / "pipe.toml"
    os.mkfifo(fifo)
    assert "regular file" in _fails(world, config_path=fifo).message


def test_non_utf8_file_is_rejected(world: World) -> None:
    file = world.cwd / "latin1.toml"
    file.write_bytes('default_provider = "caf\xe9"\n'.encode("latin-1"))
    assert "UTF-8" in _fails(world, config_path=file).message


def test_byte_order_mark_is_tolerated(world: World) -> None:
    file = world.cwd / "bom.toml"
    file.write_bytes(b'\xef\xbb\xbfdefault_provider = "mock"\n')
    assert world.load(config_path=file).config.default_provider == "mock"


def test_invalid_toml_reports_the_position_not_the_content(world: World) -> None:
    file = world.write("bad.toml", f'version = 1\ntoken = "{SECRET}\n')
    error = _fails(world, config_path=file)
    assert error.message == "configuration file is not valid TOML"
    assert error.details["line"] == 2
    assert SECRET not in _rendered(error)


def test_missing_explicit_file_is_an_error(world: World) -> None:
    error = _fails(world, config_path=Path("missing.toml"))
    assert error.details["path"] == str(world.cwd / "missing.toml")
    error = _fails(world, IMAGEGEN_BRIDGE_CONFIG=str(world.root / "nope.toml"))
    assert "does not exist" in error.message


# -- discovery ---------------------------------------------------------------------------


def _marker(world: World, path: Path, provider: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'default_provider = "{provider}"\n', encoding="utf-8")
    return path


def test_discovery_order(world: World) -> None:
    xdg_file = _marker(world, world.xdg / "imagegen-bridge" / "config.toml", "codex-app-server")
    assert world.load().path == xdg_file

    local = _marker(world, world.cwd / "imagegen-bridge.toml", "mock")
    assert world.load().path == local

    from_env = _marker(world, world.root / "env.toml", "codex-responses")
    assert world.load(IMAGEGEN_BRIDGE_CONFIG=str(from_env)).path == from_env

    explicit = _marker(world, world.root / "explicit.toml", "mock")
    loaded = world.load(config_path=explicit, IMAGEGEN_BRIDGE_CONFIG=str(from_env))
    assert loaded.path == explicit


def test_relative_explicit_path_is_made_absolute(world: World) -> None:
    _marker(world, world.cwd / "sub" / "c.toml", "mock")
    loaded = world.load(config_path=Path("sub/c.toml"))
    assert loaded.path == world.cwd / "sub" / "c.toml"
    assert loaded.path.is_absolute()


def test_relative_xdg_config_home_is_ignored(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    home = world.root / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(world.cwd)
    _marker(world, world.cwd / "rel" / "imagegen-bridge" / "config.toml", "mock")
    fallback = platformdirs.user_config_path("imagegen-bridge", appauthor=False) / "config.toml"
    assert fallback.is_relative_to(home)
    env = {**world.env, "XDG_CONFIG_HOME": "rel"}
    assert load_config(env=env, cwd=world.cwd).path is None
    _marker(world, fallback, "mock")
    assert load_config(env=env, cwd=world.cwd).path == fallback


def test_no_file_means_defaults_plus_overrides(world: World) -> None:
    loaded = world.load(sets=["default_provider=mock"])
    assert loaded.path is None
    assert loaded.config.default_provider == "mock"
    assert loaded.issues == []


# -- data directory ----------------------------------------------------------------------


def test_data_paths_follow_the_data_dir_variable(world: World) -> None:
    loaded = world.load(IMAGEGEN_BRIDGE_DATA_DIR="relative-data")
    assert loaded.config.artifacts.root == world.cwd / "relative-data" / "artifacts"
    other = world.root / "elsewhere"
    loaded = world.load(IMAGEGEN_BRIDGE_DATA_DIR=str(other))
    assert loaded.config.server.jobs.database == other / "jobs.sqlite3"
    assert not other.exists()


def test_without_the_variable_data_lives_in_the_user_data_dir(world: World) -> None:
    env = {key: value for key, value in world.env.items() if key != "IMAGEGEN_BRIDGE_DATA_DIR"}
    config = load_config(env=env, cwd=world.cwd).config
    expected = platformdirs.user_data_path("imagegen-bridge", appauthor=False)
    assert config.providers.codex_app_server.session_database == expected / "state.sqlite3"


# -- provenance ---------------------------------------------------------------------------


def test_origins_cover_every_leaf_and_never_hold_values(world: World) -> None:
    file = world.write(
        "c.toml",
        '[providers.openai]\nmodel = "file-model-VALUE"\n\n'
        "[runtime.providers.mock]\nmax_queued = 3\n",
    )
    loaded = world.load(
        config_path=file,
        sets=[
            "providers.codex_responses.responses_model=set-model-VALUE",
            "server.bearer_token_env=TOKEN_VAR",
        ],
        unsets=["providers.openai.project_env"],
        IMAGEGEN_BRIDGE__PROVIDERS__CODEX_APP_SERVER__CODEX_MODEL="env-model-VALUE",
    )
    leaves = {format_path(path): value for path, value in iter_leaves(show(loaded.config))}
    assert [origin.field for origin in loaded.origins] == sorted(leaves)
    for origin in loaded.origins:
        text = f"{origin.field} {origin.key}"
        assert "VALUE" not in text and "TOKEN_VAR" not in text
    by_field = {origin.field: (origin.source, origin.key) for origin in loaded.origins}
    assert by_field["providers.openai.model"] == ("file", "providers.openai.model")
    assert by_field["runtime.providers.mock.max_queued"] == (
        "file",
        "runtime.providers.mock.max_queued",
    )
    assert by_field["runtime.providers.mock.max_concurrent"] == (
        "default",
        "runtime.providers.mock.max_concurrent",
    )
    assert by_field["providers.codex_app_server.codex_model"] == (
        "environment",
        "IMAGEGEN_BRIDGE__PROVIDERS__CODEX_APP_SERVER__CODEX_MODEL",
    )
    assert by_field["providers.codex_responses.responses_model"] == (
        "override",
        "providers.codex_responses.responses_model",
    )
    assert by_field["providers.openai.project_env"] == ("override", "providers.openai.project_env")
    assert by_field["version"] == ("default", "version")


def test_loaded_config_is_a_plain_bridge_config(world: World) -> None:
    assert isinstance(world.load().config, BridgeConfig)
