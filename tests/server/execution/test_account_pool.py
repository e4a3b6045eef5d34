"""The account pool as an HTTP caller sees it: every account out of quota is one 429 whose
``Retry-After`` is the earliest reset, and the extended diagnostics list the accounts."""

from __future__ import annotations

import json
from pathlib import Path

from tests.server.conftest import ServeFactory
from tests.support.codex_backend import CodexBackend, bridge_sets, write_codex_auth

TOKENS = {"alpha": "tok-alpha-SECRET-http-1", "beta": "tok-beta-SECRET-http-2"}


def test_every_account_out_of_quota_is_a_429_with_retry_after_at_the_earliest_reset(
    serve: ServeFactory, codex_backend: CodexBackend, tmp_path: Path
) -> None:
    sets = [s for s in bridge_sets(codex_backend, tmp_path) if not s.startswith("inputs.")]
    for name, token in TOKENS.items():
        home = tmp_path / f"home-{name}"
        write_codex_auth(home, access_token=token, account_id=f"acct-{name}-SECRET-http")
        sets.append(f'accounts.pool.{name}.codex_home="{home}"')
        login = codex_backend.login(token)
        login.quota.limit_resets_in_s = login.quota.primary_resets_in_s = (
            900 if name == "alpha" else 300
        )
        login.script("http_429")
    server = serve("providers.codex_responses.enabled=true", *sets,
                   'default_provider="codex-responses"')  # fmt: skip
    body = {"operation": "generate", "prompt": "a red fox"}

    with server.client() as client:
        response = client.post("/v1/images", json=body)
        diagnostics = client.get("/v1/diagnostics/extended").json()
        base = client.get("/v1/diagnostics").json()

    assert response.status_code == 429
    assert 290 <= int(response.headers["retry-after"]) <= 300
    error = response.json()["error"]["imagegen_bridge"]
    assert error["code"] == "rate_limited" and error["details"]["quota_exhausted"] is True
    assert [a["account"] for a in error["details"]["accounts_tried"]] == ["alpha", "beta"]
    pool = diagnostics["providers_detail"]["codex-responses"]["accounts"]
    assert [(a["name"], a["ready"], a["reason"]) for a in pool["accounts"]] == [
        ("alpha", False, "quota_exhausted"),
        ("beta", False, "quota_exhausted"),
    ]
    assert "providers_detail" not in base  # strict original clients never see it
    text = json.dumps(diagnostics) + response.text
    for token in TOKENS.values():
        assert token not in text
    assert "acct-alpha-SECRET-http" not in text
