"""loopctl's own small tool-using agent: one session against a model API, inside a worktree.

The loop: send the conversation, run the tool calls the model asks for, send their results,
until the model answers without a tool call (done), the turn limit or the time runs out, a
command needs a human's approval, or the API fails for good. Compaction keeps every request
near or under the context window however long the session runs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from loopctl.definitions.connectors import Connector, secret_values
from loopctl.definitions.skills import Skill
from loopctl.egress_cassette import EgressTap
from loopctl.errors import LoopctlError
from loopctl.sandbox import Sandbox
from loopctl.secrets import Redactor
from loopctl.toolagent import taped
from loopctl.toolagent.client import ApiError, Caller, RetryPolicy, uses_environment
from loopctl.toolagent.context import Conversation, estimate_tokens
from loopctl.toolagent.mcp import ConnectorTools
from loopctl.toolagent.tools import (
    ToolContext,
    ToolOutcome,
    ToolSpec,
    call_tool,
    describe_call,
    tool_specs,
)
from loopctl.toolagent.wire import AssistantTurn, MalformedReply, ToolCall, ToolResult, Wire

SYSTEM_PREAMBLE = """\
You are a coding agent working inside a git worktree: {worktree}
Use the tools to read, change and test the code there; paths are relative to that folder.
Run the project's checks with the `run` tool before you stop. When you are done, or cannot go
on, answer with a short summary and no tool call. Do not commit: loopctl does that."""
DEFAULT_WINDOW = 100_000
DEFAULT_MAX_TURNS = 60
DEFAULT_MAX_OUTPUT = 8192


@dataclass(frozen=True, slots=True)
class SessionConfig:
    wire: Wire
    base_url: str
    model: str
    api_key: str | None
    instructions: str
    prompt: str
    worktree: Path
    tool_env: dict[str, str]
    redactor: Redactor
    max_turns: int = DEFAULT_MAX_TURNS
    timeout_s: float = 1200.0
    context_window: int = DEFAULT_WINDOW
    max_output_tokens: int = DEFAULT_MAX_OUTPUT
    ask: tuple[str, ...] = ()
    approved: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    read_only: bool = False
    skills: Mapping[str, Skill] = field(default_factory=dict)
    request_approval: Callable[[str, dict[str, Any]], str] | None = None
    cancel: threading.Event | None = None
    transcript: Path | None = None
    notes: Path | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    connectors: tuple[Connector, ...] = ()  # MCP servers whose tools the agent may call
    sandbox: Sandbox | None = None  # where the agent's `run` commands execute confined
    # The turn's model cassette: its calls recorded there, or (offline) answered from it.
    cassette: EgressTap | None = None


@dataclass(frozen=True, slots=True)
class SessionResult:
    status: str  # ok | error | timeout | interrupted | approval
    text: str
    turns: int
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    model: str | None = None
    stop: str | None = None  # max_turns | approval | api | timeout | interrupted
    error: str | None = None
    error_status: int | None = None  # the HTTP status the API's last answer failed with
    retry_after_s: float | None = None  # the wait that answer asked for (Retry-After)
    approval_item: str | None = None
    compactions: int = 0
    retries: int = 0
    requests: int = 0
    request_tokens: tuple[int, ...] = ()  # estimated input tokens of each request sent
    approvals_used: tuple[str, ...] = ()  # inbox items whose approved command ran
    # Each tool call that ran: name, id, start_s (since the session began), duration_s, error.
    tool_calls: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class _Usage:
    input: int = 0
    output: int = 0
    cached: int = 0
    seen: bool = False

    def add(self, inp: int | None, out: int | None, cached: int | None) -> None:
        if inp is None and out is None:
            return
        self.seen = True
        self.input += inp or 0
        self.output += out or 0
        self.cached += cached or 0


class _Log:
    """The human-readable transcript (redacted) in the agent's stdout log."""

    def __init__(self, path: Path | None, redactor: Redactor) -> None:
        self._redactor = redactor
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", encoding="utf-8")
        self.tail = ""

    def write(self, text: str) -> None:
        clean = self._redactor.redact(text.rstrip("\n")) + "\n"
        self.tail = (self.tail + clean)[-8000:]
        if self._file is not None:
            self._file.write(clean)
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _run_logs(transcript: Path) -> Callable[[int], tuple[Path, Path]]:
    """Where the output of the agent's n-th `run` goes: beside its transcript."""

    def paths(number: int) -> tuple[Path, Path]:
        stem = transcript.with_suffix("")
        return (
            stem.with_name(f"{stem.name}-run-{number}.out"),
            stem.with_name(f"{stem.name}-run-{number}.err"),
        )

    return paths


