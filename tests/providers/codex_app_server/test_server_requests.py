"""Declines must be valid answers by codex 0.169's own response schemas."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from imagebridge.providers.codex_app_server.server_requests import (
    DECLINED_APPROVALS,
    METHOD_NOT_FOUND,
    answer_server_request,
)

RESPONSE_SCHEMAS = {
    "item/commandExecution/requestApproval": "CommandExecutionRequestApprovalResponse.json",
    "item/fileChange/requestApproval": "FileChangeRequestApprovalResponse.json",
    "item/permissions/requestApproval": "PermissionsRequestApprovalResponse.json",
    "mcpServer/elicitation/request": "McpServerElicitationRequestResponse.json",
    "execCommandApproval": "ExecCommandApprovalResponse.json",
    "applyPatchApproval": "ApplyPatchApprovalResponse.json",
}


def test_every_approval_method_of_the_schema_is_covered() -> None:
    assert set(DECLINED_APPROVALS) == set(RESPONSE_SCHEMAS)


@pytest.mark.parametrize("method", sorted(RESPONSE_SCHEMAS))
def test_declines_match_the_codex_response_schema(
    method: str, schema: Callable[[str], dict[str, Any]]
) -> None:
    reply = answer_server_request(method, {"threadId": "t"})
    assert not reply.is_error
    jsonschema.validate(reply.result, schema(RESPONSE_SCHEMAS[method]))
    message = reply.to_message(7)
    assert message == {"id": 7, "result": reply.result}


@pytest.mark.parametrize(
    "method", ["item/commandExecution/requestApproval", "item/fileChange/requestApproval"]
)
def test_v2_approvals_are_declines_not_cancels_or_accepts(method: str) -> None:
    assert answer_server_request(method, {}).result == {"decision": "decline"}


def test_permission_requests_grant_nothing() -> None:
    result = answer_server_request("item/permissions/requestApproval", {}).result
    assert result["permissions"] == {}


@pytest.mark.parametrize(
    "method",
    [
        "account/chatgptAuthTokens/refresh",
        "item/tool/requestUserInput",
        "item/tool/call",
        "attestation/generate",
        "something/new",
    ],
)
def test_everything_else_is_method_not_found(method: str) -> None:
    reply = answer_server_request(method, {})
    assert reply.is_error
    message = reply.to_message("abc")
    assert message["id"] == "abc"
    assert message["error"]["code"] == METHOD_NOT_FOUND == -32601
    assert "result" not in message
