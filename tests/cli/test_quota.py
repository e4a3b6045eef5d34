"""``providers quota`` (local and ``--remote``) and the quota reader it shares with doctor.

The Codex providers run against the loopback Codex backend mock, whose ``wham/usage``
answer also carries an account id, a user id and an e-mail address: none of them, nor the
login's token or account id, may ever be printed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from imagebridge.cli.quota import QuotaReading, read_quota, reading_from_detail
from imagebridge.contract.errors import BridgeError, ErrorCode
from tests.cli.conftest import Cli
from tests.cli.servers import bridge
from tests.support.codex_backend import (
    BRIDGE_ACCOUNT,
    BRIDGE_TOKEN,
    CodexBackend,
    CodexBridge,
    Route,
    token_sha256,
    write_codex_auth,
)

SECRETS = (
    BRIDGE_TOKEN,
    BRIDGE_ACCOUNT,
    "acct-mock-secret-0001",
    "user-mock-secret",
    "mock-user@example.invalid",
    "rt_mock_refresh",
)
GENERATION_ROUTES: tuple[Route, ...] = ("responses", "images_generations", "images_edits")


def codex_env(cli: Cli, backend: CodexBackend) -> dict[str, str]:
    """Both Codex HTTP providers on the mock, with a ChatGPT login in ``CODEX_HOME``."""
    write_codex_auth(
        Path(cli.env["CODEX_HOME"]), access_token=BRIDGE_TOKEN, account_id=BRIDGE_ACCOUNT
    )
    prefix = "IMAGEGEN_BRIDGE__PROVIDERS__"
    return {
        f"{prefix}CODEX_RESPONSES__ENABLED": "true",
        f"{prefix}CODEX_RESPONSES__ENDPOINT": backend.responses_url,
        f"{prefix}CODEX_IMAGES__ENABLED": "true",
        f"{prefix}CODEX_IMAGES__BASE_URL": backend.codex_base_url,
    }


def assert_no_secrets(*texts: str) -> None:
    joined = "\n".join(texts)
    for secret in SECRETS:
        assert secret not in joined


def by_provider(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["provider"]: item for item in body["items"]}


def assert_mock_windows(quota: dict[str, Any]) -> None:
    """The windows the mock's ``wham/usage`` reports (MockQuota defaults)."""
    assert quota["plan_type"] == "plus" and quota["exhausted"] is False
    windows = {window["name"]: window for window in quota["windows"]}
    assert set(windows) == {"primary", "secondary"}
    assert windows["primary"]["used_percent"] == 12 and windows["primary"]["window_minutes"] == 300
    assert windows["secondary"]["used_percent"] == 40
    assert windows["secondary"]["window_minutes"] == 10_080
    assert abs(windows["primary"]["resets_at"] - (time.time() + 3_600)) < 120


# -- local ----------------------------------------------------------------------------------


def test_every_enabled_provider_reports_its_quota_or_says_it_has_none(
    cli: Cli, codex_backend: CodexBackend
) -> None:
    result = cli("--json", "providers", "quota", env=codex_env(cli, codex_backend))
    assert result.code == 0, result.stderr
    items = by_provider(result.json())
    assert list(items) == ["codex-images", "codex-responses", "mock"]
    for name in ("codex-images", "codex-responses"):
        assert items[name]["status"] == "available" and "warning" not in items[name]
        assert_mock_windows(items[name]["quota"])
    assert items["mock"] == {
        "provider": "mock",
        "status": "not_reported",
        "message": "mock does not report quota",
    }
    assert codex_backend.calls("usage") == 2
    assert all(codex_backend.calls(route) == 0 for route in GENERATION_ROUTES)
    assert all(request.sent_token(BRIDGE_TOKEN) for request in codex_backend.requests)
    assert_no_secrets(result.stdout, result.stderr)


