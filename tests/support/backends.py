"""Backend tests: fake agent CLIs on PATH, agent requests, and model-API replies to script."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from loopctl.backends import AgentRequest
from loopctl.definitions.agents import Agent, Backend
from loopctl.secrets import Redactor, build_env, withheld_values
from support.model_server import Reply, Request

FAKES = Path(__file__).resolve().parents[1] / "fake_clis"
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

# --- replies in each wire format ----------------------------------------------------------------


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


def reply_for(request: Request) -> Callable[..., Reply]:
    """The plain-JSON reply builder of the wire format `request` uses."""
    return anthropic_reply if request.wire == "anthropic" else openai_reply


def own_agent_fixes_calc(request: Request, check: Sequence[str]) -> Reply:
    """loopctl's own agent on the calc project: read calc.py, edit it, run `check`, say so."""
    reply = reply_for(request)
    step = len(request.tool_results)
    if step == 0:
        return reply(calls=[("read_file", {"path": "calc.py"})])
    if step == 1:
        edit = {"path": "calc.py", "old": "return a - b", "new": "return a + b"}
        return reply(calls=[("edit_file", edit)])
    if step == 2:
        return reply(calls=[("run", {"argv": list(check)})])
    return reply(text="Fixed add().")
