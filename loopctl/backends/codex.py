"""Backend "codex": `codex exec --json`, the prompt on stdin (`-`), JSONL events on stdout.

Codex reports tokens only (`turn.completed.usage`), never USD: cost comes from the price table.
`--full-auto` no longer exists; the sandbox is chosen with `--sandbox`. An `item.completed`
whose item type is "error" is a warning (unknown model metadata), not a failure: the run is
judged by `turn.completed` versus `turn.failed` (README.md, "Tested against the real CLIs").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from loopctl.backend_registry import BackendSpec, register
from loopctl.backends import connectors, streams
from loopctl.backends.base import AgentRequest, AgentResult, int_or_none
from loopctl.backends.presets import (
    CliPreset,
    Invocation,
    ModelUrl,
    base_status,
    json_lines,
    safe_session_id,
    stdout_text,
    with_instructions,
)
from loopctl.backends.sessions import SessionUsage, codex_usage
from loopctl.definitions.agents import Agent

# What Codex 0.171 prints (stderr, exit 1) when asked to resume a thread it has no rollout of.
_SESSION_GONE = "no rollout found for thread id"


class CodexBackend(CliPreset):
    name = "codex"
    binary = "codex"
    install = "npm install -g @openai/codex"
    secret_names = ("CODEX_API_KEY", "OPENAI_API_KEY")
    passthrough = ("CODEX_HOME", "OPENAI_BASE_URL", "OPENAI_ORGANIZATION", "OPENAI_PROJECT")
    base_url_variables: ClassVar[Mapping[str, str]] = {
        "OPENAI_BASE_URL": "https://api.openai.com/v1"
    }
    # A ChatGPT login talks to ChatGPT's own backend and refreshes its token at auth.openai.com.
    login_hosts = ("chatgpt.com", "auth.openai.com")
    names_sessions = False  # the thread id is Codex's: read from `thread.started`
    # After `exec resume`, turn.completed counts the whole thread (seen with Codex 0.171).
    reports_session_totals = True

    def model_urls(self, agent: Agent, env: Mapping[str, str]) -> list[ModelUrl]:
        if agent.base_url:
            # loopctl's own provider (argv): OPENAI_BASE_URL is not read then.
            return [ModelUrl(None, agent.base_url, custom=True)]
        return super().model_urls(agent, env)

    def invocation(self, request: AgentRequest) -> Invocation:
        agent = request.agent
        sandbox = agent.sandbox_mode or (
            "workspace-write" if request.role == "maker" else "read-only"
        )
        argv = ["codex", "exec", "--json", "--sandbox", sandbox, "-C", str(request.worktree)]
        if agent.model:
            argv += ["-m", agent.model]
        if agent.base_url:
            # A custom provider speaks plain HTTP; the built-in one tries a websocket first.
            provider = {
                "name": "loopctl",
                "base_url": agent.base_url,
                "env_key": agent.api_key_env or "OPENAI_API_KEY",
                "wire_api": "responses",
            }
            inline = ",".join(f"{key}={json.dumps(value)}" for key, value in provider.items())
            argv += ["-c", "model_provider=loopctl", "-c", f"model_providers.loopctl={{{inline}}}"]
        argv += connectors.codex_args(request)  # MCP servers; no secret in argv or env
        argv += list(agent.args)
        session = safe_session_id(request.session_id)
        if session is not None:
            argv += ["resume", session]
        # "-": read the prompt from stdin, which loopctl closes after writing it (codex blocks
        # until stdin reaches EOF).
        argv.append("-")
        return Invocation(argv, stdin=with_instructions(agent, request.prompt))

    def parse(self, request: AgentRequest, done: Any) -> AgentResult:
        session: str | None = None
        text = ""
        errors: list[str] = []
        failed = False
        completed = 0
        tokens = {"input": 0, "cached": 0, "output": 0}
        seen_usage = False
        for event in json_lines(stdout_text(done)):
            kind = event.get("type")
            if kind == "thread.started" and isinstance(event.get("thread_id"), str):
                session = event["thread_id"]
            elif kind == "item.completed":
                item = event.get("item")
                if isinstance(item, dict) and item.get("type") == "agent_message":
                    text = str(item.get("text") or "")
            elif kind == "turn.completed":
                completed += 1
                usage = event.get("usage")
                if isinstance(usage, dict):
                    seen_usage = True
                    tokens["input"] += int_or_none(usage.get("input_tokens")) or 0
                    tokens["cached"] += int_or_none(usage.get("cached_input_tokens")) or 0
                    tokens["output"] += int_or_none(usage.get("output_tokens")) or 0
            elif kind == "turn.failed":
                failed = True
                error = event.get("error")
                if isinstance(error, dict) and error.get("message"):
                    errors.append(str(error["message"]))
            elif kind == "error" and event.get("message"):
                errors.append(str(event["message"]))
        status = base_status(done, failed=failed or completed == 0)
        extra: dict[str, Any] = {"turns": completed}
        if status.value != "ok":
            extra["error"] = (errors[-1] if errors else done.stderr_tail.strip()[-500:])[:500]
        return AgentResult(
            status=status,
            exit_code=done.exit_code,
            duration_s=done.duration_s,
            text=(text or (errors[-1] if errors else ""))[-4000:],
            input_tokens=tokens["input"] if seen_usage else None,
            output_tokens=tokens["output"] if seen_usage else None,
            cached_tokens=tokens["cached"] if seen_usage else None,
            cost_usd=None,
            session_id=session,
            output_tail=done.output_tail(4000),
            extra=extra,
        )

    # --- resuming a session lost with loopctl (backends.sessions) ---

    def session_in_output(self, text: str) -> str | None:
        for event in json_lines(text):
            if event.get("type") == "thread.started" and isinstance(event.get("thread_id"), str):
                return safe_session_id(event["thread_id"])
        return None

    def session_usage(self, session: str, places: Sequence[Path]) -> SessionUsage | None:
        if safe_session_id(session) is None:
            return None
        for place in places:
            for path in sorted(place.glob(f"sessions/**/rollout-*-{session}.jsonl")):
                return codex_usage(path)
        return None

    def session_gone(self, result: AgentResult) -> bool:
        said = f"{result.extra.get('error') or ''}\n{result.output_tail}"
        return result.status.value == "error" and _SESSION_GONE in said


SPEC = register(
    BackendSpec(
        name="codex",
        factory=CodexBackend,
        executable="codex",
        preference=20,
        state=("$CODEX_HOME|~/.codex",),
        history=frozenset({"sessions", "archived_sessions", "log", "history.jsonl"}),
        nests_sandbox=True,  # it confines its own tools with a nested bwrap
        renderer=streams.codex_event,
        provider="openai",
    )
)