def test_human_plain_and_json_show_the_same_state(cli: Cli, codex_backend: CodexBackend) -> None:
    env = codex_env(cli, codex_backend)
    args = ("providers", "quota", "--provider", "codex-responses")
    human, plain, machine = (
        cli(*args, env=env),
        cli("--plain", *args, env=env),
        cli("--json", *args, env=env),
    )
    assert (human.code, plain.code, machine.code) == (0, 0, 0)
    assert len(human.stdout.splitlines()) > 1, "human output is indented"
    assert len(plain.stdout.splitlines()) == 1 and len(machine.stdout.splitlines()) == 1
    values = [json.loads(result.stdout) for result in (human, plain, machine)]
    for value in values:
        (item,) = value["items"]
        assert item["provider"] == "codex-responses" and item["status"] == "available"
        assert_mock_windows(item["quota"])
    assert_no_secrets(*(r.stdout + r.stderr for r in (human, plain, machine)))


def test_one_provider_is_read_and_an_unknown_one_is_refused(
    cli: Cli, codex_backend: CodexBackend
) -> None:
    env = codex_env(cli, codex_backend)
    one = cli("--json", "providers", "quota", "--provider", "codex-images", env=env)
    assert [item["provider"] for item in one.json()["items"]] == ["codex-images"]
    assert codex_backend.calls("usage") == 1
    unknown = cli("--json", "providers", "quota", "--provider", "nope", env=env)
    assert unknown.code == 2
    assert unknown.error()["message"] == "requested provider is not registered"


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [("http_401", "authentication"), ("http_500", "upstream"), ("malformed_json", "protocol")],
)
def test_an_unreadable_quota_is_a_warning_entry(
    cli: Cli, codex_backend: CodexBackend, behaviour: str, code: str
) -> None:
    codex_backend.set_default(behaviour, route="usage")
    result = cli("--json", "providers", "quota", env=codex_env(cli, codex_backend))
    assert result.code == 0, result.stderr
    items = by_provider(result.json())
    for name in ("codex-images", "codex-responses"):
        assert items[name]["status"] == "unavailable" and "quota" not in items[name]
        assert items[name]["warning"]["code"] == code
        assert items[name]["warning"]["message"]
    assert items["mock"]["status"] == "not_reported"
    assert_no_secrets(result.stdout, result.stderr)


def test_refresh_reads_the_backend_once_per_provider(cli: Cli, codex_backend: CodexBackend) -> None:
    result = cli("--json", "providers", "quota", "--refresh", env=codex_env(cli, codex_backend))
    assert result.code == 0, result.stderr
    assert {item["status"] for item in result.json()["items"]} == {"available", "not_reported"}
    assert codex_backend.calls("usage") == 2  # the refresh is the reading: never twice


def test_a_missing_login_is_a_warning_not_a_crash(cli: Cli, codex_backend: CodexBackend) -> None:
    env = codex_env(cli, codex_backend)
    (Path(cli.env["CODEX_HOME"]) / "auth.json").unlink()
    result = cli("--json", "providers", "quota", "--provider", "codex-responses", env=env)
    assert result.code == 0, result.stderr
    (item,) = result.json()["items"]
    assert item["status"] == "unavailable" and item["warning"]["code"] == "authentication"
    assert codex_backend.calls("usage") == 0


# -- remote ---------------------------------------------------------------------------------


@pytest.fixture
def codex_remote(cli: Cli, codex_backend: CodexBackend) -> Iterator[str]:
    """A real bridge whose Codex providers use the mock (the CLI itself has none enabled)."""
    codex_env(cli, codex_backend)  # the login the bridge borrows
    sets = [
        "providers.codex_app_server.enabled=false",
        "providers.codex_responses.enabled=true",
        f'providers.codex_responses.endpoint="{codex_backend.responses_url}"',
        "providers.codex_images.enabled=true",
        f'providers.codex_images.base_url="{codex_backend.codex_base_url}"',
    ]
    with bridge(cli.root / "server-data", sets, {"CODEX_HOME": cli.env["CODEX_HOME"]}) as url:
        yield url


