"""``providers``, ``session`` and ``preset`` in-process."""

from __future__ import annotations

import json

from tests.cli.conftest import Cli


def test_providers_list_capabilities_and_readiness(cli: Cli) -> None:
    listed = cli("--json", "providers", "list").json()
    assert [item["name"] for item in listed["items"]] == ["mock"]
    caps = cli("--json", "providers", "capabilities").json()
    assert caps["provider"] == "mock" and caps["batching"]["mode"] == "fan_out"
    unknown = cli("--json", "providers", "capabilities", "--model", "nope")
    assert unknown.code == 6 and unknown.error()["code"] == "unsupported_capability"
    ready = cli("--json", "providers", "readiness")
    assert ready.code == 0 and ready.json() == [{"provider": "mock", "status": "ready"}]


def test_readiness_exits_with_the_first_not_ready_code(cli: Cli) -> None:
    env = {"IMAGEGEN_BRIDGE__PROVIDERS__CODEX_RESPONSES__ENABLED": "true"}
    result = cli("--json", "providers", "readiness", env=env)
    assert result.code == 3
    statuses = {item["provider"]: item["status"] for item in result.json()}
    assert statuses == {"codex-responses": "not_ready", "mock": "ready"}


def test_session_commands(cli: Cli) -> None:
    missing = cli("--json", "session", "get", "studio")
    assert missing.code == 4 and missing.error()["code"] == "session"
    assert cli("session", "delete", "studio").code == 2
    assert cli("session", "delete", "studio", "--dry-run", "--force").code == 2
    dry = cli("--json", "session", "delete", "studio", "--dry-run").json()
    assert dry == {"action": "delete_session", "dry_run": True, "key": "studio",
                   "provider": "mock"}  # fmt: skip
    assert cli("--json", "session", "delete", "studio", "--force").code == 4


def test_preset_crud_validation_and_request_reduction(cli: Cli) -> None:
    assert cli("--json", "preset", "list").json() == {"items": []}
    assert not cli.data.exists(), "listing creates no database"
    request = {
        "prompt": "from a request",
        "operation": "generate",
        "parameters": {"n": 2},
        "reference_images": [{"type": "base64", "data": "AAAA"}],
        "idempotency_key": "k",
    }
    cli.write("request.json", json.dumps(request))
    created = cli("--json", "preset", "create", "from-request", "--from", "request.json",
                  "--description", "kept")  # fmt: skip
    assert created.code == 0, created.stderr
    template = created.json()["template"]
    assert "reference_images" not in template and "idempotency_key" not in template
    assert template["parameters"]["n"] == 2 and created.json()["description"] == "kept"
    again = cli("--json", "preset", "create", "from-request", "--from", "request.json")
    assert again.code == 2 and again.error()["code"] == "idempotency_conflict"
    cli.write("t.json", '{"prompt": "replaced"}')
    replaced = cli("--json", "preset", "update", "from-request", "--from", "t.json").json()
    assert replaced["template"]["prompt"] == "replaced" and "description" not in replaced
    assert replaced["created"] == created.json()["created"]
    fetched = cli("--json", "preset", "get", "from-request").json()
    assert fetched == replaced


def test_preset_templates_are_validated_like_the_api(cli: Cli) -> None:
    cli.write("bad.json", json.dumps({"parameters": {"n": 0}}))
    bad = cli("--json", "preset", "create", "bad", "--from", "bad.json")
    assert bad.code == 2
    assert bad.error()["details"]["issues"][0]["field"] == "template.parameters.n"
    cli.write("blank.json", json.dumps({"prompt": "  "}))
    assert cli("preset", "create", "blank", "--from", "blank.json").code == 2
    cli.write("junk.json", "[1, 2")
    junk = cli("--json", "preset", "create", "junk", "--from", "junk.json")
    assert junk.code == 2 and "ImagePresetTemplate" in junk.error()["message"]
    assert cli("preset", "create", "-bad-name", "--from", "blank.json").code == 2
    edit = cli("--json", "preset", "create", "editing", "--from", "-",
               stdin=b'{"operation": "edit", "prompt": "bluer"}')  # fmt: skip
    assert edit.code == 0, edit.stderr
    wrong = cli("--json", "generate", "--preset", "editing", "--dry-run")
    assert wrong.code == 2 and "is an edit preset" in wrong.error()["message"]


def test_preset_limit_bounds(cli: Cli) -> None:
    assert cli("preset", "list", "--limit", "0").code == 2
    assert cli("preset", "list", "--limit", "101").code == 2