class _Session:
    """The state of one session while it runs; `end` turns it into a SessionResult."""

    def __init__(self, config: SessionConfig, remote: Any = None) -> None:
        self.config = config
        self.redactor = config.redactor
        self.deadline = time.monotonic() + config.timeout_s
        self.log = _Log(config.transcript, config.redactor)
        self.notes = _Log(config.notes, config.redactor)
        self.specs = tool_specs(read_only=config.read_only)
        if remote is not None:
            self.specs += [
                ToolSpec(tool.name, tool.description, tool.parameters)
                for tool in remote.tools.values()
            ]
        system = SYSTEM_PREAMBLE.format(worktree=config.worktree)
        if config.instructions.strip():
            system += "\n\n" + config.instructions.strip()
        self.conversation = Conversation(system=system, task=config.prompt)
        # The tool schemas go with every request: count them once.
        schema = json.dumps(config.wire.body(config.model, "", [], self.specs, 1).get("tools", []))
        self.conversation.overhead_tokens = estimate_tokens(schema) + 50
        self.tools = ToolContext(
            worktree=config.worktree,
            env=config.tool_env,
            redactor=config.redactor,
            skills=config.skills,
            ask=config.ask,
            approved=dict(config.approved),
            read_only=config.read_only,
            cancel=config.cancel,
            deadline=self.deadline,
            run_log=_run_logs(config.transcript) if config.transcript else None,
            remote=remote,
            sandbox=config.sandbox,
        )
        self.usage = _Usage()
        self.sizes: list[int] = []
        self.started = time.monotonic()
        self.calls: list[dict[str, Any]] = []  # for traces: see SessionResult.tool_calls
        self.model: str | None = None
        self.last_text = ""
        self.caller: Caller | None = None

    def end(self, status: str, text: str, turns: int, **more: Any) -> SessionResult:
        return SessionResult(
            status=status,
            text=self.redactor.redact(text),
            turns=turns,
            input_tokens=self.usage.input if self.usage.seen else None,
            output_tokens=self.usage.output if self.usage.seen else None,
            cached_tokens=self.usage.cached if self.usage.seen else None,
            model=self.model,
            compactions=self.conversation.compactions,
            retries=self.caller.retries if self.caller is not None else 0,
            requests=len(self.sizes),
            request_tokens=tuple(self.sizes),
            approvals_used=tuple(self.tools.used_approvals),
            tool_calls=tuple(self.calls),
            **more,
        )

    def fail(self, status: str, turn: int, stop: str, error: str, **more: Any) -> SessionResult:
        error = self.redactor.redact(error)
        self.log.write(f"[turn {turn}] {error}")
        return self.end(status, self.last_text or error, turn, stop=stop, error=error, **more)

    def run(self, client: Any) -> SessionResult:
        config = self.config
        self.caller = Caller(
            client=client,
            redactor=self.redactor,
            error_message=config.wire.error_message,
            policy=config.retry,
            cancel=config.cancel,
            deadline=self.deadline,
            note=self.notes.write,
        )
        url = config.wire.url(config.base_url)
        headers = config.wire.headers(config.api_key)
        for turn in range(1, config.max_turns + 1):
            if config.cancel is not None and config.cancel.is_set():
                return self.end("interrupted", self.last_text, turn - 1, stop="interrupted")
            if time.monotonic() >= self.deadline:
                timeout = f"the agent's timeout of {config.timeout_s:g}s ran out"
                return self.fail("timeout", turn - 1, "timeout", timeout)
            if self.conversation.compact_if_needed(config.context_window):
                folded = (
                    self.conversation.checkpoint.folded_turns if self.conversation.checkpoint else 0
                )
                self.log.write(f"[turn {turn}] compacted: {folded} earlier turns in a checkpoint")
            body = config.wire.body(
                config.model,
                self.conversation.system,
                self.conversation.messages(),
                self.specs,
                config.max_output_tokens,
            )
            self.sizes.append(estimate_tokens(json.dumps(body)))
            try:
                reply = config.wire.parse(self.caller.post(url, headers, body))
            except MalformedReply as exc:
                return self.fail("error", turn, "api", f"malformed reply from the model API: {exc}")
            except ApiError as exc:
                status = exc.kind if exc.kind in ("timeout", "interrupted") else "error"
                stop = exc.kind if exc.kind in ("timeout", "interrupted") else "api"
                return self.fail(
                    status,
                    turn,
                    stop,
                    f"API error: {exc}",
                    error_status=exc.status,
                    retry_after_s=exc.retry_after,
                )
            self.usage.add(reply.input_tokens, reply.output_tokens, reply.cached_tokens)
            self.model = reply.model or self.model
            if reply.text.strip():
                self.last_text = reply.text
                self.log.write(f"[turn {turn}] assistant: {reply.text.strip()}")
            if not reply.calls:
                return self.end("ok", reply.text, turn)
            stop_at = self._call_tools(turn, reply.text, reply.calls)
            if stop_at is not None:
                return self._approval(stop_at, turn)
        limit = f"turn limit reached ({config.max_turns} model calls)"
        return self.end(
            "error",
            self.last_text or limit,
            config.max_turns,
            stop="max_turns",
            error=limit,
        )

    def _call_tools(self, turn: int, text: str, calls: tuple[ToolCall, ...]) -> ToolOutcome | None:
        """Run the calls in order; the first one that needs approval ends the turn."""
        results: list[ToolResult] = []
        stop: ToolOutcome | None = None
        for call in calls:
            self.log.write(f"[turn {turn}] call {describe_call(call.name, call.arguments)}")
            if stop is not None:
                outcome = ToolOutcome("not run: the turn ended first", is_error=True)
            elif not call.valid:
                outcome = ToolOutcome(
                    "the arguments are not a valid JSON object; call the tool again", True
                )
            else:
                began = time.monotonic()
                outcome = call_tool(self.tools, call.name, call.arguments)
                self.calls.append(
                    {
                        "name": call.name[:100],
                        "id": call.id[:100],
                        "start_s": round(began - self.started, 3),
                        "duration_s": round(time.monotonic() - began, 3),
                        "error": outcome.is_error,
                    }
                )
            if outcome.needs_approval is not None and stop is None:
                stop = outcome
            content = outcome.content
            shown = content if len(content) < 600 else f"{content[:600]}… [{len(content)} chars]"
            self.log.write(f"[turn {turn}] {'error' if outcome.is_error else 'ok'}: {shown}")
            # Whatever a tool printed is redacted before the model (or anyone) sees it.
            results.append(
                ToolResult(call.id, call.name, self.redactor.redact(content), outcome.is_error)
            )
        self.conversation.add(AssistantTurn(text, calls), results)
        return stop

    def _approval(self, outcome: ToolOutcome, turn: int) -> SessionResult:
        config = self.config
        command = outcome.command or ""
        item: str | None = None
        if config.request_approval is not None:
            verb = "calling MCP tool" if outcome.action == "mcp_tool" else "running"
            item = config.request_approval(
                f"approve {verb} `{command}` (asked by the agent)",
                {
                    "action": outcome.action,
                    "argv": list(outcome.needs_approval or ()),
                    "command": command,
                    "pattern": outcome.pattern,
                    "worktree": str(config.worktree),
                },
            )
        where = f" (inbox item {item})" if item else ""
        text = (
            f"stopped: `{command}` needs a human's approval{where}; it was not run."
            " Approve it in the inbox, then run the loop again."
        )
        self.log.write(f"[turn {turn}] {text}")
        return self.end("approval", text, turn, stop="approval", approval_item=item)


