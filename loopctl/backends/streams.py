"""Agent CLIs' output, one line at a time, as a short readable line for a person.

Claude's stream-json, `codex exec --json`, opencode's `run --format json` and goose's stream-json
each print one JSON event per line. `render(backend, line)` turns one such line into what a person
wants to see while an agent works ("edit calc.py", "$ pytest -q", the agent's message), or None
when the line says nothing worth a line (a step boundary, a session id). A line that is not JSON
(aider, a command agent, a CLI's own stderr) is shown as it is. Every result is one line, without
control sequences: it goes to a terminal.

Pure functions of one line: the live view (`-v`) and the output tail recorded when an agent's turn
ends (`backends/output_tail.py`) both use them.
"""

from __future__ import annotations

import json
from typing import Any

from loopctl import backend_registry
from loopctl.text import strip_controls

MAX_WIDTH = 240


def _one_line(text: object, width: int = MAX_WIDTH) -> str:
    flat = " ".join(strip_controls(str(text)).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _first_line(text: object) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


def _tool(name: object, arguments: object) -> str:
    """`name target` where target is the argument a person recognises (a path, a command)."""
    args: Any = arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return f"{name} {_first_line(args)}".strip()
    if isinstance(args, dict):
        for key in ("command", "cmd", "file_path", "filePath", "path", "pattern", "url", "query"):
            value = args.get(key)
            if isinstance(value, list):
                value = " ".join(str(part) for part in value)
            if value:
                return f"{name} {_first_line(value)}"
    return str(name)


def claude_event(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    if kind == "system":
        if event.get("subtype") == "init":
            return f"session started (model {event.get('model', '?')})"
        return None
    if kind == "result" or "is_error" in event:
        if event.get("is_error"):
            return f"error: {_first_line(event.get('result') or event.get('subtype') or '')}"
        cost = event.get("total_cost_usd")
        spent = f", ${cost:.4f}" if isinstance(cost, int | float) else ""
        return f"done: {event.get('num_turns', '?')} turns{spent}"
    message = event.get("message")
    if kind not in ("assistant", "user") or not isinstance(message, dict):
        return None
    parts: list[str] = []
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and str(block.get("text", "")).strip():
            parts.append(str(block["text"]))
        elif block.get("type") == "tool_use":
            parts.append("tool " + _tool(block.get("name"), block.get("input")))
        elif block.get("type") == "tool_result":
            body = block.get("content")
            if isinstance(body, list):
                body = " ".join(str(b.get("text", "")) for b in body if isinstance(b, dict))
            mark = "error" if block.get("is_error") else "result"
            parts.append(f"  {mark}: {_first_line(body)}")
    return " · ".join(parts) if parts else None


def _codex_item(item: dict[str, Any], done: bool) -> str | None:
    kind = item.get("type")
    if kind == "command_execution":
        if not done:
            return f"$ {_first_line(item.get('command', ''))}"
        code = item.get("exit_code")
        return f"  exit {code}" if code is not None else None
    if kind == "file_change" and done:
        changes = item.get("changes")
        paths = [
            f"{c.get('kind', 'edit')} {c.get('path')}"
            for c in (changes if isinstance(changes, list) else [])
            if isinstance(c, dict)
        ]
        return "edit " + ", ".join(paths) if paths else None
    if kind == "agent_message" and done:
        return str(item.get("text", "")) or None
    if kind == "reasoning" and done:
        return f"thinking: {item.get('text', '')}"
    if kind == "mcp_tool_call" and not done:
        return f"tool {item.get('server', '')}.{item.get('tool', '')}"
    if kind == "web_search" and not done:
        return f"search {item.get('query', '')}"
    if kind == "todo_list" and not done:
        return "plan updated"
    if kind == "error":
        return f"error: {item.get('message', '')}"
    return None


def codex_event(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    item = event.get("item")
    if kind in ("item.started", "item.completed") and isinstance(item, dict):
        return _codex_item(item, kind == "item.completed")
    if kind == "turn.completed":
        usage = _dict(event.get("usage"))
        return (
            f"turn done ({usage.get('input_tokens', '?')} in,"
            f" {usage.get('output_tokens', '?')} out tokens)"
        )
    if kind == "turn.failed":
        error = _dict(event.get("error"))
        return f"turn failed: {error.get('message', '')}"
    if kind == "error":
        return f"error: {event.get('message', '')}"
    return None


def opencode_event(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    part = _dict(event.get("part"))
    if kind == "tool_use":
        state = _dict(part.get("state"))
        status = state.get("status")
        line = "tool " + _tool(part.get("tool"), state.get("input"))
        if status == "error":
            return f"{line}  error: {_first_line(state.get('error', ''))}"
        return line
    if kind == "text":
        return str(part.get("text", "")) or None
    if kind == "error":
        error = _dict(event.get("error"))
        data = _dict(error.get("data"))
        return f"error: {data.get('message') or error.get('name') or ''}"
    return None


def goose_event(event: dict[str, Any]) -> str | None:
    kind = event.get("type")
    if kind == "message":
        message = _dict(event.get("message"))
        parts: list[str] = []
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                parts.append(str(block["text"]))
            elif block.get("type") == "toolRequest":
                call = block.get("toolCall")
                value = call.get("value") if isinstance(call, dict) else None
                if isinstance(value, dict):
                    parts.append("tool " + _tool(value.get("name"), value.get("arguments")))
        return " · ".join(parts) if parts else None
    if kind == "notification":
        return None
    if kind == "error":
        return f"error: {event.get('error', '')}"
    if kind == "complete":
        return f"done: {event.get('total_tokens', '?')} tokens"
    return None


def render(backend: str, line: str) -> str | None:
    """One line of an agent's output as a readable line, or None if there is nothing to show."""
    stripped = line.strip()
    if not stripped:
        return None
    spec = backend_registry.find(backend)  # each backend names its renderer
    renderer = spec.renderer if spec is not None else None
    if renderer is not None and stripped.startswith("{"):
        try:
            event = json.loads(stripped)
        except ValueError:
            event = None
        if isinstance(event, dict):
            shown = renderer(event)
            return _one_line(shown) if shown and shown.strip() else None
    return _one_line(stripped) or None
