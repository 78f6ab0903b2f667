"""The tools loopctl's own agent may call, confined to the task's worktree.

Every path is resolved (symlinks and `..` included) and must stay inside the worktree; `.git`
is off limits. `run` takes an argv (never a shell string given to a shell), runs it through
`loopctl.process` with the scrubbed environment and a timeout, and refuses a command matching
the agent's `ask` patterns: that one waits for a human in the inbox instead.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl import process
from loopctl.definitions.skills import Skill
from loopctl.errors import LoopctlError
from loopctl.sandbox import Sandbox
from loopctl.secrets import Redactor

MAX_READ_CHARS = 60_000
MAX_RUN_OUTPUT = 16_000
MAX_SEARCH_HITS = 200
MAX_LIST_ENTRIES = 1000
MAX_SEARCH_FILE = 2_000_000
DEFAULT_RUN_TIMEOUT = 120.0
MAX_RUN_TIMEOUT = 900.0
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "fish"}
WRITE_TOOLS = ("write_file", "edit_file")


class ToolError(Exception):
    """A tool call the model got wrong; the message goes back to it."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_STR = {"type": "string"}
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "read_file",
        "Read a text file of the worktree. Paths are relative to the worktree root. Gives at"
        " most `limit` lines from line `offset` (1-based).",
        _object(
            {
                "path": _STR,
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1},
            },
            ["path"],
        ),
    ),
    ToolSpec(
        "write_file",
        "Create or overwrite a file of the worktree with `content`.",
        _object({"path": _STR, "content": _STR}, ["path", "content"]),
    ),
    ToolSpec(
        "edit_file",
        "Replace the exact text `old` with `new` in a file. `old` must occur exactly once unless"
        " `replace_all` is true; include enough surrounding lines to make it unique.",
        _object(
            {"path": _STR, "old": _STR, "new": _STR, "replace_all": {"type": "boolean"}},
            ["path", "old", "new"],
        ),
    ),
    ToolSpec(
        "list_files",
        "List the files under a folder of the worktree (recursively, .git excluded).",
        _object({"path": _STR}, []),
    ),
    ToolSpec(
        "search",
        "Search the worktree's text files for a regular expression; answers path:line: text.",
        _object({"pattern": _STR, "path": _STR}, ["pattern"]),
    ),
    ToolSpec(
        "run",
        "Run a program in the worktree and get its exit code and output. `argv` is a list:"
        ' ["pytest", "-q"]. No shell is involved. Some commands wait for a human\'s approval.',
        _object(
            {
                "argv": {"type": "array", "items": _STR, "minItems": 1},
                "timeout": {"type": "number", "minimum": 1},
            },
            ["argv"],
        ),
    ),
    ToolSpec(
        "load_skill",
        "Load the full instructions of a skill by name (the task lists the skills on offer).",
        _object({"name": _STR}, ["name"]),
    ),
)


def tool_specs(*, read_only: bool) -> list[ToolSpec]:
    return [spec for spec in TOOLS if not (read_only and spec.name in WRITE_TOOLS)]


@dataclass(slots=True)
class ToolContext:
    """What every tool call may use."""

    worktree: Path
    env: dict[str, str]
    redactor: Redactor
    skills: Mapping[str, Skill] = field(default_factory=dict)
    ask: tuple[str, ...] = ()
    # Commands a human approved in the inbox (item id -> argv): each may run once.
    approved: dict[str, tuple[str, ...]] = field(default_factory=dict)
    used_approvals: list[str] = field(default_factory=list)
    read_only: bool = False
    cancel: threading.Event | None = None
    deadline: float | None = None  # time.monotonic() by which the session must end
    run_log: Callable[[int], tuple[Path, Path]] | None = None  # numbered output files per run
    runs: int = 0
    remote: Any = None  # loopctl.toolagent.mcp.ConnectorTools: the agent's MCP connectors' tools
    sandbox: Sandbox | None = None  # where `run` commands execute confined

    def __post_init__(self) -> None:
        self.worktree = self.worktree.resolve()


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    needs_approval: tuple[str, ...] | None = None  # the argv that waits for a human
    pattern: str | None = None  # the `ask` pattern it matched
    changed: str | None = None  # worktree-relative path written or edited
    read: str | None = None
    command: str | None = None
    exit_code: int | None = None
    action: str = "run"  # what an approval item asks for: "run" a command, or an "mcp_tool" call


