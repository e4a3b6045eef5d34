"""Answers to the requests codex sends *to* the bridge (approvals, tool input, refresh…).

The bridge never lets codex run commands, change files, widen its sandbox or ask a
human anything: every approval is declined with the result shape the codex 0.169
schema defines for that method, and every other server request gets a JSON-RPC
``-32601`` error. Either way codex is answered at once and never left waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DECLINED_APPROVALS",
    "METHOD_NOT_FOUND",
    "ServerReply",
    "ServerRequestHandler",
    "answer_server_request",
]

METHOD_NOT_FOUND = -32601

_REJECTION = "imagegen-bridge only generates images; it does not approve commands or changes."

DECLINED_APPROVALS: Mapping[str, Mapping[str, Any]] = {
    # v2 approvals: CommandExecutionApprovalDecision / FileChangeApprovalDecision.
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    # Granting an empty permission profile is how a client refuses extra permissions.
    "item/permissions/requestApproval": {"permissions": {}, "scope": "turn"},
    "mcpServer/elicitation/request": {"action": "decline", "content": None},
    # v1 approvals: ReviewDecision, whose refusal that lets the turn go on is `denied`.
    "execCommandApproval": {"decision": {"denied": {"rejection": _REJECTION}}},
    "applyPatchApproval": {"decision": {"denied": {"rejection": _REJECTION}}},
}


@dataclass(frozen=True, slots=True)
class ServerReply:
    """Either a ``result`` or an ``error`` (code and message) for one server request."""

    result: Any = None
    error_code: int | None = None
    error_message: str | None = None

    @property
    def is_error(self) -> bool:
        return self.error_code is not None

    def to_message(self, request_id: int | str) -> dict[str, Any]:
        if self.error_code is not None:
            return {
                "id": request_id,
                "error": {"code": self.error_code, "message": self.error_message or ""},
            }
        return {"id": request_id, "result": self.result}


ServerRequestHandler = Callable[[str, Mapping[str, Any]], ServerReply]


def answer_server_request(method: str, params: Mapping[str, Any]) -> ServerReply:
    """The bridge's fixed policy: decline approvals, refuse everything else."""
    declined = DECLINED_APPROVALS.get(method)
    if declined is not None:
        return ServerReply(result=dict(declined))
    return ServerReply(
        error_code=METHOD_NOT_FOUND,
        error_message=f"imagegen-bridge does not handle the server request {method[:128]!r}",
    )
