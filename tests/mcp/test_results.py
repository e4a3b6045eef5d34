"""Error results: what the model reads when a call fails."""

from __future__ import annotations

from mcp_types import TextContent

from imagebridge.contract.errors import BridgeError, ErrorCode
from imagebridge.mcp.results import error_result


def test_error_results_carry_issues_fields_outcome_and_suggestions() -> None:
    error = BridgeError(
        ErrorCode.INVALID_REQUEST,
        "request validation failed",
        details={"issues": [{"field": "parameters.n", "code": "out_of_range", "message": "n"}]},
    )
    result = error_result(error)
    assert result.is_error is True
    [block] = result.content
    assert isinstance(block, TextContent)
    assert "- parameters.n: n (out_of_range)" in block.text
    assert block.text.splitlines()[-1].startswith("- ")  # a suggestion closes the text
    assert result.structured_content == {"error": error.to_dict()}
    unknown = error_result(BridgeError(ErrorCode.UPSTREAM, "lost").mark_unknown_outcome())
    assert "may have run" in unknown.content[0].text  # type: ignore[union-attr]