# --- paths --------------------------------------------------------------------------------------


def confine(root: Path, raw: object) -> Path:
    """`raw` resolved inside `root`, or ToolError; symlinks and `..` cannot lead outside."""
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        raise ToolError("give a non-empty relative path")
    candidate = Path(raw.strip())
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise ToolError(f"{raw}: cannot resolve ({exc})") from None
    if resolved != root and not resolved.is_relative_to(root):
        raise ToolError(f"{raw}: outside the worktree; only paths inside it can be used")
    relative = resolved.relative_to(root)
    if relative.parts and relative.parts[0] == ".git":
        raise ToolError(f"{raw}: .git is off limits; loopctl commits for you")
    return resolved


def _relative(root: Path, path: Path) -> str:
    relative = path.relative_to(root).as_posix()
    return relative or "."


# --- the tools ----------------------------------------------------------------------------------


def _read_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    path = confine(ctx.worktree, args.get("path"))
    if not path.is_file():
        raise ToolError(f"{args.get('path')}: no such file")
    text = path.read_bytes().decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    offset = max(int(args.get("offset") or 1), 1)
    limit = max(int(args.get("limit") or 2000), 1)
    chunk = "".join(lines[offset - 1 : offset - 1 + limit])
    note = ""
    if len(chunk) > MAX_READ_CHARS:
        chunk = chunk[:MAX_READ_CHARS]
        note = f"\n[cut at {MAX_READ_CHARS} characters; read on with offset]"
    elif offset > 1 or offset - 1 + limit < len(lines):
        last = min(offset - 1 + limit, len(lines))
        note = f"\n[lines {offset}-{last} of {len(lines)}]"
    return ToolOutcome(ctx.redactor.redact(chunk) + note, read=_relative(ctx.worktree, path))


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a symlink put in place after the path was checked is not followed out.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _write_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    path = confine(ctx.worktree, args.get("path"))
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("'content' must be a string")
    if path.is_dir():
        raise ToolError(f"{args.get('path')}: is a folder")
    _write_bytes(path, content.encode("utf-8"))
    relative = _relative(ctx.worktree, path)
    return ToolOutcome(f"wrote {len(content)} characters to {relative}", changed=relative)


