"""Backend "goose": `goose run --output-format json --name N -i PROMPT_FILE`.

goose prints one pretty-printed document `{"messages": […], "metadata": {…, "status"}}` after
the run, perhaps behind a banner; `status` is "completed" or "error", and an error also exits
non-zero (goose-cli session/mod.rs). The session is the name loopctl gives it, so a later
attempt can `--resume` it. When `--max-turns` runs out goose does not fail: it ends with the
question "I've reached the maximum number of actions …", which loopctl reports as a stop.
GOOSE_MODE is forced to "auto": in "approve" mode a headless run dies at its first tool call.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from typing import Any, ClassVar

from loopctl.backend_registry import BackendSpec, register
from loopctl.backends import streams
from loopctl.backends.base import (
    AgentRequest,
    AgentResult,
    AgentStatus,
    as_dict,
    float_or_none,
)
from loopctl.backends.base import int_or_none as _int
from loopctl.backends.presets import (
    CliPreset,
    Invocation,
    base_status,
    safe_session_id,
    stdout_text,
)

MAX_TURNS_TEXT = "I've reached the maximum number of actions I can do without user input"


def session_name(request: AgentRequest) -> str:
    raw = f"loopctl-{request.loop}-{request.task}-{request.attempt}-{request.role}"
    clean = re.sub(r"[^A-Za-z0-9_-]+", "-", raw)[:90].strip("-")
    return f"{clean}-{secrets.token_hex(3)}"


def find_document(text: str) -> dict[str, Any] | None:
    """The JSON document goose printed, skipping any banner lines before it."""
    decoder = json.JSONDecoder()
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("{"):
            start = offset + (len(line) - len(line.lstrip()))
            try:
                value, _ = decoder.raw_decode(text, start)
            except ValueError:
                value = None
            if isinstance(value, dict) and ("metadata" in value or "messages" in value):
                return value
        offset += len(line)
    return None


def last_assistant_text(messages: object) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        texts = [
            str(part.get("text"))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and part.get("text")
        ]
        if texts:
            return "\n".join(texts)
    return ""


class GooseBackend(CliPreset):
    name = "goose"
    binary = "goose"
    install = (
        "curl -fsSL https://github.com/block/goose/releases/download/stable/download_cli.sh | bash"
    )
    secret_names = (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENROUTER_API_KEY",
        "DATABRICKS_TOKEN",
    )
    passthrough = ("GOOSE_*", "OLLAMA_HOST", "OPENAI_HOST", "ANTHROPIC_HOST")
    fixed_env: ClassVar[Mapping[str, str]] = {"GOOSE_MODE": "auto", "GOOSE_DISABLE_KEYRING": "1"}
    base_url_variables: ClassVar[Mapping[str, str]] = {
        "OPENAI_HOST": "https://api.openai.com",
        "ANTHROPIC_HOST": "https://api.anthropic.com",
    }
    model_hosts = ("generativelanguage.googleapis.com", "openrouter.ai")

    def invocation(self, request: AgentRequest) -> Invocation:
        agent = request.agent
        earlier = safe_session_id(request.session_id)
        argv = ["goose", "run", "--output-format", "json"]
        if earlier is not None:
            argv += ["--resume", "--name", earlier]
        else:
            argv += ["--name", session_name(request)]
        if agent.max_turns is not None:
            argv += ["--max-turns", str(agent.max_turns)]
        if agent.model:
            argv += ["--model", agent.model]
        if agent.instructions.strip():
            argv += ["--system", agent.instructions.strip()]
        argv += list(agent.args)
        argv += ["-i", str(request.prompt_file)]
        return Invocation(argv)

    def parse(self, request: AgentRequest, done: Any) -> AgentResult:
        document = find_document(stdout_text(done))
        name = _argument(done.argv, "--name")
        if document is None:
            return AgentResult(
                status=base_status(done, failed=True),
                exit_code=done.exit_code,
                duration_s=done.duration_s,
                text=done.output_tail(4000),
                session_id=name,
                output_tail=done.output_tail(4000),
                extra={"error": _error_line(done.stderr_tail) or "goose printed no JSON result"},
            )
        meta = as_dict(document.get("metadata"))
        text = last_assistant_text(document.get("messages"))
        failed = str(meta.get("status", "completed")) != "completed"
        status = base_status(done, failed=failed)
        extra: dict[str, Any] = {}
        if MAX_TURNS_TEXT in text:
            status = AgentStatus.ERROR if status is AgentStatus.OK else status
            extra["stop"] = "max_turns"
        if failed:
            extra["error"] = _error_line(done.stderr_tail) or f"goose status {meta.get('status')}"
        # goose's input_tokens already counts cache reads and writes (its providers add them).
        total_input = _int(meta.get("input_tokens"))
        read = _int(meta.get("cache_read_input_tokens"))
        return AgentResult(
            status=status,
            exit_code=done.exit_code,
            duration_s=done.duration_s,
            text=text[-4000:],
            input_tokens=total_input,
            output_tokens=_int(meta.get("output_tokens")),
            cached_tokens=read if read is not None else (0 if total_input is not None else None),
            cost_usd=float_or_none(meta.get("cost_usd")),
            session_id=name,
            output_tail=done.output_tail(4000),
            extra=extra,
        )


def _argument(argv: tuple[str, ...], flag: str) -> str | None:
    for index, arg in enumerate(argv[:-1]):
        if arg == flag:
            return argv[index + 1]
    return None


def _error_line(stderr: str) -> str:
    for line in reversed(stderr.splitlines()):
        if line.strip():
            return line.strip()[:500]
    return ""


SPEC = register(
    BackendSpec(
        name="goose",
        factory=GooseBackend,
        executable="goose",
        preference=50,
        state=(
            "$XDG_CONFIG_HOME|~/.config:goose",
            "$XDG_DATA_HOME|~/.local/share:goose",
            "$XDG_STATE_HOME|~/.local/state:goose",
            "$XDG_CACHE_HOME|~/.cache:goose",
        ),
        history=frozenset({"sessions", "logs"}),
        renderer=streams.goose_event,
    )
)