def test_remote_quota_comes_from_the_bridge_diagnostics(
    cli: Cli, codex_backend: CodexBackend, codex_remote: str
) -> None:
    before = codex_backend.calls("usage")
    result = cli("--json", "--remote", codex_remote, "providers", "quota")
    assert result.code == 0, result.stderr
    items = by_provider(result.json())
    assert list(items) == ["codex-images", "codex-responses", "mock"]
    for name in ("codex-images", "codex-responses"):
        assert items[name]["status"] == "available"
        assert_mock_windows(items[name]["quota"])
    assert items["mock"]["status"] == "not_reported"
    assert codex_backend.calls("usage") - before == 2, "the bridge read wham/usage, not the CLI"
    assert not cli.data.exists(), "nothing ran locally"
    assert_no_secrets(result.stdout, result.stderr)
    one = cli("--json", "--remote", codex_remote, "providers", "quota", "--provider", "mock")
    assert one.json() == {"items": [items["mock"]]}
    unknown = cli("--json", "--remote", codex_remote, "providers", "quota", "--provider", "nope")
    assert unknown.code == 2 and unknown.error()["code"] == "configuration"


def test_remote_unreadable_quota_and_refresh(
    cli: Cli, codex_backend: CodexBackend, codex_remote: str
) -> None:
    codex_backend.set_default("http_401", route="usage")
    result = cli("--json", "--remote", codex_remote, "providers", "quota",
                 "--provider", "codex-responses")  # fmt: skip
    assert result.code == 0, result.stderr
    (item,) = result.json()["items"]
    assert item["status"] == "unavailable" and item["warning"]["code"] == "authentication"
    refresh = cli("--remote", codex_remote, "providers", "quota", "--refresh")
    assert refresh.code == 2 and "--refresh" in refresh.stderr


def test_remote_malformed_diagnostics_are_a_protocol_error(cli: Cli) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.cli.servers import serving

    async def diagnostics(_: object) -> JSONResponse:
        return JSONResponse({"providers": "codex-responses", "token": BRIDGE_TOKEN})

    with serving(Starlette(routes=[Route("/v1/diagnostics/extended", diagnostics)])) as url:
        result = cli("--json", "--remote", url, "providers", "quota")
    assert result.code == 6 and result.error()["code"] == "protocol"
    assert_no_secrets(result.stdout, result.stderr)


# -- doctor reads quota the same way ------------------------------------------------------------


def _doctor_quota(cli: Cli, env: dict[str, str], provider: str) -> dict[str, Any]:
    cli.write("imagegen-bridge.toml", "version = 1\n")
    result = cli("--json", "doctor", "--provider", provider, env=env)
    assert_no_secrets(result.stdout, result.stderr)
    checks: dict[str, dict[str, Any]] = {c["name"]: c for c in result.json()["checks"]}
    return checks["provider_quota"]


def test_doctor_shows_the_same_windows_and_warns_when_unreadable(
    cli: Cli, codex_backend: CodexBackend
) -> None:
    env = codex_env(cli, codex_backend)
    passed = _doctor_quota(cli, env, "codex-images")
    assert passed["status"] == "pass"
    assert_mock_windows(passed["details"])
    codex_backend.set_default("http_403", route="usage")
    warned = _doctor_quota(cli, env, "codex-responses")
    assert warned["status"] == "warn"
    assert warned["details"]["warning"]["code"] == "permission_denied"
    skipped = _doctor_quota(cli, env, "mock")
    assert skipped["status"] == "skip" and skipped["message"] == "mock does not report quota"


# -- the reader --------------------------------------------------------------------------------


class _Hooked:
    """A provider-like object with a diagnostics hook, optionally behind a decorator."""

    def __init__(self, hook: Callable[[], Awaitable[Any]], name: str = "fake") -> None:
        self.name = name
        self.diagnostics = hook


class _Decorator:
    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "fake")


async def test_the_reader_unwraps_decorators_and_honours_refresh(
    codex_bridge: CodexBridge,
) -> None:
    backend = codex_bridge.backend
    provider = codex_bridge.app.runtime.registry.resolve("codex-responses")
    assert provider is not codex_bridge.provider(), "the registry holds the fan-out decorator"
    first = await read_quota(provider)
    backend.quota.primary_used_percent = 55.0
    cached = await read_quota(provider)
    assert first.status == cached.status == "available"
    assert backend.calls("usage") == 1, "the second reading came from the provider's cache"
    assert cached.quota == first.quota
    refreshed = await read_quota(provider, refresh=True)
    assert backend.calls("usage") == 2
    assert refreshed.quota is not None
    assert refreshed.quota["windows"][0] == {
        **first.quota["windows"][0],  # type: ignore[index]
        "used_percent": 55.0,
        "resets_at": refreshed.quota["windows"][0]["resets_at"],
    }


