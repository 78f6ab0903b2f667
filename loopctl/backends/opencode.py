"""Backend "opencode": `opencode run --format json PROMPT`, NDJSON events on stdout.

There is no aggregate result event (README.md, "Tested against the real CLIs"): tokens and
cost are the sums over the `step_finish` lines, the final text is the `text` parts of the last
step, and any line carries the session id. A cost of 0 with tokens spent means the model has no
price in opencode's config, so it is treated as unknown (and priced from loopctl's table if it
can be). A session lost with loopctl (`kill -9`) is resumed with `run -s ID`; what its model
calls spent is read from opencode's database (backends.sessions.opencode_usage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from loopctl.backend_registry import BackendSpec, register
from loopctl.backends import streams
from loopctl.backends.base import (
    AgentRequest,
    AgentResult,
    as_dict,
    float_or_none,
    int_or_none,
)
from loopctl.backends.presets import (
    CliPreset,
    Invocation,
    base_status,
    json_lines,
    positional,
    safe_session_id,
    stdout_text,
    with_instructions,
)
from loopctl.backends.sessions import SessionUsage, opencode_usage
from loopctl.text import strip_controls

# What `opencode run -s ID` prints on stderr (exit 1) when it has no session ID (seen with 1.18).
_SESSION_GONE = "Session not found"


class OpencodeBackend(CliPreset):
    name = "opencode"
    binary = "opencode"
    install = "npm install -g opencode-ai"
    secret_names = (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "GEMINI_API_KEY",
        "GROQ_API_KEY",
    )
    passthrough = ("OPENCODE_*",)
    fixed_env: ClassVar[Mapping[str, str]] = {"OPENCODE_DISABLE_AUTOUPDATE": "1"}
    # Its providers' URLs live in its own config, not in a variable loopctl can point.
    model_hosts = (
        "api.anthropic.com",
        "api.openai.com",
        "openrouter.ai",
        "generativelanguage.googleapis.com",
        "api.groq.com",
    )

    names_sessions = False  # opencode names its sessions: read from its events' `sessionID`
    reports_session_totals = False  # `run -s` streams only its own steps' usage

    def invocation(self, request: AgentRequest) -> Invocation:
        agent = request.agent
        argv = ["opencode", "run", "--format", "json"]
        if agent.model:
            argv += ["-m", agent.model]
        session = safe_session_id(request.session_id)
        if session is not None:
            argv += ["-s", session]
        argv += list(agent.args)
        argv.append(positional(with_instructions(agent, request.prompt)))
        return Invocation(argv)

    def parse(self, request: AgentRequest, done: Any) -> AgentResult:
        session: str | None = None
        step_text: list[str] = []
        last_text: list[str] = []
        errors: list[str] = []
        tool_errors: list[str] = []
        steps = 0
        tokens = {"input": 0, "cached": 0, "output": 0}
        cost = 0.0
        seen_usage = False
        for event in json_lines(stdout_text(done)):
            if isinstance(event.get("sessionID"), str):
                session = event["sessionID"]
            kind = event.get("type")
            part = as_dict(event.get("part"))
            if kind == "step_start":
                step_text = []
            elif kind == "text" and isinstance(part.get("text"), str):
                step_text.append(part["text"])
                last_text = list(step_text)
            elif kind == "tool_use":
                state = as_dict(part.get("state"))
                if state.get("status") == "error":
                    tool_errors.append(f"{part.get('tool')}: {state.get('error')}"[:300])
            elif kind == "step_finish":
                steps += 1
                used = part.get("tokens")
                if isinstance(used, dict):
                    seen_usage = True
                    cache = as_dict(used.get("cache"))
                    read = int_or_none(cache.get("read")) or 0
                    written = int_or_none(cache.get("write")) or 0
                    # opencode counts cache reads and writes apart from `input`.
                    tokens["input"] += (int_or_none(used.get("input")) or 0) + read + written
                    tokens["cached"] += read
                    tokens["output"] += int_or_none(used.get("output")) or 0
                cost += float_or_none(part.get("cost")) or 0.0
            elif kind == "error":
                errors.append(_error_message(event.get("error")))
        status = base_status(done, failed=bool(errors))
        extra: dict[str, Any] = {"turns": steps}
        if errors:
            extra["error"] = errors[-1][:500]
        if tool_errors:
            extra["tool_errors"] = tool_errors[-5:]
        spent = tokens["input"] + tokens["output"]
        return AgentResult(
            status=status,
            exit_code=done.exit_code,
            duration_s=done.duration_s,
            text=("".join(last_text) or (errors[-1] if errors else ""))[-4000:],
            input_tokens=tokens["input"] if seen_usage else None,
            output_tokens=tokens["output"] if seen_usage else None,
            cached_tokens=tokens["cached"] if seen_usage else None,
            cost_usd=round(cost, 8) if cost > 0 or (seen_usage and spent == 0) else None,
            session_id=session,
            output_tail=done.output_tail(4000),
            extra=extra,
        )

    def session_in_output(self, text: str) -> str | None:
        for event in json_lines(text):
            if isinstance(event.get("sessionID"), str):
                return safe_session_id(event["sessionID"])
        return None

    def session_usage(self, session: str, places: Sequence[Path]) -> SessionUsage | None:
        if safe_session_id(session) is None:
            return None
        for place in places:
            found = opencode_usage(place, session)
            if found is not None:
                return found
        return None

    def session_gone(self, result: AgentResult) -> bool:
        said = strip_controls(f"{result.extra.get('error') or ''}\n{result.output_tail}")
        return result.status.value == "error" and _SESSION_GONE in said


def _error_message(error: object) -> str:
    if isinstance(error, dict):
        data = error.get("data")
        if isinstance(data, dict) and data.get("message"):
            code = data.get("statusCode")
            return f"{data['message']}" + (f" (HTTP {code})" if code else "")
        if error.get("message"):
            return str(error["message"])
        if error.get("name"):
            return str(error["name"])
    return str(error)


SPEC = register(
    BackendSpec(
        name="opencode",
        factory=OpencodeBackend,
        executable="opencode",
        preference=30,
        state=(
            "$XDG_CONFIG_HOME|~/.config:opencode",
            "$XDG_DATA_HOME|~/.local/share:opencode",
            "$XDG_CACHE_HOME|~/.cache:opencode",
            "$XDG_STATE_HOME|~/.local/state:opencode",
        ),
        history=frozenset({"storage", "snapshot", "log"}),
        renderer=streams.opencode_event,
    )
)
