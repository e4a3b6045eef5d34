#!/usr/bin/env python3
"""A scriptable stand-in for ``codex app-server`` (JSON-RPC "lite" over stdio JSONL).

Standard library only. Run as ``fake_codex app-server`` (the launcher next to this file
picks the project's virtualenv Python). Its behaviour comes from a JSON scenario file
named by ``FAKE_CODEX_SCENARIO``; state that must survive a restart (threads, which
scripted turn comes next, how many runs there were) and a log of every message it
received live in ``FAKE_CODEX_STATE`` (default: the scenario's folder).

Scenario keys (all optional)::

    account            object or null (default: a ChatGPT "plus" account)
    image_generation   bool (default true)
    stderr_flood_bytes bytes written to stderr at start, before reading stdin
    stderr_text        text written to stderr at start (after any flood)
    ignore_stdin_close keep running after stdin closes
    ignore_sigterm     ignore SIGTERM (only SIGKILL stops it then)
    exit_on_start      exit at once with this code
    delays             {method: seconds} before answering
    no_answer          [method, ...] never answered
    on_method          {method: "oversize" | "malformed" | "non_object" | "crash"}
    oversize_bytes     size of the oversize line (default 2 MiB)
    turns              [turn, ...] used in order, across restarts
    by_home            {CODEX_HOME folder name: {key: value}}: overrides for the child
                       started with that home (one account of a pool); its ``turns``
                       are counted per home
    default_turn       turn used when ``turns`` is exhausted (default {"mode": "result"})

A turn is ``{"mode": ..., ...}`` (optional ``delay_seconds``: time the image takes, cut
short by an interrupt; ``linger_seconds``: time the turn runs on after its image, also cut
short by an interrupt; every turn logs ``turn_start`` and ``turn_end``) with modes
``result``, ``saved_path``, ``file_id``,
``saved_path_outside``, ``saved_path_symlink``, ``partial``, ``approval``,
``unknown_server_request``, ``crash`` (``exit_code``), ``oversize``, ``malformed``,
``hang`` (completes only when interrupted), ``policy``, ``rate_limit``, ``usage_limit``,
``no_image``, ``image_failed``, ``late_turn_noise`` (a notification of another turn first).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import signal
import struct
import sys
import threading
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

# -- a real PNG, made here so the fake needs nothing but the standard library -------------


def make_png(
    width: int = 4,
    height: int = 4,
    rgba: tuple[int, int, int, int] = (30, 90, 200, 255),
    *,
    noise: bool = False,
) -> bytes:
    """A valid RGBA PNG; with ``noise`` the pixels are random, so it does not compress."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return (
            struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
        )

    if noise:
        raw = b"".join(b"\x00" + os.urandom(width * 4) for _ in range(height))
    else:
        raw = (b"\x00" + bytes(rgba) * width) * height
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 1))
        + chunk(b"IEND", b"")
    )


FINAL_PNG = make_png(4, 4, (30, 90, 200, 255))
PARTIAL_PNG = make_png(2, 2, (200, 200, 200, 255))

DECLINES = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "item/permissions/requestApproval": {"permissions": {}, "scope": "turn"},
    "mcpServer/elicitation/request": {"action": "decline", "content": None},
    "execCommandApproval": None,  # any {"decision": {"denied": {...}}} or "abort"
    "applyPatchApproval": None,
}


