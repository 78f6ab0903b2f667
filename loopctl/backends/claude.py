"""Backend "claude": Claude Code in print mode, `claude -p … --output-format json`.

The result is one JSON object on stdout. Claude exits 0 even when a tool call was denied
(`permission_denials`), and reports auth and API failures as `is_error` with `subtype` still
"success", so status comes from `is_error`, never `subtype` (README.md, "Tested against the
real CLIs").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from loopctl.backend_registry import BackendSpec, register
from loopctl.backends import connectors, rules_hook, streams
from loopctl.backends.base import (
    AgentRequest,
    AgentResult,
    AgentStatus,
    float_or_none,
    read_protocol_result,
)
from loopctl.backends.presets import (
    CliPreset,
    Invocation,
    base_status,
    cli_error_line,
    json_lines,
    positional,
    safe_session_id,
    stdout_text,
)
from loopctl.backends.sessions import SessionUsage, claude_usage
from loopctl.definitions.agents import Agent
from loopctl.errors import AgentUnavailable

_STOPS = {
    "error_max_turns": "max_turns",
    "error_max_budget_usd": "budget",
    "error_during_execution": "error",
}


# What Claude Code 2.1 says (in the result's `errors`) when asked to resume a session it has not.
_SESSION_GONE = "No conversation found with session ID"


class ClaudeBackend(CliPreset):
    name = "claude"
    names_sessions = True  # `--session-id UUID`: loopctl names each new session
    reports_session_totals = False  # a resumed turn's result counts only its own calls
    binary = "claude"
    install = "npm install -g @anthropic-ai/claude-code"
    secret_names = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
    passthrough = (
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "CLAUDE_CONFIG_DIR",
        "CLAUDE_CODE_*",
        "CLOUD_ML_REGION",
        "AWS_REGION",
        "AWS_PROFILE",
        "API_TIMEOUT_MS",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "DISABLE_ERROR_REPORTING",
        "IS_SANDBOX",
    )
    # Inside loopctl's sandbox Claude Code may skip permissions as root: the sandbox, not the
    # account, is what confines it (IS_SANDBOX=1 is Claude's own switch for that).
    sandboxed_env: ClassVar[Mapping[str, str]] = {"IS_SANDBOX": "1"}
    base_url_variables: ClassVar[Mapping[str, str]] = {
        "ANTHROPIC_BASE_URL": "https://api.anthropic.com"
    }
    # A claude.ai login refreshes its token here; the token itself goes to the model's route.
    login_hosts = ("console.anthropic.com", "platform.claude.com")
    fixed_env: ClassVar[Mapping[str, str]] = {
        # No telemetry or update checks from an unattended run.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }

    def check_available(self, agent: Agent, env: dict[str, str]) -> None:
        super().check_available(agent, env)
        bypass = agent.permission_mode == "bypassPermissions" or (
            "--dangerously-skip-permissions" in agent.args
        )
        sandbox = self.environment(agent, env).get("IS_SANDBOX") == "1"  # only "1" counts
        if bypass and os.geteuid() == 0 and not sandbox:
            # Claude Code refuses this as root and exits 1 on every attempt; say so up front.
            raise AgentUnavailable(
                f"agent {agent.name!r}: Claude Code refuses bypassPermissions when run as root;"
                f' use permission_mode = "acceptEdits" in {agent.path}, run loopctl as another'
                " user, or set IS_SANDBOX=1 if this machine is a disposable sandbox"
            )

    def environment(self, agent: Agent, env: Mapping[str, str]) -> dict[str, str]:
        merged = super().environment(agent, env)
        # Claude's own Bash tool, hooks and MCP servers should not inherit its credentials. Claude
        # Code 2.1 scrubs them only inside bubblewrap and refuses to start when asked to scrub
        # without it, so the scrub is asked for only where bwrap exists (the user may still set
        # CLAUDE_CODE_SUBPROCESS_ENV_SCRUB themselves).
        if "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB" not in merged and shutil.which(
            "bwrap", path=merged.get("PATH")
        ):
            merged["CLAUDE_CODE_SUBPROCESS_ENV_SCRUB"] = "1"
        # Claude Code retries every failed request about ten times over two minutes, a refused
        # key included; an unattended loop should hear about a 401 in seconds. A transient
        # failure that outlasts three retries costs one loopctl attempt instead.
        merged.setdefault("CLAUDE_CODE_MAX_RETRIES", "3")
        # A declared MCP server that has not answered in 30 s (Claude's default) is dropped and
        # the turn runs without its tools. On a busy machine a sandboxed server can take that
        # long to start; an unattended turn would rather wait than work without it.
        merged.setdefault("MCP_TIMEOUT", str(connectors.MCP_STARTUP_TIMEOUT_S * 1000))
        # Headless Claude may send its first request before its MCP servers have connected,
        # and that turn then runs without their tools (seen on a busy CI machine); "0" makes it
        # wait for them first (Claude Code 2.1 reads this variable) — but only for
        # MCP_CONNECT_TIMEOUT_MS, 5 s by default, after which it proceeds without them (seen
        # with 3 test workers on 2 cores): the same wait as MCP_TIMEOUT.
        merged.setdefault("MCP_CONNECTION_NONBLOCKING", "0")
        merged.setdefault("MCP_CONNECT_TIMEOUT_MS", str(connectors.MCP_STARTUP_TIMEOUT_S * 1000))
        return merged

    def agent_env(self, agent: Agent) -> dict[str, str]:
        # Claude appends /v1/messages itself.
        return {"ANTHROPIC_BASE_URL": agent.base_url.rstrip("/")} if agent.base_url else {}

    def invocation(self, request: AgentRequest) -> Invocation:
        agent = request.agent
        # The prompt goes right after -p: --allowedTools takes a variable number of values and
        # would swallow a prompt placed after it.
        # stream-json (with --verbose) when the turn's steps are measured: it ends with the
        # same result line, after one event per message and tool call.
        output = ["stream-json", "--verbose"] if request.stream else ["json"]
        argv = ["claude", "-p", positional(request.prompt), "--output-format", *output]
        mode = agent.permission_mode or ("acceptEdits" if request.role == "maker" else "default")
        argv += ["--permission-mode", mode]
        if agent.model:
            argv += ["--model", agent.model]
        if agent.max_turns is not None:
            argv += ["--max-turns", str(agent.max_turns)]
        if agent.instructions.strip():
            # Also in the prompt; in the system prompt it survives Claude's own compaction.
            argv += ["--append-system-prompt", agent.instructions.strip()]
        # A declared connector is meant to be used: headless Claude would otherwise deny every
        # call to it (real Claude Code 2.1, permission mode acceptEdits).
        allowed = [*agent.tools, *(f"mcp__{c.name}" for c in agent.connectors)]
        if allowed:
            argv += ["--allowedTools", ",".join(allowed)]
        session = safe_session_id(request.session_id)
        named = safe_session_id(request.new_session_id)
        if session is not None:
            argv += ["--resume", session]
        elif named is not None:
            argv += ["--session-id", named]
        argv += connectors.claude_args(request)  # MCP servers; no secret in argv or config
        # The loop's rules again after Claude compacts its context (a SessionStart hook).
        argv += rules_hook.claude_args(request)
        argv += list(agent.args)
        return Invocation(argv)

    def parse(self, request: AgentRequest, done: Any) -> AgentResult:
        payload: dict[str, Any] | None = None
        stdout = stdout_text(done)
        for line in json_lines(stdout):
            if line.get("type") == "result" or "is_error" in line:
                payload = line  # stream-json ends with the same result line
        if payload is None:
            status = base_status(done, failed=True)
            return AgentResult(
                status=status,
                exit_code=done.exit_code,
                duration_s=done.duration_s,
                text=done.output_tail(4000),
                output_tail=done.output_tail(4000),
                # Stopped mid-turn, it printed nothing: the session it ran is still resumable.
                session_id=_session_asked(request),
                extra={"error": "claude printed no JSON result: " + cli_error_line(done)},
            )
        parsed = read_protocol_result(payload)
        subtype = str(payload.get("subtype") or "")
        status = base_status(done, failed=parsed.is_error)
        extra: dict[str, Any] = {"subtype": subtype} if subtype else {}
        stop = _STOPS.get(subtype) or (
            "max_turns" if payload.get("terminal_reason") == "max_turns" else None
        )
        if stop is not None and status is not AgentStatus.OK:
            extra["stop"] = stop
        if isinstance(payload.get("num_turns"), int):
            extra["turns"] = payload["num_turns"]
        denials = payload.get("permission_denials")
        if isinstance(denials, list) and denials:
            tools = sorted({str(d.get("tool_name")) for d in denials if isinstance(d, dict)})
            extra["permission_denials"] = len(denials)
            extra["denied_tools"] = tools
        if isinstance(payload.get("api_error_status"), int):
            extra["api_error_status"] = payload["api_error_status"]
        models = payload.get("modelUsage")
        if isinstance(models, dict) and models:
            extra["model"] = next(iter(models))
            if parsed.cost_usd is None:
                costs = [float_or_none(m.get("costUSD")) for m in models.values() if m]
                known = [c for c in costs if c is not None]
                if known:
                    parsed = _with_cost(parsed, sum(known))
        errors = [str(e) for e in payload.get("errors") or () if isinstance(e, str)]
        if status is not AgentStatus.OK and (parsed.text or errors):
            extra["error"] = (parsed.text or errors[-1])[:500]
        if any(_SESSION_GONE in e for e in errors):
            extra["session_gone"] = True
        if request.rules_marker:
            # Seen only in a stream (stream-json): the plain JSON result shows no compaction.
            seen = rules_hook.arrival(stdout, request.rules_marker)
            if seen.compactions:
                extra["compactions"] = seen.compactions
                extra["rules_reinjected"] = seen.reinjected
            if seen.missed:
                extra["rules_warning"] = seen.warning()
        return AgentResult(
            status=status,
            exit_code=done.exit_code,
            duration_s=done.duration_s,
            text=(parsed.text or "")[-4000:],
            input_tokens=parsed.input_tokens,
            output_tokens=parsed.output_tokens,
            cached_tokens=parsed.cached_tokens,
            cost_usd=parsed.cost_usd,
            session_id=parsed.session_id or _session_asked(request),
            output_tail=done.output_tail(4000),
            extra=extra,
        )

    # --- resuming a session lost with loopctl (backends.sessions) ---

    def session_in_output(self, text: str) -> str | None:
        # stream-json (an agent's own `--output-format stream-json`) names it on every line.
        for line in json_lines(text):
            found = line.get("session_id")
            if isinstance(found, str):
                return safe_session_id(found)
        return None

    def session_usage(self, session: str, places: Sequence[Path]) -> SessionUsage | None:
        if safe_session_id(session) is None:
            return None
        for place in places:
            # projects/<the cwd, its separators as dashes>/<session>.jsonl
            for path in sorted(place.glob(f"projects/*/{session}.jsonl")):
                return claude_usage(path)
        return None

    def session_gone(self, result: AgentResult) -> bool:
        return result.extra.get("session_gone") is True


def _session_asked(request: AgentRequest) -> str | None:
    """The session the turn resumed or was told to create (`--resume`, `--session-id`)."""
    return safe_session_id(request.session_id) or safe_session_id(request.new_session_id)


def _with_cost(parsed: Any, cost: float) -> Any:
    return replace(parsed, cost_usd=cost)


SPEC = register(
    BackendSpec(
        name="claude",
        factory=ClaudeBackend,
        executable="claude",
        preference=10,
        state=("$CLAUDE_CONFIG_DIR|~/.claude", "~/.claude.json", "~/.claude.json.backup"),
        history=frozenset({"projects", "file-history", "shell-snapshots", "todos", "debug"}),
        renderer=streams.claude_event,
        provider="anthropic",
    )
)
