"""What the scripted model says to each real CLI, by name (the harness picks one per run).

Each CLI is recognised by what it sends: Claude Code speaks Anthropic Messages, Codex the OpenAI
Responses API, opencode Chat Completions with its own tools (`read`, `edit`), aider Chat
Completions with no tools and its SEARCH/REPLACE edit protocol in the prompt. The position in
a script is the number of tool results already in the conversation, so the server keeps no state.
Requests that are not agent turns (opencode's title, a commit message) get a short text.
"""

from __future__ import annotations

import json
import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.model_server import Call, Reply, Request, ScriptedModelServer, Turn

Script = Callable[[Request, ScriptedModelServer], "Turn | Reply"]

BUG, FIX = "return a - b", "return a + b"
DONE = "Fixed add()."
PATCH = (
    "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n"
    f"-    {BUG}\n+    {FIX}\n*** End Patch\n"
)
AIDER_EDIT = (
    f"calc.py\n```python\n<<<<<<< SEARCH\n    {BUG}\n=======\n    {FIX}\n>>>>>>> REPLACE\n```\n"
    f"\n{DONE}\n"
)


def family(request: Request) -> str:
    if request.wire == "anthropic":
        return "claude"
    if request.wire == "responses":
        return "codex"
    if "edit" in request.tools and "read" in request.tools:
        return "opencode"
    if not request.tools and "SEARCH/REPLACE" in request.text:
        return "aider"
    return "side"  # a title, a commit message: not an agent turn


def _file(request: Request) -> str:
    cwd = request.cwd
    return f"{cwd}/calc.py" if cwd else "calc.py"


def fix(request: Request, server: ScriptedModelServer) -> Turn:
    """Read calc.py, fix add(), say so: the golden path of every CLI."""
    return _fix(request, request.step)


def _fix(request: Request, step: int) -> Turn:
    kind = family(request)
    if kind == "claude" and request.tools:
        if step == 0:
            return Turn(calls=[Call("Read", {"file_path": _file(request)})])
        if step == 1:
            edit = {"file_path": _file(request), "old_string": BUG, "new_string": FIX}
            return Turn(calls=[Call("Edit", edit)])
    if kind == "codex" and step == 0:
        if "apply_patch" in request.tools:
            return Turn(calls=[Call("apply_patch", PATCH)])
        command = f"sed -i 's/{BUG}/{FIX}/' calc.py"
        return Turn(calls=[Call("exec_command", {"cmd": command, "workdir": request.cwd or "."})])
    if kind == "opencode":
        if step == 0:
            return Turn(calls=[Call("read", {"filePath": _file(request)})])
        if step == 1:
            edit = {"filePath": _file(request), "oldString": BUG, "newString": FIX}
            return Turn(calls=[Call("edit", edit)])
    if kind == "aider":
        return Turn(text=AIDER_EDIT)
    if kind == "side":
        return Turn(text="Fix add", usage=(10, 2))
    return Turn(text=DONE)


def never_fix(request: Request, server: ScriptedModelServer) -> Turn:
    """The model answers at once without touching anything, and claims success."""
    return Turn(text=DONE)


def denied(request: Request, server: ScriptedModelServer) -> Turn:
    """Claude Code: an edit through Bash, which `acceptEdits` denies; it still exits 0."""
    if family(request) == "claude" and request.tools and request.step == 0:
        command = (
            "python3 -c \"import pathlib; p = pathlib.Path('calc.py');"
            f" p.write_text(p.read_text().replace('{BUG}', '{FIX}'))\""
        )
        return Turn(calls=[Call("Bash", {"command": command, "description": "fix add"})])
    return Turn(text=DONE)


def lookup_then_fix(request: Request, server: ScriptedModelServer) -> Turn:
    """Call the MCP connector's `lookup` tool first (as the CLI names it), then fix."""
    offered = [name for name in request.tools if name.endswith("lookup")]
    if family(request) == "side" or not offered:
        return _fix(request, request.step)
    if request.step == 0:
        return Turn(calls=[Call(offered[0], {"key": "alpha"})])
    return _fix(request, request.step - 1)


# Files the `peek_then_fix` script asks Codex to `cat` (`:`-separated): set in the harness's
# environment by the test, which checks on the host that they exist and in the requests that the
# agent never saw them.
PEEK = "LOOPCTL_TEST_PEEK"


