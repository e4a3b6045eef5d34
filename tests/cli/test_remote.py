"""``--remote`` / ``IMAGEGEN_BRIDGE_URL``: the CLI against a running bridge over HTTP.

Generation, providers and sessions run against the real bridge app; jobs and presets run
against a small stub speaking the wire shapes of the jobs and presets routes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from imagebridge.cli.remote import normalize_base_url
from imagebridge.contract.errors import BridgeError
from tests.cli.conftest import Cli
from tests.cli.servers import bridge, serving
from tests.support.images import png_bytes

SMALL = ("--size", "16x16")


@pytest.fixture
def remote(cli: Cli) -> Iterator[str]:
    with bridge(cli.root / "server-data") as url:
        yield url


def test_remote_generate_returns_the_bridge_response(cli: Cli, remote: str) -> None:
    result = cli("--json", "--remote", remote, "generate", "remote fox", *SMALL)
    assert result.code == 0, result.stderr
    image = result.json()["data"][0]
    assert image["type"] == "b64_json"
    assert hashlib.sha256(base64.b64decode(image["b64_json"])).hexdigest() == image["sha256"]
    assert not cli.data.exists(), "nothing is generated or stored locally"


def test_environment_variable_selects_remote_mode(cli: Cli, remote: str) -> None:
    result = cli("generate", "fox", *SMALL, env={"IMAGEGEN_BRIDGE_URL": remote})
    assert result.code == 0, result.stderr
    line = result.stdout.splitlines()[1].split("\t")
    assert line[1].startswith("image-") and line[1].endswith(".png"), "remote shows the name"
    assert (cli.root / "server-data" / "artifacts" / line[1]).is_file()


def test_remote_edit_sends_local_files_inline(cli: Cli, remote: str) -> None:
    cli.write("photo.png", png_bytes(24, 24))
    result = cli("--json", "--remote", remote, "edit", "bluer", "-i", "photo.png", *SMALL)
    assert result.code == 0, result.stderr
    assert result.json()["data"][0]["width"] == 16


def test_remote_errors_keep_code_retryability_and_request_id(cli: Cli, remote: str) -> None:
    result = cli("--json", "--remote", remote, "generate", "x [mock:fail=rate_limited]", *SMALL)
    assert result.code == 5
    error = result.error()
    assert error["code"] == "rate_limited" and error["retryable"] is True
    assert error["details"]["request_id"]


def test_remote_validation_error_lists_issues(cli: Cli, remote: str) -> None:
    body = {"prompt": "x", "operation": "generate", "parameters": {"n": 0}}
    cli.write("r.json", json.dumps(body))
    result = cli("--remote", remote, "generate", "--request", "r.json")
    assert result.code == 2
    # Local validation runs first: the bridge is never asked to do invalid work.
    assert "issue: parameters.n" in result.stderr


def test_remote_providers_and_sessions(cli: Cli, remote: str) -> None:
    providers = cli("--json", "--remote", remote, "providers", "list").json()
    assert [item["name"] for item in providers["items"]] == ["mock"]
    caps = cli("--json", "--remote", remote, "providers", "capabilities", "--provider", "mock")
    assert caps.json()["provider"] == "mock"
    missing = cli("--json", "--remote", remote, "session", "get", "nokey", "--provider", "mock")
    assert missing.code == 4 and missing.error()["code"] == "session"


def test_bearer_token_comes_from_the_environment(cli: Cli) -> None:
    server_env = {"BRIDGE_TOKEN": "s3cret-token"}
    with bridge(
        cli.root / "auth-data", ["server.bearer_token_env=BRIDGE_TOKEN"], server_env
    ) as url:
        refused = cli("--json", "--remote", url, "providers", "list")
        assert refused.code == 3 and refused.error()["code"] == "authentication"
        allowed = cli(
            "--json", "--remote", url, "providers", "list",
            env={"IMAGEGEN_BRIDGE_TOKEN": "s3cret-token"},
        )  # fmt: skip
        assert allowed.code == 0, allowed.stderr
        assert "s3cret-token" not in allowed.stdout + allowed.stderr


def test_unreachable_bridge_is_a_retryable_upstream_error(cli: Cli) -> None:
    with serving(Starlette()) as url:
        pass  # the port is now closed
    result = cli("--json", "--remote", url, "generate", "x", *SMALL)
    assert result.code == 6
    error = result.error()
    assert error["message"] == "could not connect to the bridge" and error["retryable"] is True


def test_oversized_answers_are_refused(cli: Cli, remote: str) -> None:
    result = cli("--json", "--remote", remote, "--set", "artifacts.max_response_bytes=200",
                 "generate", "x", *SMALL)  # fmt: skip
    assert result.code == 6 and result.error()["code"] == "protocol"


def test_remote_is_refused_for_local_only_commands(cli: Cli) -> None:
    result = cli("--remote", "http://127.0.0.1:9", "config", "check")
    assert result.code == 2 and "--remote applies only to" in result.stderr


@pytest.mark.parametrize(
    ("url", "token", "message"),
    [
        ("ftp://h", False, "http or https"),
        ("http://user:pw@127.0.0.1:1", False, "credentials"),
        ("http://127.0.0.1:1/?q=1", False, "query"),
        ("http://example.com", True, "plain http"),
    ],
)
def test_bridge_urls_are_checked(url: str, token: bool, message: str) -> None:
    with pytest.raises(BridgeError, match=message):
        normalize_base_url(url, sends_token=token)


def test_bridge_url_normalization() -> None:
    assert normalize_base_url("https://h.example/bridge/", sends_token=True) == (
        "https://h.example/bridge"
    )
    assert normalize_base_url("http://localhost:8787", sends_token=True) == "http://localhost:8787"


# -- jobs and presets against a stub -----------------------------------------------------------


def _envelope(status: int, code: str, message: str, **details: Any) -> JSONResponse:
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": code,
            "imagegen_bridge": {"code": code, "retryable": False, "details": details},
        },
        "request_id": "req-1",
    }
    return JSONResponse(body, status_code=status)


def _job(job_id: str, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": job_id,
        "status": status,
        "created": 1,
        "updated": 2,
        "favorite": False,
        "request": {"prompt": "p", "operation": "generate"},
        "cancel_requested": False,
        **extra,
    }


@dataclass
class Stub:
    polls: dict[str, int] = field(default_factory=dict)
    queries: list[dict[str, str]] = field(default_factory=list)
    authorization: list[str | None] = field(default_factory=list)
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def app(self) -> Starlette:
        async def list_jobs(request: Request) -> Response:
            self.authorization.append(request.headers.get("authorization"))
            self.queries.append(dict(request.query_params))
            summary = {"id": "j1", "status": "queued", "created": 1, "updated": 2,
                       "favorite": False}  # fmt: skip
            return JSONResponse({"items": [summary], "next_cursor": "c2"})

        async def get_job(request: Request) -> Response:
            job_id = request.path_params["job_id"]
            if job_id == "missing":
                return _envelope(404, "invalid_request", "durable job was not found",
                                 resource="job")  # fmt: skip
            count = self.polls[job_id] = self.polls.get(job_id, 0) + 1
            if job_id == "slow" and count < 3:
                return JSONResponse(_job(job_id, "running", progress={"stage": "provider"}))
            if job_id == "failing":
                error = {"code": "safety_rejected", "message": "no", "retryable": False}
                return JSONResponse(_job(job_id, "failed", error=error))
            if job_id == "garbled":
                return JSONResponse({"id": job_id, "status": "exploded"})
            if job_id == "forever":
                return JSONResponse(_job(job_id, "running"))
            return JSONResponse(_job(job_id, "succeeded"))

        async def cancel_job(request: Request) -> Response:
            job_id = request.path_params["job_id"]
            return JSONResponse(_job(job_id, "cancelled", cancel_requested=True))

        async def presets(request: Request) -> Response:
            if request.method == "POST":
                body = await request.json()
                preset = {**body, "created": 1, "updated": 1}
                self.presets[body["name"]] = preset
                return JSONResponse(preset, status_code=201)
            return JSONResponse({"items": list(self.presets.values())})

        async def preset(request: Request) -> Response:
            name = request.path_params["name"]
            if name not in self.presets:
                return _envelope(404, "invalid_request", "preset was not found",
                                 resource="preset")  # fmt: skip
            if request.method == "DELETE":
                del self.presets[name]
                return Response(status_code=204)
            if request.method == "PUT":
                body = await request.json()
                self.presets[name] = {"name": name, **body, "created": 1, "updated": 2}
            return JSONResponse(self.presets[name])

        return Starlette(
            routes=[
                Route("/v1/jobs", list_jobs),
                Route("/v1/jobs/{job_id}", get_job, methods=["GET"]),
                Route("/v1/jobs/{job_id}", cancel_job, methods=["DELETE"]),
                Route("/v1/presets", presets, methods=["GET", "POST"]),
                Route("/v1/presets/{name}", preset, methods=["GET", "PUT", "DELETE"]),
            ]
        )


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()
    with serving(state.app()) as url:
        yield state, url


def test_jobs_list_passes_filters_and_the_token(cli: Cli, stub: tuple[Stub, str]) -> None:
    state, url = stub
    result = cli("--json", "jobs", "list", "--remote", url, "--status", "queued",
                 "--favorite", "--search", "fox", "--limit", "5",
                 env={"IMAGEGEN_BRIDGE_TOKEN": "tok"})  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.json()["next_cursor"] == "c2"
    assert state.queries[-1] == {"limit": "5", "status": "queued", "search": "fox",
                                 "favorite": "true"}  # fmt: skip
    assert state.authorization[-1] == "Bearer tok"


def test_jobs_default_to_the_configured_bind(cli: Cli, stub: tuple[Stub, str]) -> None:
    _, url = stub
    bind = url.removeprefix("http://")
    result = cli("--json", "--set", f'server.bind="{bind}"', "jobs", "get", "j1")
    assert result.code == 0, result.stderr
    assert result.json()["status"] == "succeeded"


def test_jobs_get_missing_and_cancel(cli: Cli, stub: tuple[Stub, str]) -> None:
    _, url = stub
    missing = cli("--json", "--remote", url, "jobs", "get", "missing")
    assert missing.code == 2
    assert missing.error()["details"]["resource"] == "job"
    cancelled = cli("--json", "--remote", url, "jobs", "cancel", "j9")
    assert cancelled.json()["cancel_requested"] is True


def test_a_malformed_answer_is_a_protocol_error_not_printed(
    cli: Cli, stub: tuple[Stub, str]
) -> None:
    """Remote answers are checked by the SDK's contract models before anything is shown."""
    _, url = stub
    garbled = cli("--json", "--remote", url, "jobs", "get", "garbled")
    assert garbled.code == 6 and garbled.stdout == ""
    assert garbled.error()["code"] == "protocol"
    assert "malformed job" in garbled.error()["message"]


