"""A caller that goes away after the provider call began: the image is kept (issue 39).

Under the default ``on_disconnect: keep``, a client that disconnects from a synchronous
request (native, streamed or OpenAI-compatible) no longer cancels the paid generation: it
finishes, its image is kept as an artifact under the caller, and the request's record in
the job history says so, with its prompt. Before any provider call a disconnect still
cancels, and ``policies.on_disconnect: cancel`` keeps the original's rule per request.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from typing import Any

import httpx
import pytest

from tests.server.auth.keys import ENV, KEYS_ON, admin, as_key, create_key
from tests.server.conftest import LiveServer, ServeFactory
from tests.server.doubles import mock_of
from tests.server.rawhttp import BOUNDARY, multipart_edit, open_request, read_until
from tests.support.waiting import wait_until

LATENCY_MS = 1_500
NATIVE = {"operation": "generate", "parameters": {"size": "8x8"}}
ROUTES: list[tuple[str, str]] = [
    ("/v1/images", "native"),
    ("/v1/images/stream", "native"),
    ("/v1/images/generations", "openai"),
    ("/v1/images/generations", "openai-stream"),
    ("/v1/images/edits", "multipart"),
]
ORIGINS = {
    "/v1/images": "sync",
    "/v1/images/stream": "stream",
    "/v1/images/generations": "openai",
    "/v1/images/edits": "openai",
}


def body_for(kind: str, prompt: str) -> tuple[bytes | dict[str, Any], str]:
    if kind == "native":
        return {**NATIVE, "prompt": prompt}, "application/json"
    if kind == "openai":
        return {"prompt": prompt, "size": "8x8"}, "application/json"
    if kind == "openai-stream":
        return {"prompt": prompt, "size": "8x8", "stream": True}, "application/json"
    return multipart_edit(prompt), f"multipart/form-data; boundary={BOUNDARY}"


def only_record(client: httpx.Client, **params: str) -> dict[str, Any]:
    listed = client.get("/v1/jobs", params=params)
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert len(items) == 1, items
    detail = client.get(f"/v1/jobs/{items[0]['id']}")
    assert detail.status_code == 200
    record: dict[str, Any] = detail.json()
    record["origin"] = detail.headers["x-imagebridge-origin"]
    return record


def leave_once_the_provider_runs(
    server: LiveServer, path: str, kind: str, prompt: str, headers: dict[str, str] | None = None
) -> None:
    mock = mock_of(server)
    body, content_type = body_for(kind, prompt)
    sock = open_request(server.port, path, body, headers=headers, content_type=content_type)
    try:
        if path.endswith("stream"):
            assert b"event: started" in read_until(sock, b"event: started")
        assert wait_until(lambda: mock.in_flight == 1)
    finally:
        sock.close()


@pytest.mark.parametrize(("path", "kind"), ROUTES)
def test_a_caller_leaving_after_the_provider_began_keeps_the_image(
    serve: ServeFactory, path: str, kind: str
) -> None:
    server = serve()
    mock = mock_of(server)
    prompt = f"[mock:latency={LATENCY_MS}] a kept lighthouse"
    leave_once_the_provider_runs(server, path, kind, prompt)
    # The generation runs to its end: not cancelled, called once.
    assert wait_until(lambda: mock.in_flight == 0)
    assert (mock.calls, mock.cancellations) == (1, 0)
    with server.client() as client:
        assert wait_until(
            lambda: (
                client.get("/v1/jobs").json()["items"][:1]
                and client.get("/v1/jobs").json()["items"][0]["status"] == "succeeded"
            ),
            timeout=10,
        )
        record = only_record(client)
        assert record["origin"] == ORIGINS[path]
        assert record["request"]["prompt"] == prompt
        found = client.get("/v1/jobs", params={"search": "kept lighthouse"}).json()["items"]
        assert [item["id"] for item in found] == [record["id"]]
        image = record["result"]["data"][0]
        assert image["type"] == "artifact"
        fetched = client.get(f"/v1/artifacts/{image['id']}")
        assert fetched.status_code == 200
        assert fetched.headers["content-type"] == "image/png"
        assert fetched.content.startswith(b"\x89PNG")


def test_a_caller_leaving_before_any_provider_call_cancels(serve: ServeFactory) -> None:
    """One request holds the only global slot; a second waits in admission and leaves:
    nothing was paid for, so it is cancelled and never reaches the provider."""
    server = serve("runtime.global.max_concurrent=1")
    mock = mock_of(server)
    blocker = open_request(
        server.port, "/v1/images", {**NATIVE, "prompt": "[mock:latency=2500] the first"}
    )
    try:
        assert wait_until(lambda: mock.in_flight == 1)
        waiting = open_request(server.port, "/v1/images", {**NATIVE, "prompt": "the second"})
        with server.client() as client:
            assert wait_until(lambda: len(client.get("/v1/jobs").json()["items"]) == 2)
            waiting.close()
            assert wait_until(
                lambda: client.get("/v1/jobs", params={"status": "cancelled"}).json()["items"],
                timeout=5,
            )
            cancelled = client.get("/v1/jobs", params={"status": "cancelled"}).json()["items"]
            detail = client.get(f"/v1/jobs/{cancelled[0]['id']}").json()
            assert detail["request"]["prompt"] == "the second"
            assert detail["error"]["code"] == "cancelled"
    finally:
        read_until(blocker, b"\r\n\r\n")
        blocker.close()
    assert wait_until(lambda: mock.in_flight == 0)
    assert mock.calls == 1  # the second never reached the provider


def test_the_cancel_policy_of_one_request_stops_its_generation(serve: ServeFactory) -> None:
    server = serve()
    mock = mock_of(server)
    body = {
        **NATIVE,
        "prompt": f"[mock:latency={LATENCY_MS}] not kept",
        "policies": {"on_disconnect": "cancel"},
    }
    sock = open_request(server.port, "/v1/images", body)
    try:
        assert wait_until(lambda: mock.in_flight == 1)
    finally:
        sock.close()
    assert wait_until(lambda: mock.cancellations == 1 and mock.in_flight == 0)
    with server.client() as client:
        assert wait_until(lambda: client.get("/v1/jobs").json()["items"][0]["status"] != "running")
        record = only_record(client)
    assert record["status"] == "cancelled"
    assert record["request"]["policies"]["on_disconnect"] == "cancel"


_KILLED_CLIENT = textwrap.dedent(
    """
    import json, socket, sys
    port, path, secret, prompt, kind = sys.argv[1:6]
    if kind == "openai":
        payload = json.dumps({"prompt": prompt, "size": "8x8"}).encode()
    else:
        payload = json.dumps(
            {"operation": "generate", "prompt": prompt, "parameters": {"size": "8x8"}}
        ).encode()
    head = (
        f"POST {path} HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n"
        f"Authorization: Bearer {secret}\\r\\nContent-Type: application/json\\r\\n"
        f"Content-Length: {len(payload)}\\r\\n\\r\\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", int(port)))
    sock.sendall(head + payload)
    print("sent", flush=True)
    sock.recv(1)  # blocks until killed
    """
)


@pytest.mark.parametrize(
    ("path", "kind"), [("/v1/images", "native"), ("/v1/images/generations", "openai")]
)
def test_a_killed_client_on_a_key_is_kept_and_counted_once(
    serve: ServeFactory, path: str, kind: str
) -> None:
    """A plain HTTP client process killed mid-request: the image is kept, counted once on
    the key's quota (its usage row says ``kept``), and listed with its prompt."""
    server = serve(*KEYS_ON, env=ENV)
    key_id, secret = create_key(server, "kiosk", images_per_day=5)
    mock = mock_of(server)
    prompt = f"[mock:latency={LATENCY_MS}] a harbour at dusk"
    client = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CLIENT, str(server.port), path, secret, prompt, kind],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout is not None and client.stdout.readline().strip() == "sent"
        assert wait_until(lambda: mock.in_flight == 1)
        os.kill(client.pid, signal.SIGKILL)
    finally:
        client.wait(timeout=10)
    assert wait_until(lambda: mock.in_flight == 0)
    assert (mock.calls, mock.cancellations) == (1, 0)
    with as_key(server, secret) as owner:
        assert wait_until(
            lambda: owner.get("/v1/jobs").json()["items"][0]["status"] == "succeeded", timeout=10
        )
        record = only_record(owner)
        assert record["request"]["prompt"] == prompt
        assert record["origin"] == ORIGINS[path]
        artifact = record["result"]["data"][0]["id"]
        assert owner.get(f"/v1/artifacts/{artifact}").status_code == 200
    with admin(server) as boss:
        key = boss.get(f"/v1/keys/{key_id}").json()
        assert key["remaining"]["day"]["remaining"] == 4  # counted once
        usage = boss.get("/v1/usage", params={"key": key_id}).json()["data"]
    assert [(row["requested"], row["delivered"], row["kept"]) for row in usage] == [(1, 1, 1)]