def peek_then_fix(request: Request, server: ScriptedModelServer) -> Turn:
    """Codex first runs `cat` on the files named in $LOOPCTL_TEST_PEEK through its shell
    tool, then fixes; the other CLIs just fix."""
    shells = [name for name in ("exec_command", "shell_command", "shell") if name in request.tools]
    if family(request) != "codex" or not shells:
        return _fix(request, request.step)
    if request.step > 0:
        return _fix(request, request.step - 1)
    command = ["cat", *os.environ[PEEK].split(":")]
    workdir = request.cwd or "."
    args: dict[str, Any] = {
        "exec_command": {"cmd": shlex.join(command), "workdir": workdir},
        "shell_command": {"command": shlex.join(command), "workdir": workdir},
        "shell": {"command": command, "workdir": workdir},
    }[shells[0]]
    return Turn(calls=[Call(shells[0], args)])


def fix_on_second_attempt(request: Request, server: ScriptedModelServer) -> Turn:
    """Claim success without a change on loopctl's first attempt; fix on its second (in the
    session the first left, when the agent resumes)."""
    if "(attempt 2)" not in request.text:
        return Turn(text=DONE)
    return _fix(request, request.step)


# Claude Code's context window for compaction, in tokens (CLAUDE_CODE_AUTO_COMPACT_WINDOW): a
# turn reported past it makes the CLI compact before its next request.
COMPACT_WINDOW = 30_000
COMPACTIONS = 2


def compact_twice_then_fix(request: Request, server: ScriptedModelServer) -> Turn:
    """Claude Code: read calc.py with a context reported past the compaction window until the
    CLI has compacted twice (its summary requests are answered with a summary), then read and
    fix calc.py, as the file on disk says is still needed (compaction rewrites the history a
    step count would read)."""
    last = json.dumps(request.body.get("messages", [])[-1:])
    if "detailed summary" in last.lower():
        with server.lock:
            server.compactions = getattr(server, "compactions", 0) + 1  # type: ignore[attr-defined]
        return Turn(text="<summary>The task: fix add() in calc.py.</summary>")
    if family(request) != "claude" or not request.tools:
        return Turn(text=DONE)
    read = Call("Read", {"file_path": _file(request)})
    if getattr(server, "compactions", 0) < COMPACTIONS:
        return Turn(calls=[read], usage=(5 * COMPACT_WINDOW, 20))
    if BUG not in Path(_file(request)).read_text():
        return Turn(text=DONE)
    if '"tool_result"' in last:  # it has just read the file (or been told it is unchanged)
        return Turn(calls=[Call("Edit", {"file_path": _file(request), "old_string": BUG,
                                         "new_string": FIX})])  # fmt: skip
    return Turn(calls=[read])


def hang(request: Request, server: ScriptedModelServer) -> Reply:
    """Every request waits forever: only loopctl's timeout can end the attempt."""
    return Reply(hang=True)


# A file the `lost_after_first_tool` script creates when it holds the request that would be the
# agent's second tool call: the test kills loopctl once it exists (tests/support/kill_rerun.py).
LOST_MARK = "LOOPCTL_TEST_LOST_MARK"


def lost_after_first_tool(request: Request, server: ScriptedModelServer) -> Turn | Reply:
    """`fix`, but the first request that carries a tool result (the one that would get the
    second tool call) is never answered: it creates $LOOPCTL_TEST_LOST_MARK and waits."""
    mark = Path(os.environ[LOST_MARK])
    if family(request) != "side" and request.step == 1 and not mark.exists():
        mark.write_text("held\n")
        return Reply(hang=True)
    return fix(request, server)


# The variables a CLI's model key travels in (issue 25: inside the sandbox only a stand-in).
KEY_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY")


def with_census(script: Script, census: list[dict[str, Any]], key: str) -> Script:
    """`script`, but when the first agent turn arrives (its CLI is alive, waiting for the
    answer) every process's initial environment is read from the host's /proc: for each one
    holding a key variable, its pid namespace (the sandbox's differs from the harness's) and
    whether the value was the real key, a loopctl stand-in or something else."""
    lock = threading.Lock()
    own_namespace = os.readlink("/proc/self/ns/pid")

    def play(request: Request, server: ScriptedModelServer) -> Turn | Reply:
        with lock:
            if not census and family(request) != "side":
                census.extend(_holders(key, own_namespace))
        return script(request, server)

    return play


