"""Shared by the backend tests: fake agent CLIs on PATH and a scripted model-API server."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loopctl.backends import AgentRequest
from loopctl.definitions.agents import Agent, Backend
from loopctl.secrets import Redactor, build_env, withheld_values

FAKES = Path(__file__).parent / "fake_clis"
CLIS = ("claude", "codex", "opencode", "aider", "goose")


# --- fake CLIs -------------------------------------------------------------------------------


def install_fake_clis(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put shims named like the real CLIs first on PATH; each runs tests/fake_clis/<name>."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in CLIS:
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKES / name}" "$@"\n')
        shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def fake_home() -> Path:
    return Path(os.environ["HOME"]) / ".fake-cli"


def set_scenario(name: str, **values: Any) -> None:
    fake_home().mkdir(parents=True, exist_ok=True)
    (fake_home() / f"{name}.json").write_text(json.dumps(values))


def fake_calls(name: str) -> list[dict[str, Any]]:
    path = fake_home() / f"{name}.calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def make_agent(backend: Backend, tmp: Path, **fields: Any) -> Agent:
    return Agent(
        name=f"{backend.value}-agent", path=tmp / "agents" / "a.toml", backend=backend, **fields
    )


def make_request(
    agent: Agent,
    worktree: Path,
    *,
    role: str = "maker",
    prompt: str = "# Task calc (attempt 1)\nFix add() in calc.py.\n",
    session_id: str | None = None,
    attempt: int = 1,
    runs: Path | None = None,
    **fields: Any,
) -> AgentRequest:
    """The request the engine would build: scrubbed env, prompt file, log paths."""
    folder = (runs or worktree.parent / "runs") / "task" / f"attempt-{attempt}"
    folder.mkdir(parents=True, exist_ok=True)
    prompt_file = folder / f"{role}-prompt.md"
    prompt_file.write_text(prompt)
    env = build_env(
        allow=agent.env_allow,
        extra={"LOOPCTL_TASK": "task", "LOOPCTL_ROLE": role, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    return AgentRequest(
        agent=agent,
        role=role,
        prompt=prompt,
        worktree=worktree,
        prompt_file=prompt_file,
        env=env,
        stdout_path=folder / f"{role}.out",
        stderr_path=folder / f"{role}.err",
        redactor=Redactor(withheld_values(allow=())),
        loop="goal",
        task="task",
        attempt=attempt,
        session_id=session_id,
        **fields,
    )


# --- a scripted model API ----------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict → JSON; str → sent as is
    headers: dict[str, str] = field(default_factory=dict)


Script = Callable[[dict[str, Any], "FakeModelServer"], Reply]


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


class FakeModelServer:
    """A real HTTP server on 127.0.0.1 speaking OpenAI chat completions and Anthropic messages.

    `script(body, server)` decides each reply; `queue` holds replies served first (429s, 500s).
    """

    def __init__(self, script: Script | None = None) -> None:
        self.script = script
        self.queue: list[Reply] = []
        self.seen: list[Seen] = []
        self.models = ["gpt-test", "claude-test"]
        self.key: str | None = None  # when set, requests must carry it
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _send(self, reply: Reply) -> None:
                data = (
                    reply.body.encode()
                    if isinstance(reply.body, str)
                    else json.dumps(reply.body).encode()
                )
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _auth_ok(self) -> bool:
                expected = server.key
                if expected is None:
                    return True
                given = self.headers.get("x-api-key") or (
                    self.headers.get("authorization", "").removeprefix("Bearer ")
                )
                return given == expected

            def do_GET(self) -> None:
                with server.lock:
                    server.seen.append(Seen(self.path, dict(self.headers), None, b""))
                if not self._auth_ok():
                    self._send(Reply(401, {"error": {"message": "invalid api key"}}))
                elif self.path.endswith("/models"):
                    self._send(Reply(200, {"data": [{"id": m} for m in server.models]}))
                else:
                    self._send(Reply(404, {"error": {"message": "no such path"}}))

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                body = json.loads(raw)
                with server.lock:
                    server.seen.append(Seen(self.path, dict(self.headers), body, raw))
                    queued = server.queue.pop(0) if server.queue else None
                if queued is not None:
                    self._send(queued)
                elif not self._auth_ok():
                    self._send(Reply(401, {"error": {"message": "invalid api key"}}))
                else:
                    assert server.script is not None
                    self._send(server.script(body, server))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def posts(self) -> list[Seen]:
        return [s for s in self.seen if s.body is not None]

    def __enter__(self) -> FakeModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --- replies in each wire format ----------------------------------------------------------------


def tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results already in a request (either wire format), oldest first."""
    found: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            found.append(str(message.get("content")))
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            found += [str(b.get("content")) for b in content if b.get("type") == "tool_result"]
    return found


def openai_reply(
    text: str = "", calls: list[tuple[str, dict[str, Any]]] = (), usage: tuple[int, int] = (100, 20)
) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ]
    return Reply(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
                "prompt_tokens_details": {"cached_tokens": usage[0] // 2},
            },
        },
    )


def anthropic_reply(
    text: str = "", calls: list[tuple[str, dict[str, Any]]] = (), usage: tuple[int, int] = (100, 20)
) -> Reply:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(calls)
    ]
    return Reply(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "usage": {
                "input_tokens": usage[0],
                "output_tokens": usage[1],
                "cache_read_input_tokens": 10,
                "cache_creation_input_tokens": 5,
            },
        },
    )


def reply_for(body: dict[str, Any]) -> Callable[..., Reply]:
    """The reply builder of whichever wire format `body` uses."""
    return anthropic_reply if "max_tokens" in body and "system" in body else openai_reply