class FakeCodex:
    def __init__(self) -> None:
        scenario_path = os.environ.get("FAKE_CODEX_SCENARIO")
        self.scenario: dict[str, Any] = {}
        if scenario_path:
            self.scenario = json.loads(Path(scenario_path).read_text(encoding="utf-8"))
        default_state = Path(scenario_path).parent if scenario_path else Path.cwd()
        self.state = Path(os.environ.get("FAKE_CODEX_STATE", str(default_state)))
        self.state.mkdir(parents=True, exist_ok=True)
        self.codex_home = Path(os.environ.get("CODEX_HOME", str(self.state / "codex-home")))
        # Threads live in their codex home, as real codex keeps them (one home per account).
        self.threads_dir = self.state if "CODEX_HOME" not in os.environ else self.codex_home
        self.home_name = self.codex_home.name
        override = self.scenario.get("by_home", {}).get(self.home_name)
        if isinstance(override, dict):
            self.scenario = {**self.scenario, **override}
        self.turn_counter = "turn_index" if not override else f"turn_index-{self.home_name}"
        self.lock = threading.Lock()
        self.threads: dict[str, dict[str, Any]] = self._load_threads()
        self.waiting: dict[Any, tuple[threading.Event, list[Any]]] = {}
        self.interrupts: dict[str, threading.Event] = {}
        self.server_ids = iter(range(1_000_000))
        self.run = self._bump("runs")

    # -- persistence ---------------------------------------------------------------------

    def _load_threads(self) -> dict[str, dict[str, Any]]:
        path = self.threads_dir / "threads.json"
        if path.exists():
            return dict(json.loads(path.read_text(encoding="utf-8")))
        return {}

    def _save_threads(self) -> None:
        durable = {k: v for k, v in self.threads.items() if not v.get("ephemeral")}
        self.threads_dir.mkdir(parents=True, exist_ok=True)
        path = self.threads_dir / "threads.json"
        path.write_text(json.dumps(durable), encoding="utf-8")

    def _bump(self, name: str) -> int:
        """Count in a file of the shared state folder. Several fakes (one per pool account)
        start and take turns at once, so the read and the write happen under one lock."""
        path = self.state / name
        with (self.state / "counters.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            value = int(path.read_text()) + 1 if path.exists() else 1
            path.write_text(str(value))
        return value

    def log(self, entry: dict[str, Any]) -> None:
        entry = {"run": self.run, "pid": os.getpid(), "home": self.home_name, **entry}
        with self.lock, (self.state / "log.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    # -- output ----------------------------------------------------------------------------

    def write_raw(self, data: bytes) -> None:
        with self.lock:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write_raw(json.dumps(message).encode() + b"\n")

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params, "emittedAtMs": int(time.time() * 1000)})

    def answer(self, rpc_id: Any, result: Any) -> None:
        self.send({"id": rpc_id, "result": result})

    def fail(self, rpc_id: Any, code: int, message: str) -> None:
        self.send({"id": rpc_id, "error": {"code": code, "message": message}})

    def misbehave(self, how: str) -> None:
        if how == "oversize":
            size = int(self.scenario.get("oversize_bytes", 2 * 1024 * 1024))
            blob = "A" * size
            self.write_raw(
                json.dumps(
                    {"method": "item/agentMessage/delta", "params": {"delta": blob}}
                ).encode()
                + b"\n"
            )
        elif how == "malformed":
            self.write_raw(b'{"method": "turn/completed", "params": {oops\n')
        elif how == "non_object":
            self.write_raw(b"[1, 2, 3]\n")
        elif how == "crash":
            self.log({"event": "crash"})
            os._exit(int(self.scenario.get("crash_exit_code", 17)))

    # -- server -> client requests -----------------------------------------------------------

    def server_request(self, method: str, params: dict[str, Any], timeout: float = 10.0) -> Any:
        rpc_id = next(self.server_ids)
        event, box = threading.Event(), list[Any]()
        self.waiting[rpc_id] = (event, box)
        self.send({"id": rpc_id, "method": method, "params": params})
        if not event.wait(timeout):
            return {"missing": True}
        return box[0]

    # -- main loop -------------------------------------------------------------------------

    def serve(self) -> None:
        self.log({"event": "started"})
        if "exit_on_start" in self.scenario:
            sys.exit(int(self.scenario["exit_on_start"]))
        if self.scenario.get("ignore_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        flood = int(self.scenario.get("stderr_flood_bytes", 0))
        if flood:
            line = b"x" * 1023 + b"\n"
            for _ in range(flood // 1024):
                sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
            self.log({"event": "stderr_flood_done", "bytes": flood})
        if self.scenario.get("stderr_text"):
            sys.stderr.write(str(self.scenario["stderr_text"]))
            sys.stderr.flush()
        for raw in sys.stdin.buffer:
            if not raw.strip():
                continue
            message = json.loads(raw)
            self.log({"received": _summary(message)})
            if "method" in message:
                self.dispatch(message)
            elif message.get("id") in self.waiting:
                event, box = self.waiting.pop(message["id"])
                box.append(message)
                event.set()
        self.log({"event": "stdin_closed"})
        if self.scenario.get("ignore_stdin_close"):
            while True:
                time.sleep(3600)

    def dispatch(self, message: dict[str, Any]) -> None:
        method = message["method"]
        rpc_id = message.get("id")
        params = message.get("params") or {}
        if rpc_id is None:
            return  # notifications from the client ("initialized")
        if method in self.scenario.get("no_answer", []):
            return
        how = self.scenario.get("on_method", {}).get(method)
        if how:
            self.misbehave(how)
            return
        delay = float(self.scenario.get("delays", {}).get(method, 0))
        if delay:
            timer = threading.Timer(delay, self.handle, (method, rpc_id, params))
            timer.daemon = True
            timer.start()
        else:
            self.handle(method, rpc_id, params)

    def handle(self, method: str, rpc_id: Any, params: dict[str, Any]) -> None:
        handler = getattr(self, "on_" + method.replace("/", "_"), None)
        if handler is None:
            self.fail(rpc_id, -32601, f"unknown method {method}")
            return
        handler(rpc_id, params)

    # -- methods ---------------------------------------------------------------------------

    def on_initialize(self, rpc_id: Any, params: dict[str, Any]) -> None:
        name = params.get("clientInfo", {}).get("name", "unknown")
        self.answer(
            rpc_id,
            {
                "userAgent": f"{name}/0.169.0-fake",
                "codexHome": str(self.codex_home),
                "platformFamily": "unix",
                "platformOs": "linux",
            },
        )
        self.notify("configWarning", {"summary": "fake codex: no sandbox here", "details": None})

    def on_account_read(self, rpc_id: Any, params: dict[str, Any]) -> None:
        account = self.scenario.get(
            "account", {"type": "chatgpt", "email": "fake@example.invalid", "planType": "plus"}
        )
        self.answer(rpc_id, {"account": account, "requiresOpenaiAuth": True})

    def on_modelProvider_capabilities_read(self, rpc_id: Any, params: dict[str, Any]) -> None:
        self.answer(
            rpc_id,
            {
                "imageGeneration": bool(self.scenario.get("image_generation", True)),
                "webSearch": True,
            },
        )

    def on_thread_start(self, rpc_id: Any, params: dict[str, Any]) -> None:
        thread_id = f"thread-{uuid.uuid4().hex[:12]}"
        self.threads[thread_id] = {
            "ephemeral": bool(params.get("ephemeral")),
            "archived": False,
            "turns": 0,
        }
        self._save_threads()
        self.answer(
            rpc_id,
            {
                "thread": {"id": thread_id, "ephemeral": bool(params.get("ephemeral"))},
                "model": params.get("model") or "gpt-5.5",
                "cwd": params.get("cwd"),
            },
        )

    def on_thread_resume(self, rpc_id: Any, params: dict[str, Any]) -> None:
        thread_id = params.get("threadId")
        thread = self.threads.get(thread_id or "")
        if thread is None or thread.get("archived"):
            self.fail(rpc_id, -32600, f"thread not found: {thread_id}")
            return
        self.answer(rpc_id, {"thread": {"id": thread_id, "turns": []}})

    def on_thread_archive(self, rpc_id: Any, params: dict[str, Any]) -> None:
        thread = self.threads.get(params.get("threadId") or "")
        if thread is None:
            self.fail(rpc_id, -32600, "thread not found")
            return
        thread["archived"] = True
        self._save_threads()
        self.answer(rpc_id, {})
        self.notify("thread/archived", {"threadId": params.get("threadId")})

    def on_turn_interrupt(self, rpc_id: Any, params: dict[str, Any]) -> None:
        event = self.interrupts.get(params.get("turnId") or "")
        self.answer(rpc_id, {})
        if event is not None:
            event.set()

    def on_turn_start(self, rpc_id: Any, params: dict[str, Any]) -> None:
        thread_id = params.get("threadId") or ""
        thread = self.threads.get(thread_id)
        if thread is None or thread.get("archived"):
            self.fail(rpc_id, -32600, f"thread not found: {thread_id}")
            return
        thread["turns"] += 1
        self._save_threads()
        turns = self.scenario.get("turns", [])
        index = self._bump(self.turn_counter) - 1
        spec = (
            turns[index]
            if index < len(turns)
            else self.scenario.get("default_turn", {"mode": "result"})
        )
        turn_id = f"turn-{uuid.uuid4().hex[:12]}"
        self.log(
            {"event": "turn_start", "thread": thread_id, "turn": turn_id, "mode": spec.get("mode")}
        )
        self.interrupts[turn_id] = threading.Event()
        self.answer(
            rpc_id, {"turn": {"id": turn_id, "items": [], "status": "inProgress", "error": None}}
        )
        threading.Thread(target=self.run_turn, args=(thread_id, turn_id, spec), daemon=True).start()

    # -- turns -----------------------------------------------------------------------------

    def run_turn(self, thread_id: str, turn_id: str, spec: dict[str, Any]) -> None:
        mode = spec.get("mode", "result")
        ids = {"threadId": thread_id, "turnId": turn_id}
        turn: dict[str, Any] = {"id": turn_id, "items": [], "status": "inProgress", "error": None}
        self.notify("turn/started", {"threadId": thread_id, "turn": turn})
        self.notify(
            "item/completed",
            {
                **ids,
                "item": {"type": "userMessage", "id": f"user-{turn_id}", "content": []},
                "completedAtMs": 0,
            },
        )
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        started = {
            "type": "imageGeneration",
            "id": call_id,
            "status": "in_progress",
            "result": "",
            "revisedPrompt": None,
        }
        revised = spec.get("revised_prompt", "a tiny blue square (fake)")
        image_dir = self.codex_home / "generated_images" / thread_id
        final = {
            "type": "imageGeneration",
            "id": call_id,
            "status": "completed",
            "revisedPrompt": revised,
            "failure": None,
            "generationId": None,
            "transparentBackground": None,
        }

        if mode == "late_turn_noise":
            other = {"threadId": thread_id, "turnId": "turn-some-other"}
            self.notify(
                "item/completed",
                {
                    **other,
                    "item": {
                        **final,
                        "id": "call_other",
                        "result": base64.b64encode(PARTIAL_PNG).decode(),
                    },
                },
            )
            mode = "result"
        if mode in ("crash", "oversize", "malformed"):
            self.notify("item/started", {**ids, "item": started})
            if mode == "crash":
                self.log({"event": "crash"})
                sys.stdout.flush()
                os._exit(int(spec.get("exit_code", 17)))
            self.misbehave(mode)
            self.finish(thread_id, turn, "completed")
            return
        if mode == "hang":
            self.notify("item/started", {**ids, "item": started})
            self.interrupts[turn_id].wait()
            self.log({"event": "interrupted", "turn": turn_id})
            self.finish(thread_id, turn, "interrupted")
            return
        error: dict[str, Any]
        if mode == "policy":
            error = {
                "message": "Your request was rejected as a result of our safety system.",
                "codexErrorInfo": "other",
                "additionalDetails": None,
            }
            self.notify("error", {**ids, "error": error, "willRetry": False})
            self.finish(thread_id, turn, "failed", error=error)
            return
        if mode == "rate_limit":
            error = {
                "message": "exceeded retry limit, last status: 429 Too Many Requests",
                "codexErrorInfo": {"responseTooManyFailedAttempts": {"httpStatusCode": 429}},
                "additionalDetails": None,
            }
            self.notify("error", {**ids, "error": error, "willRetry": False})
            self.finish(thread_id, turn, "failed", error=error)
            return
        if mode == "no_image":
            self.agent_message(ids, turn)
            self.finish(thread_id, turn, "completed")
            return
        if mode in ("image_failed", "usage_limit"):
            self.notify("item/started", {**ids, "item": started})
            failure = None
            if mode == "usage_limit":
                failure = {
                    "type": "usageLimitExceeded",
                    "limitId": "images",
                    "resetsAt": int(time.time()) + 120,
                }
            self.notify(
                "item/completed",
                {
                    **ids,
                    "item": {
                        **final,
                        "status": "failed",
                        "result": "",
                        "failure": failure,
                        "revisedPrompt": None,
                    },
                },
            )
            self.agent_message(ids, turn)
            self.finish(thread_id, turn, "completed")
            return
        if mode in ("approval", "unknown_server_request"):
            method = spec.get("approval_method", "item/commandExecution/requestApproval")
            if mode == "unknown_server_request":
                method = spec.get("server_method", "item/tool/call")
            answer = self.server_request(
                method,
                {
                    **ids,
                    "itemId": f"cmd-{turn_id}",
                    "startedAtMs": 0,
                    "command": "rm -rf /",
                    "reason": "fake asks",
                },
            )
            verdict = _judge(method, answer)
            self.log(
                {
                    "event": "server_request_answered",
                    "method": method,
                    "answer": answer,
                    "verdict": verdict,
                }
            )
            if verdict != "ok":
                error = {
                    "message": f"fake codex: server request {method} was not declined ({verdict})",
                    "codexErrorInfo": "other",
                }
                self.finish(thread_id, turn, "failed", error=error)
                return
            mode = "result"

        self.notify("item/started", {**ids, "item": started})
        delay = float(spec.get("delay_seconds", 0))
        # a slow generation (delay_seconds); an interrupt ends it early
        if delay and self.interrupts[turn_id].wait(delay):
            self.log({"event": "interrupted", "turn": turn_id})
            self.finish(thread_id, turn, "interrupted")
            return
        if mode == "partial":
            for _ in range(2):
                partial = {**started, "result": base64.b64encode(PARTIAL_PNG).decode()}
                self.notify("item/started", {**ids, "item": partial})
                self.notify("item/completed", {**ids, "item": partial})
            mode = "result"
        item = dict(final)
        image_dir.mkdir(parents=True, exist_ok=True)
        saved = image_dir / f"{call_id}.png"
        if mode == "result":
            png = FINAL_PNG
            if "size" in spec:  # a large, incompressible image, e.g. {"size": [1448, 1448]}
                png = make_png(*spec["size"], noise=True)
                (self.state / "last_image.png").write_bytes(png)
            saved.write_bytes(png)
            item.update(result=base64.b64encode(png).decode(), savedPath=str(saved))
        elif mode == "saved_path":
            saved.write_bytes(FINAL_PNG)
            item.update(result="", savedPath=str(saved))
        elif mode == "file_id":
            saved.write_bytes(FINAL_PNG)
            item.update(fileId=f"file_{call_id}")
        elif mode in ("saved_path_outside", "saved_path_symlink"):
            outside = Path(spec.get("outside_path") or self.codex_home / "secret.png")
            outside.parent.mkdir(parents=True, exist_ok=True)
            outside.write_bytes(FINAL_PNG)
            if mode == "saved_path_symlink":
                saved.symlink_to(outside)
                item.update(result="", savedPath=str(saved))
            else:
                item.update(result="", savedPath=str(outside))
        else:
            self.log({"event": "unknown_mode", "mode": mode})
            self.finish(thread_id, turn, "failed", error={"message": "unknown fake mode"})
            return
        self.notify(
            "item/completed", {**ids, "item": item, "completedAtMs": int(time.time() * 1000)}
        )
        linger = float(spec.get("linger_seconds", 0))
        # a turn that runs on after its image (codex still writing); an interrupt ends it
        if linger and self.interrupts[turn_id].wait(linger):
            self.log({"event": "interrupted", "turn": turn_id})
            self.finish(thread_id, turn, "interrupted")
            return
        self.agent_message(ids, turn)
        self.finish(thread_id, turn, "completed")

    def agent_message(self, ids: dict[str, str], turn: dict[str, Any]) -> None:
        message = {
            "type": "agentMessage",
            "id": f"msg_{uuid.uuid4().hex[:6]}",
            "text": "Image generated.",
        }
        self.notify("item/completed", {**ids, "item": message})
        turn["items"].append(message)

    def finish(
        self, thread_id: str, turn: dict[str, Any], status: str, *, error: Any = None
    ) -> None:
        self.log({"event": "turn_end", "thread": thread_id, "turn": turn["id"], "status": status})
        self.notify(
            "turn/completed",
            {
                "threadId": thread_id,
                "turn": {**turn, "status": status, "error": error, "itemsView": "summary"},
            },
        )


def _judge(method: str, answer: Any) -> str:
    if not isinstance(answer, dict) or answer.get("missing"):
        return "no answer"
    if method in DECLINES:
        result = answer.get("result")
        expected = DECLINES[method]
        if expected is not None:
            return "ok" if result == expected else "not a decline"
        decision = result.get("decision") if isinstance(result, dict) else None
        if decision == "abort" or (isinstance(decision, dict) and "denied" in decision):
            return "ok"
        return "not a decline"
    error = answer.get("error")
    return "ok" if isinstance(error, dict) and error.get("code") == -32601 else "not a -32601 error"


def _summary(message: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {k: message[k] for k in ("id", "method") if k in message}
    params = message.get("params")
    if isinstance(params, dict):
        summary["params"] = {k: v for k, v in params.items() if k not in ("input",)}
        if "input" in params:
            summary["params"]["input_types"] = [i.get("type") for i in params["input"]]
    if "result" in message:
        summary["result"] = message["result"]
    if "error" in message:
        summary["error"] = message["error"]
    return summary


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--version":
        print("codex-cli 0.169.0-fake")
        return 0
    if len(sys.argv) < 2 or sys.argv[1] != "app-server":
        print("usage: fake_codex app-server", file=sys.stderr)
        return 2
    FakeCodex().serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