def _holders(key: str, own_namespace: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes()
            namespace = os.readlink(entry / "ns" / "pid")
            comm = (entry / "comm").read_text().strip()
        except OSError:  # gone, or not ours to read
            continue
        values = {}
        for item in raw.split(b"\0"):
            name, _, value = item.decode(errors="replace").partition("=")
            if name in KEY_VARIABLES:
                kind = "real" if value == key else "other"
                values[name] = "stand-in" if value.startswith("loopctl-stand-in-") else kind
        if values:
            found.append(
                {
                    "pid": int(entry.name),
                    "comm": comm,
                    "values": values,
                    "sandboxed": namespace != own_namespace,
                }
            )
    return found


def with_failures(script: Script, failures: list[Reply]) -> Script:
    """`script`, but the first agent turns get `failures` (a 429, …) instead; side requests
    such as opencode's title are served normally, so a failure always hits the agent itself."""
    pending = list(failures)
    lock = threading.Lock()

    def play(request: Request, server: ScriptedModelServer) -> Turn | Reply:
        if family(request) != "side":
            with lock:
                if pending:
                    return pending.pop(0)
        return script(request, server)

    return play


def after_file(script: Script, path: Path, timeout: float = 60.0) -> Script:
    """`script`, but the first agent turn is answered only once `path` exists (a sign, such as
    an MCP server's start record, that the CLI finished something it does in parallel)."""
    ready = threading.Event()

    def play(request: Request, server: ScriptedModelServer) -> Turn | Reply:
        if family(request) != "side" and not ready.is_set():
            deadline = time.monotonic() + timeout
            while not path.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            ready.set()
        return script(request, server)

    return play


SCRIPTS: dict[str, Script] = {
    "fix": fix,
    "never_fix": never_fix,
    "fix_on_second_attempt": fix_on_second_attempt,
    "compact_twice_then_fix": compact_twice_then_fix,
    "denied": denied,
    "hang": hang,
    "lookup_then_fix": lookup_then_fix,
    "peek_then_fix": peek_then_fix,
    "lost_after_first_tool": lost_after_first_tool,
}


# --- issue 31, item 1: a CSS fix that strays out of its scope ------------------------------------

CSS_BUG, CSS_FIX = "color: red", "color: blue"
SCHEMA_LINE = "ALTER TABLE users ADD COLUMN theme TEXT;"


def _css_steps(request: Request, stray: list[Call]) -> Turn:
    """Claude Code reads and fixes styles/site.css, then takes the `stray` calls, one a turn."""
    cwd = request.cwd or "."
    site = f"{cwd}/styles/site.css"
    steps = [
        Call("Read", {"file_path": site}),
        Call("Edit", {"file_path": site, "old_string": CSS_BUG, "new_string": CSS_FIX}),
        *stray,
    ]
    if family(request) == "claude" and request.tools and request.step < len(steps):
        return Turn(calls=[steps[request.step]])
    if family(request) == "opencode" and request.step < len(steps):
        return Turn(calls=[_for_opencode(steps[request.step])])
    return Turn(text="Fixed the link colour.") if family(request) != "side" else Turn(text="CSS")


def _for_opencode(call: Call) -> Call:
    """Claude Code's call as opencode's own tool takes it (`read`, `edit`, `write`, `bash`)."""
    keys = {"file_path": "filePath", "old_string": "oldString", "new_string": "newString"}
    assert isinstance(call.args, dict)
    return Call(call.name.lower(), {keys.get(k, k): v for k, v in call.args.items()})


def css_then_schema_by_bash(request: Request, server: ScriptedModelServer) -> Turn:
    """The fix, then a shell command that appends to db/schema.sql: Claude Code's Bash, or
    Codex's shell tool (the fix by `sed` first)."""
    command = f"printf '%s\\n' '{SCHEMA_LINE}' >> db/schema.sql"
    shells = [name for name in ("exec_command", "shell_command", "shell") if name in request.tools]
    if family(request) == "codex" and shells:
        fix_css = f"sed -i 's/{CSS_BUG}/{CSS_FIX}/' styles/site.css"
        if request.step > 1:
            return Turn(text="Fixed the link colour.")
        line = [fix_css, command][request.step]
        workdir = request.cwd or "."
        args: dict[str, Any] = {
            "exec_command": {"cmd": line, "workdir": workdir},
            "shell_command": {"command": line, "workdir": workdir},
            "shell": {"command": ["bash", "-lc", line], "workdir": workdir},
        }[shells[0]]
        return Turn(calls=[Call(shells[0], args)])
    return _css_steps(request, [Call("Bash", {"command": command, "description": "migrate"})])


def css_then_write_and_delete(request: Request, server: ScriptedModelServer) -> Turn:
    """The fix, then db/scratch.sql written with Write and removed with Bash `rm`."""
    scratch = f"{request.cwd or '.'}/db/scratch.sql"
    return _css_steps(
        request,
        [
            Call("Write", {"file_path": scratch, "content": SCHEMA_LINE + "\n"}),
            Call("Bash", {"command": "rm db/scratch.sql", "description": "clean up"}),
        ],
    )


SCRIPTS.update(
    {
        "css_then_schema_by_bash": css_then_schema_by_bash,
        "css_then_write_and_delete": css_then_write_and_delete,
    }
)
