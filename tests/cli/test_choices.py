"""The flag value sets mirror the contract enums; bad values fail like the original."""

from __future__ import annotations

import pytest

from imagebridge.cli._clicklib import BadParameter
from imagebridge.cli.choices import VALUE_SETS, choice, ranged
from imagebridge.contract import enums

CONTRACT = {
    "quality": enums.Quality,
    "format": enums.OutputFormat,
    "background": enums.Background,
    "transparency": enums.TransparencyMode,
    "moderation": enums.Moderation,
    "resolution": enums.Resolution,
    "failure_policy": enums.MultiImageFailurePolicy,
    "batch_execution": enums.BatchExecution,
    "input_fidelity": enums.InputFidelity,
    "action": enums.ImageAction,
    "response_format": enums.ResponseFormat,
    "collision": enums.ArtifactCollisionPolicy,
    "metadata": enums.ArtifactMetadataPolicy,
    "compatibility": enums.CompatibilityMode,
    "negative_prompt_mode": enums.NegativePromptMode,
    "revised_prompt": enums.RevisedPromptPolicy,
    "session": enums.SessionMode,
    "fallback_policy": enums.FallbackPolicy,
    "job_status": enums.ImageJobStatus,
}


@pytest.mark.parametrize("kind", sorted(CONTRACT))
def test_value_sets_equal_the_contract_enums(kind: str) -> None:
    assert VALUE_SETS[kind] == tuple(member.value for member in CONTRACT[kind])


def test_choice_accepts_snake_case_names_only() -> None:
    parse = choice("quality")
    assert parse("high") == "high"
    with pytest.raises(BadParameter, match="unsupported value `High`"):
        parse("High")


def test_ranged_bounds_are_inclusive() -> None:
    parse = ranged(1, 255)
    assert parse("1") == 1 and parse("255") == 255
    for bad in ("0", "256", "x", "1.5"):
        with pytest.raises(BadParameter, match="unsupported value"):
            parse(bad)
    assert ranged(1)("999999") == 999999
