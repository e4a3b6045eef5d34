"""config show / origins / writing TOML."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from imagebridge.config import load_config, origins, show, to_toml

from .conftest import World

SECRET = "sk-proj-SECRET-VALUE-4242"


def test_show_is_json_data_with_secret_names_only(world: World) -> None:
    loaded = world.load(
        sets=[
            "server.bearer_token_env=BRIDGE_TOKEN",
            "providers.openai.enabled=true",
            "server.bind=0.0.0.0:8787",
        ],
        BRIDGE_TOKEN=SECRET,
        OPENAI_API_KEY=SECRET,
        OPENAI_ORG_ID=SECRET,
    )
    assert loaded.issues == []
    shown = show(loaded.config)
    text = json.dumps(shown)
    assert SECRET not in text
    assert shown["server"]["bearer_token_env"] == "BRIDGE_TOKEN"
    assert shown["providers"]["openai"]["api_key_env"] == "OPENAI_API_KEY"
    assert shown["runtime"]["global"] == {
        "max_concurrent": "unlimited",
        "max_queued": "unlimited",
        "retry_after_ms": 1000,
    }
    assert shown["artifacts"]["root"] == str(world.data_dir / "artifacts")
    assert shown["artifacts"]["public_base_url"] is None


def test_to_toml_round_trips_the_effective_configuration(world: World, example_file: Path) -> None:
    loaded = world.load(
        config_path=example_file,
        sets=[
            'runtime.providers."codex-responses".max_queued=0',
            "artifacts.public_base_url=https://images.example/v1/",
            "providers.mock.seed=-7",
            "providers.mock.failure_rate=0.5",
        ],
    )
    text = to_toml(show(loaded.config))
    parsed = tomllib.loads(text)
    assert "usage_endpoint" not in parsed["providers"]["codex_responses"]  # None left out
    written = world.write("written.toml", text)
    again = load_config(config_path=written, env=world.env, cwd=world.cwd)
    assert again.config == loaded.config
    assert again.issues == []


def test_origins_render_as_field_source_key_dicts(world: World) -> None:
    loaded = world.load(sets=["server.max_connections=64"])
    rendered = origins(loaded.origins)
    assert len(rendered) == len(loaded.origins)
    assert all(set(entry) == {"field", "source", "key"} for entry in rendered)
    assert {
        "field": "server.max_connections",
        "source": "override",
        "key": "server.max_connections",
    } in rendered
    assert all(
        entry["source"] in {"default", "file", "environment", "override"} for entry in rendered
    )
    json.dumps(rendered)
