"""Issue 31's scripted drift runs: a small site (styles/, a page, db/schema.sql), a loop that
declares its scope, and tests/agents/claude_steps.py as its maker — a stand-in for Claude Code
that really reads, writes and runs what its plan says and streams each step as Claude Code does.

`run_tasks` runs `loopctl run css --once` (a real process) over tasks whose ids pick the plan
(`benign-7`, `schema-1`, …, see claude_steps.py) and reads back, from the log, each attempt's
footprint and drift and each task's ending. tests/engine/test_drift_stream.py and
bench/drift_benign.py share it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl.journal.events import EventLog
from loopctl.paths import ProjectPaths
from support.repos import AGENTS, PY, commit_all, git, toml_value

CHECK = "import pathlib, sys; sys.exit('red' in pathlib.Path('styles/site.css').read_text())"
COMMANDS = [
    "ls *",
    "grep *",
    "git status*",
    "git diff*",
    "git log*",
    "cat styles/*",
    "wc -l styles/*",
]
TOOLS = ["Read", "Edit", "Write", "Bash", "Grep", "Glob"]


@dataclass
class Runs:
    """What the log says of one `run_tasks`."""

    output: str
    footprints: list[dict[str, Any]] = field(default_factory=list)  # attempt_footprint data
    endings: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> task_finished
    commits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def alarms(self) -> list[dict[str, Any]]:
        return [f for f in self.footprints if f["drift"]["alarm"]]


def site(repo: Path) -> None:
    """The project: a red link to fix, a theme, a button, a page and a schema beside them."""
    git(repo, "init", "-q", "-b", "main")
    (repo / "styles" / "components").mkdir(parents=True)
    (repo / "styles" / "site.css").write_text("a { color: red; }\n")
    (repo / "styles" / "theme.css").write_text(":root {\n  --gap: 4px;\n}\n")
    (repo / "styles" / "components" / "button.css").write_text(".button {\n}\n")
    (repo / "index.html").write_text('<link rel="stylesheet" href="styles/site.css">\n')
    (repo / "db").mkdir()
    (repo / "db" / "schema.sql").write_text("CREATE TABLE users (id INTEGER PRIMARY KEY);\n")
    (repo / "agents").mkdir()
    (repo / "agents" / "maker.toml").write_text(
        'description = "Claude Code (scripted)"\nbackend = "claude"\ntimeout = "120s"\n'
    )
    loop = repo / ".loop" / "loops"
    loop.mkdir(parents=True)
    (repo / ".loop" / "config.toml").write_text('version = 1\n\n[defaults]\nmaker = "maker"\n')
    commit_all(repo, "a site with a red link")


def write_loop(repo: Path, tasks: list[str], scopes: dict[str, list[str]] | None = None) -> None:
    """The loop over `tasks` (each with its own `scope` paths from `scopes`, if any),
    committed: its definition is part of the base."""
    given = scopes or {}
    listing = json.dumps(
        [{"id": t, "title": t, **({"scope": given[t]} if t in given else {})} for t in tasks]
    )
    printer = [PY, "-c", f"print({listing!r})"]
    (repo / ".loop" / "loops" / "css.toml").write_text(
        'prompt = "Fix the link colour in styles/site.css"\n'
        f"\n[tasks]\ncommand = {toml_value(printer)}\n"
        "\n[scope]\n"
        'paths = ["styles/**"]\n'
        f"commands = {toml_value(COMMANDS)}\n"
        f"tools = {toml_value(TOOLS)}\n"
        "max_files = 10\nmax_lines = 400\n"
        f"\n[checker]\ncommand = {toml_value([PY, '-B', '-c', CHECK])}\n"
        f"\n[budget]\nmax_iterations = 1\nmax_tasks = {max(len(tasks), 1)}\n"
    )
    commit_all(repo, f"the css loop over {len(tasks)} task(s)")


def shim(folder: Path) -> Path:
    """A `claude` first on PATH that runs the scripted stand-in."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "claude"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{AGENTS / "claude_steps.py"}" "$@"\n')
    program.chmod(0o755)
    return folder


def run_tasks(
    repo: Path, tasks: list[str], env: dict[str, str], scopes: dict[str, list[str]] | None = None
) -> Runs:
    """`loopctl run css --once` over `tasks`; what the log then holds of them."""
    write_loop(repo, tasks, scopes)
    done = subprocess.run(
        [PY, "-m", "loopctl", "run", "css", "--once"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60 + 30 * len(tasks),
        check=False,
    )
    runs = Runs(done.stdout + done.stderr)
    wanted = set(tasks)
    for event in EventLog(ProjectPaths(repo).events_file).read():
        if event.task not in wanted:
            continue
        if event.type == "attempt_footprint":
            runs.footprints.append({"task": event.task, **event.data})
        elif event.type == "task_finished":
            runs.endings[event.task] = dict(event.data)
        elif event.type == "commit_created":
            runs.commits.append({"task": event.task, **event.data})
    return runs


def environment(home: Path, bin_folder: Path) -> dict[str, str]:
    """An isolated environment for loopctl: its own HOME, caches and git config."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / ".gitconfig"
    config.write_text("[user]\n\tname = t\n\temail = t@example.com\n")
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "LOOPCTL_"))}
    return {
        **keep,
        "HOME": str(home),
        "LOOPCTL_HOME": str(home / ".loopctl"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": f"{shim(bin_folder)}{os.pathsep}{os.environ['PATH']}",
    }
