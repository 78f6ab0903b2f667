"""A small project whose loop has several tasks, and the invariants a crash must not break."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from support.cli import loopctl_killed_at_argv
from support.repos import git

from loopctl.journal import history
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.paths import ProjectPaths

PY = sys.executable
AGENT = Path(__file__).parent / "agents" / "per_task.py"
# Two tasks: a kill between them (one finished, one not) is the case a third would only repeat.
TASKS = ("a", "b")
CHECK = (
    "import pathlib, sys; files = list(pathlib.Path('work').glob('*.txt'));"
    " sys.exit(0 if files and all(f.read_text() == 'done' for f in files) else 1)"
)


def make_template(root: Path) -> Path:
    """A repository with a two-task loop `crash` and its maker, committed."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("crash lab\n")
    (root / "agents").mkdir()
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps([PY, str(AGENT)])}\ntimeout = "60s"\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / ".loop" / "config.toml").write_text('[defaults]\nmaker = "maker"\n')
    items = json.dumps([{"id": task} for task in TASKS])
    (root / ".loop" / "loops" / "crash.toml").write_text(
        "[tasks]\n"
        f"command = {json.dumps([PY, '-c', f'print({items!r})'])}\n"
        'id = "{id}"\n'
        'prompt = "Write work/{id}.txt"\n\n'
        f"[checker]\ncommand = {json.dumps([PY, '-B', '-c', CHECK])}\n\n"
        "[budget]\nmax_iterations = 3\nmax_parallel = 1\n"
    )
    (root / ".gitignore").write_text("__pycache__/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "crash lab")
    return root


def clone(template: Path, where: Path) -> Path:
    shutil.copytree(template, where, symlinks=True)
    return where


def run_once(repo: Path, home: Path, *, kill_at_seq: int | None = None) -> int:
    """`loopctl run crash --once` in a real process; its exit code (-9 when it was killed)."""
    env = {**os.environ, "LOOPCTL_HOME": str(home)}
    done = subprocess.run(
        loopctl_killed_at_argv(kill_at_seq, "run", "crash", "--once"),
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode not in (0, -9):
        (repo.parent / "failure.txt").write_text(done.stdout + done.stderr)
    return done.returncode


def spawn_once(repo: Path, home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "LOOPCTL_HOME": str(home)}
    return subprocess.Popen(
        [PY, "-m", "loopctl", "run", "crash", "--once"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def log_of(repo: Path) -> list[Event]:
    return EventLog(ProjectPaths(repo).events_file).read()


def check_invariants(repo: Path, killed_after: int) -> list[str]:
    """Every broken promise after a crash at event `killed_after` and one resumed run."""
    problems: list[str] = []
    events = log_of(repo)  # raises on anything but a torn last line
    paths = ProjectPaths(repo)
    for projection, heading in ((paths.state_md, "# Loop state"), (paths.inbox_md, "# Inbox")):
        text = projection.read_text(encoding="utf-8")
        if not text.startswith(heading) or not text.endswith("\n"):
            problems.append(f"{projection.name} is not a whole file")
    runs = list(history.fold(events).values())
    run = runs[0]
    ended_before_kill = run.finished is not None and any(
        e.type == EventType.TICK_FINISHED and e.seq <= killed_after for e in run.events
    )
    # Killed after the tick had finished: the next `run --once` is a new tick, as it should be.
    if len(runs) != (2 if ended_before_kill else 1):
        problems.append(f"found {len(runs)} runs after a kill at event {killed_after}")
    if run.status != "done":
        problems.append(f"run ended {run.status}: {run.reason}")
    events = run.events
    finished_before = {
        e.task for e in events if e.type == EventType.TASK_FINISHED and e.seq <= killed_after
    }
    redone = (EventType.ATTEMPT_STARTED, EventType.AGENT_FINISHED)
    for event in events:
        if event.seq > killed_after and event.task in finished_before and event.type in redone:
            problems.append(f"finished task {event.task} was worked again: {event.type}")
    attempts_done = Counter(
        (e.task, e.data.get("attempt")) for e in events if e.type == EventType.ATTEMPT_FINISHED
    )
    problems += [f"attempt {key} finished {n} times" for key, n in attempts_done.items() if n > 1]
    attempts_started = Counter(
        (e.task, e.data.get("attempt")) for e in events if e.type == EventType.ATTEMPT_STARTED
    )
    problems += [f"attempt {key} started {n} times" for key, n in attempts_started.items() if n > 2]
    for task in TASKS:
        view = run.tasks.get(task)
        if view is None or view.status != "done":
            problems.append(f"task {task} not done")
            continue
        commits = git(repo, "rev-list", "--count", f"main..loop/crash/{task}").strip()
        if commits != "1":
            problems.append(f"task {task} has {commits} commits on its branch, expected 1")
    return problems
