"""The upstream's own words reach the person in the CLI's human output (``upstream:``)."""

from __future__ import annotations

from tests.cli.conftest import Cli
from tests.cli.test_quota import assert_no_secrets, codex_env
from tests.support.codex_backend import CodexBackend


def test_a_plan_refusal_prints_what_the_backend_said(cli: Cli, codex_backend: CodexBackend) -> None:
    codex_backend.refused_models = {"gpt-5.5"}
    env = {
        **codex_env(cli, codex_backend),
        "IMAGEGEN_BRIDGE__PROVIDERS__CODEX_RESPONSES__RESPONSES_MODEL_FALLBACKS": "[]",
    }

    result = cli("generate", "a red fox", "--provider", "codex-responses", env=env)

    assert result.code != 0
    lines = result.stderr.splitlines()
    assert "error: The Codex backend rejected the request (HTTP 400)." in lines
    assert (
        "upstream: The 'gpt-5.5' model is not supported when using Codex with a ChatGPT account."
    ) in lines
    assert_no_secrets(result.stdout, result.stderr)


def test_an_in_stream_safety_failure_prints_the_upstream_reason(
    cli: Cli, codex_backend: CodexBackend
) -> None:
    codex_backend.script("content_policy_refusal")

    result = cli("generate", "a red fox", "--provider", "codex-responses",
                 env=codex_env(cli, codex_backend))  # fmt: skip

    assert result.code != 0
    assert "upstream: Your request was rejected by the safety system." in result.stderr
    assert_no_secrets(result.stdout, result.stderr)