def run_session(config: SessionConfig) -> SessionResult:
    """Drive the model until it is done; every failure is a result, never an exception."""
    if config.cassette is not None:
        config = replace(config, base_url=taped.base_url(config.base_url, config.cassette))
    # lazy: httpx is slow to import and only a network call needs it (bench/startup.py)
    import httpx

    remote = None
    if config.connectors:
        # What the connectors are given is redacted from everything the session writes.
        secrets = secret_values(config.connectors)
        config = replace(config, redactor=Redactor((*config.redactor.secrets, *secrets)))
        log_dir = config.transcript.parent if config.transcript else None
        remote = ConnectorTools(
            config.connectors, cwd=config.worktree, log_dir=log_dir, redactor=config.redactor
        )
        try:
            remote.open()
        except LoopctlError as exc:
            session = _Session(config)
            try:
                return session.fail("error", 0, "connector", str(exc))
            finally:
                session.log.close()
                session.notes.close()
    session = _Session(config, remote)
    proxies = uses_environment(config.base_url)
    hooks = {"response": taped.response_hook(config.base_url, config.cassette)}
    try:
        with httpx.Client(follow_redirects=False, trust_env=proxies, event_hooks=hooks) as client:
            return session.run(client)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the agent's failure is a result; loopctl itself carries on
        error = f"loopctl's agent failed: {type(exc).__name__}: {exc}"
        return session.fail("error", len(session.sizes), "api", error)
    finally:
        session.log.close()
        session.notes.close()
        if remote is not None:
            remote.close()