async def test_a_failed_refresh_keeps_the_last_reading_and_says_why(
    codex_bridge: CodexBridge,
) -> None:
    backend = codex_bridge.backend
    provider = codex_bridge.app.runtime.registry.resolve("codex-images")
    assert (await read_quota(provider)).status == "available"
    backend.script("http_500", route="usage")
    reading = await read_quota(provider, refresh=True)
    assert reading.status == "unavailable"
    assert reading.warning is not None and reading.warning["code"] == "upstream"
    assert reading.quota is not None and reading.quota["windows"][0]["used_percent"] == 12
    assert_no_secrets(json.dumps(reading.to_dict()))


async def test_the_reader_turns_hook_failures_into_warnings() -> None:
    async def slow() -> Any:
        await asyncio.sleep(10)

    async def broken() -> Any:
        raise RuntimeError("boom with a secret " + BRIDGE_TOKEN)

    async def refused() -> Any:
        raise BridgeError(ErrorCode.AUTHENTICATION, "login expired")

    timed_out = await read_quota(_Decorator(_Hooked(slow)), timeout_s=0.05)  # type: ignore[arg-type]
    assert timed_out.status == "unavailable" and timed_out.warning is not None
    assert timed_out.warning["code"] == "timeout"
    crashed = await read_quota(_Hooked(broken))  # type: ignore[arg-type]
    assert crashed.warning == {
        "code": "internal",
        "message": "the provider's quota could not be read",
    }
    assert_no_secrets(json.dumps(crashed.to_dict()))
    denied = await read_quota(_Hooked(refused))  # type: ignore[arg-type]
    assert denied.warning == {"code": "authentication", "message": "login expired"}
    none = await read_quota(_Decorator(_Decorator(object())))  # type: ignore[arg-type]
    assert none == QuotaReading("fake", "not_reported")


def test_only_non_identifying_quota_fields_are_kept() -> None:
    detail = {
        "provider": "codex-responses",
        "account_id": BRIDGE_ACCOUNT,
        "quota": {
            "status": "available",
            "plan_type": "pro",
            "email": "mock-user@example.invalid",
            "user_id": "user-mock-secret",
            "observed_at": float("nan"),
            "windows": [
                {"name": "primary", "used_percent": 5, "token": BRIDGE_TOKEN, "resets_at": 9},
                "not a window",
            ],
        },
    }
    reading = reading_from_detail("codex-responses", detail)
    assert reading.to_dict() == {
        "provider": "codex-responses",
        "status": "available",
        "quota": {
            "plan_type": "pro",
            "observed_at": None,
            "windows": [{"name": "primary", "used_percent": 5, "resets_at": 9}],
        },
    }


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        (None, QuotaReading("p", "not_reported")),
        ({"sessions": 3}, QuotaReading("p", "not_reported")),
        (
            {"status": "unavailable", "reason": "timeout"},
            QuotaReading(
                "p",
                "unavailable",
                None,
                {"code": "timeout", "message": "the provider did not report its quota in time"},
            ),
        ),
        (
            {"status": "unavailable", "reason": "error"},
            QuotaReading(
                "p",
                "unavailable",
                None,
                {"code": "internal", "message": "the provider's quota could not be read"},
            ),
        ),
        (
            {
                "quota": {
                    "status": "unavailable",
                    "error": {"code": "rate_limited", "message": "slow down"},
                }
            },
            QuotaReading(
                "p", "unavailable", None, {"code": "rate_limited", "message": "slow down"}
            ),
        ),
    ],
)
def test_diagnostics_details_from_a_bridge(detail: Any, expected: QuotaReading) -> None:
    """The shapes ``providers_detail`` entries take (the server's hook wrapper)."""
    assert reading_from_detail("p", detail) == expected