def test_jobs_wait_polls_until_terminal_and_exits_like_the_job(
    cli: Cli, stub: tuple[Stub, str]
) -> None:
    state, url = stub
    done = cli("--json", "--remote", url, "jobs", "wait", "slow", "--interval-ms", "100")
    assert done.code == 0 and done.json()["status"] == "succeeded"
    assert state.polls["slow"] == 3
    failed = cli("--json", "--remote", url, "jobs", "wait", "failing")
    assert failed.code == 3
    late = cli("--json", "--remote", url, "jobs", "wait", "forever",
               "--timeout-ms", "250", "--interval-ms", "100")  # fmt: skip
    assert late.code == 124 and late.error()["code"] == "timeout"


def test_remote_presets_crud_and_generation(cli: Cli, stub: tuple[Stub, str]) -> None:
    state, url = stub
    cli.write("t.json", json.dumps({"prompt": "stored", "parameters": {"n": 2}}))
    created = cli("--json", "--remote", url, "preset", "create", "p1", "--from", "t.json",
                  "--description", "two")  # fmt: skip
    assert created.code == 0, created.stderr
    assert state.presets["p1"]["template"]["parameters"]["n"] == 2
    listed = cli("--json", "--remote", url, "preset", "list").json()
    assert [item["name"] for item in listed["items"]] == ["p1"]
    dry = cli("--json", "--remote", url, "generate", "--preset", "p1", "--dry-run")
    assert dry.json()["prompt"] == "stored" and dry.json()["parameters"]["n"] == 2
    updated = cli("--json", "--remote", url, "preset", "update", "p1", "--from", "t.json")
    assert "description" not in updated.json()
    assert cli("--json", "--remote", url, "preset", "delete", "p1", "--force").code == 0
    gone = cli("--json", "--remote", url, "preset", "get", "p1")
    assert gone.code == 2 and gone.error()["message"] == "preset was not found"
