"""The steps a CLI's event stream shows an agent took: tools called, commands run, files written.

Read from the stream the CLI printed (the turn's `maker.out`), not from anything the agent
says about itself: Claude Code's `stream-json` (each `tool_use` block of an assistant message:
`Bash`'s command, `Write`/`Edit`/`MultiEdit`'s file, `NotebookEdit`'s notebook) and `codex exec
--json` (`command_execution` items and their command, `file_change` items and their paths, MCP
tool calls) and `opencode run --format json` (its `tool_use` events: `bash`'s command,
`write`/`edit`/`multiedit`'s file, the files a `patch` names). Another backend's output is not a
stream of steps (aider's, goose's): `read` says so (None), and the footprint is measured from the
diff and the proxy alone (engine.footprint).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Claude Code's tools that write a file, and the input key naming it.
_CLAUDE_WRITES = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
# opencode's tools that write a file (each names it `filePath`), and its patch's file headers.
_OPENCODE_WRITES = frozenset({"write", "edit", "multiedit"})
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.M)
_OPENCODE_EVENTS = frozenset({"step_start", "text", "reasoning", "tool_use", "step_finish"})
# A shell wrapping one command line: `bash -lc "…"` runs the `…`.
_SHELLS = {"bash", "sh", "zsh", "dash"}


@dataclass(slots=True)
class StreamSteps:
    tools: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)

    def add(self, kind: str, value: str) -> None:
        bucket: list[str] = getattr(self, kind)
        if value and value not in bucket:
            bucket.append(value)


def _events(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


def relative(path: str, worktree: Path) -> str:
    """A path the agent named, relative to the worktree when inside it (else as given)."""
    candidate = Path(path)
    if not candidate.is_absolute():
        return candidate.as_posix().removeprefix("./")
    for root in (worktree, worktree.resolve()):
        try:
            return candidate.relative_to(root).as_posix()
        except ValueError:
            continue
    return candidate.as_posix()


def unwrap(command: str) -> str:
    """`bash -lc 'x && y'` as `x && y`: the line the shell runs (Codex wraps every command)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and Path(words[0]).name in _SHELLS and words[1] in ("-c", "-lc"):
        return words[2]
    return command


def read(backend: str, text: str, worktree: Path) -> StreamSteps | None:
    """The steps in `text`, the output of a turn of `backend`; None: not a stream of steps."""
    if backend == "claude":
        return _claude(text, worktree)
    if backend == "codex":
        return _codex(text, worktree)
    if backend == "opencode":
        return _opencode(text, worktree)
    return None


def _claude(text: str, worktree: Path) -> StreamSteps | None:
    steps, streamed = StreamSteps(), False
    for event in _events(text):
        if event.get("type") != "assistant":
            continue
        streamed = True
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            name = str(block.get("name") or "?")
            steps.add("tools", name)
            raw = block.get("input")
            given: dict[str, Any] = raw if isinstance(raw, dict) else {}
            if name == "Bash" and isinstance(given.get("command"), str):
                steps.add("commands", given["command"].strip())
            key = _CLAUDE_WRITES.get(name)
            if key is not None and isinstance(given.get(key), str):
                steps.add("written", relative(given[key], worktree))
    return steps if streamed else None


def _codex(text: str, worktree: Path) -> StreamSteps | None:
    steps, streamed = StreamSteps(), False
    for event in _events(text):
        kind = str(event.get("type") or "")
        if not kind.startswith(("item.", "thread.", "turn.")):
            continue
        streamed = True
        item = event.get("item")
        if kind not in ("item.started", "item.completed") or not isinstance(item, dict):
            continue
        typ = str(item.get("type") or "")
        if typ == "command_execution":
            steps.add("tools", "shell")
            if isinstance(item.get("command"), str):
                steps.add("commands", unwrap(item["command"]).strip())
        elif typ == "file_change":
            steps.add("tools", "apply_patch")
            for change in item.get("changes") or ():
                if isinstance(change, dict) and isinstance(change.get("path"), str):
                    steps.add("written", relative(change["path"], worktree))
        elif typ == "mcp_tool_call":
            steps.add("tools", f"mcp:{item.get('server')}/{item.get('tool')}")
        elif typ == "web_search":
            steps.add("tools", "web_search")
    return steps if streamed else None


def _opencode(text: str, worktree: Path) -> StreamSteps | None:
    steps, streamed = StreamSteps(), False
    for event in _events(text):
        if event.get("type") not in _OPENCODE_EVENTS:
            continue
        streamed = True
        part = event.get("part")
        if event.get("type") != "tool_use" or not isinstance(part, dict):
            continue
        name = str(part.get("tool") or "?")
        steps.add("tools", name)
        state = part.get("state")
        raw = state.get("input") if isinstance(state, dict) else None
        given: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if name == "bash" and isinstance(given.get("command"), str):
            steps.add("commands", given["command"].strip())
        if name in _OPENCODE_WRITES and isinstance(given.get("filePath"), str):
            steps.add("written", relative(given["filePath"], worktree))
        if name == "patch" and isinstance(given.get("patchText"), str):
            for match in _PATCH_FILE.finditer(given["patchText"]):
                steps.add("written", relative((match[1] or match[2]).strip(), worktree))
    return steps if streamed else None