def test_the_separate_image_limit_is_shown_by_quota_and_doctor(
    cli: Cli, codex_backend: CodexBackend
) -> None:
    codex_backend.quota.image_used_percent = 100.0
    env = codex_env(cli, codex_backend)

    result = cli("--json", "providers", "quota", "--provider", "codex-responses", env=env)

    assert result.code == 0, result.stderr
    quota = by_provider(result.json())["codex-responses"]["quota"]
    windows = {window["name"]: window for window in quota["windows"]}
    assert windows["image_gen.primary"] == {
        "name": "image_gen.primary",
        "limit": "image_gen",
        "label": "1d",
        "used_percent": 100,
        "window_minutes": 1440,
        "resets_at": windows["image_gen.primary"]["resets_at"],
    }
    assert (windows["primary"]["label"], windows["secondary"]["label"]) == ("5h", "7d")
    assert quota["image_limit_exhausted"] is True

    doctor = _doctor_quota(cli, env, "codex-responses")
    assert doctor["status"] == "pass"
    assert doctor["details"]["image_limit_exhausted"] is True
    assert "image_gen.primary" in [window["name"] for window in doctor["details"]["windows"]]
    assert_no_secrets(result.stdout, result.stderr)


# -- an account pool ------------------------------------------------------------------------

POOL_TOKENS = {"alpha": "tok-alpha-SECRET-quota-1", "beta": "tok-beta-SECRET-quota-2"}


def pool_sets(cli: Cli) -> list[str]:
    """Two pool accounts, each a codex home with its own token."""
    sets: list[str] = []
    for name, token in POOL_TOKENS.items():
        home = cli.root / f"home-{name}"
        write_codex_auth(home, access_token=token, account_id=f"acct-{name}-SECRET-quota")
        sets += ["--set", f'accounts.pool.{name}.codex_home="{home}"']
    return sets


def test_with_a_pool_every_account_is_listed_without_secrets(
    cli: Cli, codex_backend: CodexBackend
) -> None:
    codex_backend.login(POOL_TOKENS["beta"]).quota.image_used_percent = 60.0
    env = codex_env(cli, codex_backend)
    args = ("--json", *pool_sets(cli), "providers", "quota", "--provider", "codex-responses")
    result = cli(*args, env=env)
    assert result.code == 0, result.stderr
    (item,) = result.json()["items"]
    pool = item["accounts"]
    assert (pool["policy"], pool["ready"]) == ("quota", 2)
    alpha, beta = pool["accounts"]
    assert (alpha["name"], beta["name"]) == ("alpha", "beta")
    assert alpha["login"] == "codex_home" and alpha["login_id"].startswith("sha256:")
    assert beta["quota"]["image_remaining_percent"] == 40.0
    assert beta["quota"]["image_windows"][0]["limit"] == "image_gen"
    assert {r.authorization_sha256 for r in codex_backend.requests_for("usage")} >= {
        token_sha256(token) for token in POOL_TOKENS.values()
    }
    assert_no_secrets(result.stdout, result.stderr)
    for secret in (*POOL_TOKENS.values(), "acct-alpha-SECRET-quota", "acct-beta-SECRET-quota"):
        assert secret not in result.stdout + result.stderr


def test_doctor_checks_every_pool_login_and_account(cli: Cli, codex_backend: CodexBackend) -> None:
    env = codex_env(cli, codex_backend)
    sets = pool_sets(cli)
    (cli.root / "home-beta" / "auth.json").unlink()
    cli.write("imagegen-bridge.toml", "version = 1\n")
    result = cli("--json", *sets, "doctor", "--provider", "codex-responses", env=env)
    checks = {c["name"]: c for c in result.json()["checks"]}
    login = checks["codex_oauth"]
    assert login["status"] == "warn"
    assert login["details"]["accounts"] == {"alpha": "ok", "beta": "missing"}
    accounts = checks["provider_accounts"]
    assert accounts["status"] == "warn" and accounts["message"].endswith(
        "1 of 2 pool accounts ready"
    )
    assert_no_secrets(result.stdout, result.stderr)