def _edit_file(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    path = confine(ctx.worktree, args.get("path"))
    old, new = args.get("old"), args.get("new")
    if not isinstance(old, str) or not isinstance(new, str) or not old:
        raise ToolError("'old' (non-empty) and 'new' must be strings")
    if not path.is_file():
        raise ToolError(f"{args.get('path')}: no such file")
    text = path.read_text(encoding="utf-8")
    found = text.count(old)
    if found == 0:
        raise ToolError(f"the text to replace was not found in {args.get('path')}; read it again")
    if found > 1 and args.get("replace_all") is not True:
        raise ToolError(
            f"the text to replace occurs {found} times in {args.get('path')}; add surrounding"
            " lines to make it unique, or set replace_all"
        )
    _write_bytes(path, text.replace(old, new).encode("utf-8"))
    relative = _relative(ctx.worktree, path)
    return ToolOutcome(f"replaced {found} occurrence(s) in {relative}", changed=relative)


def _walk(root: Path, start: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(start):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        base = Path(folder)
        for name in sorted(files):
            found.append(base / name)
            if len(found) > MAX_LIST_ENTRIES * 20:
                return found
    return found


def _list_files(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    start = confine(ctx.worktree, args.get("path") or ".")
    if not start.is_dir():
        raise ToolError(f"{args.get('path')}: not a folder")
    entries = [_relative(ctx.worktree, p) for p in _walk(ctx.worktree, start)]
    shown = entries[:MAX_LIST_ENTRIES]
    more = f"\n… and {len(entries) - len(shown)} more" if len(entries) > len(shown) else ""
    return ToolOutcome("\n".join(shown) + more if shown else "(no files)")


def _search(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ToolError("'pattern' must be a non-empty regular expression")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression: {exc}") from None
    start = confine(ctx.worktree, args.get("path") or ".")
    files = [start] if start.is_file() else _walk(ctx.worktree, start)
    hits: list[str] = []
    for path in files:
        try:
            if path.is_symlink() or path.stat().st_size > MAX_SEARCH_FILE:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue  # binary
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                hits.append(f"{_relative(ctx.worktree, path)}:{number}: {line.strip()[:300]}")
                if len(hits) >= MAX_SEARCH_HITS:
                    hits.append(f"[stopped at {MAX_SEARCH_HITS} matches; narrow the pattern]")
                    return ToolOutcome(ctx.redactor.redact("\n".join(hits)))
    return ToolOutcome(ctx.redactor.redact("\n".join(hits)) if hits else "no matches")


def ask_match(argv: tuple[str, ...], patterns: tuple[str, ...]) -> str | None:
    """The `ask` pattern this command matches, if any.

    A pattern matches the command line (words joined by spaces, the program by its base name)
    as a glob, or as its leading words: "git push" matches "git push --force origin main". A
    shell's `-c` script matches when the pattern appears anywhere in it. This is a tripwire
    for consequential commands, not a sandbox.
    """
    if not argv or not patterns:
        return None
    words = [os.path.basename(argv[0]), *argv[1:]]
    line = " ".join(words)
    scripts = []
    if words[0] in _SHELLS and "-c" in words[1:-1]:
        scripts.append(" ".join(words[words.index("-c", 1) + 1 :]))
    for raw in patterns:
        pattern = " ".join(raw.split())
        if not pattern:
            continue
        if line == pattern or line.startswith(pattern + " ") or fnmatch.fnmatchcase(line, pattern):
            return raw
        for script in scripts:
            flat = " ".join(script.split())
            if pattern in flat or fnmatch.fnmatchcase(flat, pattern):
                return raw
    return None


def _argv(args: dict[str, Any]) -> tuple[str, ...]:
    raw = args.get("argv", args.get("command"))
    if isinstance(raw, str):
        try:
            raw = shlex.split(raw)
        except ValueError as exc:
            raise ToolError(f"cannot split the command into words: {exc}") from None
    if not isinstance(raw, list) or not raw or not all(isinstance(a, str) for a in raw):
        raise ToolError('\'argv\' must be a non-empty list of strings, like ["pytest", "-q"]')
    return tuple(raw)


def _run(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:

    argv = _argv(args)
    shown = shlex.join(argv)
    pattern = ask_match(argv, ctx.ask)
    granted = next((item for item, allowed in ctx.approved.items() if allowed == argv), None)
    if pattern is not None and granted is not None:
        # Approved exactly as shown, and spent by this run: a second run needs a new approval.
        del ctx.approved[granted]
        ctx.used_approvals.append(granted)
    elif pattern is not None:
        return ToolOutcome(
            f"`{shown}` needs a human's approval (matches ask pattern {pattern!r}); it did not"
            " run. Your turn ends here.",
            is_error=True,
            needs_approval=argv,
            pattern=pattern,
            command=shown,
        )
    timeout = float(args.get("timeout") or DEFAULT_RUN_TIMEOUT)
    timeout = min(max(timeout, 1.0), MAX_RUN_TIMEOUT)
    if ctx.deadline is not None:
        timeout = min(timeout, max(ctx.deadline - time.monotonic(), 1.0))
    ctx.runs += 1
    out_path, err_path = ctx.run_log(ctx.runs) if ctx.run_log else (None, None)
    try:
        done = process.run(
            list(argv),
            cwd=ctx.worktree,
            env=ctx.env,
            timeout=timeout,
            stdout_path=out_path,
            stderr_path=err_path,
            redactor=ctx.redactor,
            cancel=ctx.cancel,
            tail_bytes=MAX_RUN_OUTPUT,
            sandbox=ctx.sandbox,
        )
    except process.ProgramNotFound as exc:
        raise ToolError(str(exc)) from None
    if done.timed_out:
        head = f"timed out after {timeout:g}s"
    elif done.interrupted:
        head = "interrupted"
    else:
        head = f"exit code {done.exit_code}"
    output = done.output_tail(MAX_RUN_OUTPUT)
    return ToolOutcome(
        f"{head}\n{output}" if output else head,
        is_error=not done.ok,
        command=shown,
        exit_code=done.exit_code,
    )


def _load_skill(ctx: ToolContext, args: dict[str, Any]) -> ToolOutcome:
    name = args.get("name")
    skill = ctx.skills.get(name) if isinstance(name, str) else None
    if skill is None:
        names = ", ".join(sorted(ctx.skills)[:40]) or "none"
        raise ToolError(f"no skill named {name!r}; skills: {names}")
    body = skill.instructions()
    folder = skill.folder.name
    return ToolOutcome(
        ctx.redactor.redact(
            f'<skill_content name="{skill.name}" folder="{folder}">\n{body}\n</skill_content>'
        )
    )


_HANDLERS: dict[str, Callable[[ToolContext, dict[str, Any]], ToolOutcome]] = {
    "read_file": _read_file,
    "write_file": _write_file,
    "edit_file": _edit_file,
    "list_files": _list_files,
    "search": _search,
    "run": _run,
    "load_skill": _load_skill,
}


def call_tool(ctx: ToolContext, name: str, args: object) -> ToolOutcome:
    """Run one tool call; a mistake is an error result for the model, never an exception."""
    handler = _HANDLERS.get(name)
    if handler is None and ctx.remote is not None and name in ctx.remote.tools:
        return _call_remote(ctx, name, args)
    if handler is None:
        return ToolOutcome(f"unknown tool {name!r}; tools: {', '.join(_HANDLERS)}", is_error=True)
    if ctx.read_only and name in WRITE_TOOLS:
        return ToolOutcome(f"{name} is not available: this agent must not change files", True)
    if not isinstance(args, dict):
        return ToolOutcome("the arguments must be a JSON object", is_error=True)
    try:
        return handler(ctx, args)
    except ToolError as exc:
        return ToolOutcome(str(exc), is_error=True)
    except (LoopctlError, OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
        return ToolOutcome(f"{name} failed: {exc}", is_error=True)


def _call_remote(ctx: ToolContext, name: str, args: object) -> ToolOutcome:
    """An MCP connector's tool; one whose name matches an `ask` pattern waits for a human."""
    if not isinstance(args, dict):
        return ToolOutcome("the arguments must be a JSON object", is_error=True)
    # What a human approves is this exact call: the tool and its arguments, canonically.
    call = ("mcp", name, json.dumps(args, sort_keys=True, ensure_ascii=False))
    shown = f"{name} {call[2]}"
    pattern = ask_match((name,), ctx.ask)
    granted = next((item for item, allowed in ctx.approved.items() if allowed == call), None)
    if pattern is not None and granted is not None:
        del ctx.approved[granted]
        ctx.used_approvals.append(granted)
    elif pattern is not None:
        return ToolOutcome(
            f"`{shown}` needs a human's approval (matches ask pattern {pattern!r}); it was not"
            " called. Your turn ends here.",
            is_error=True,
            needs_approval=call,
            pattern=pattern,
            command=shown,
            action="mcp_tool",
        )
    reply = ctx.remote.call(name, args)
    return ToolOutcome(ctx.redactor.redact(reply.text), is_error=reply.is_error, command=shown)


def describe_call(name: str, args: object) -> str:
    """A short, log-friendly rendering of a call."""
    if name == "run" and isinstance(args, dict):
        try:
            return "run " + shlex.join(_argv(args))
        except ToolError:
            pass
    text = json.dumps(args, ensure_ascii=False) if not isinstance(args, str) else args
    return f"{name} {text[:300]}"
