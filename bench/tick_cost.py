"""What a tick of a goal loop costs in suite runs and wall time, against running the suite by hand.

Run: python bench/tick_cost.py [--suite-s 1.5] [--runs 5] [--corpus]

A small project whose pytest suite does real work for about `--suite-s` seconds; its loop's goal
is "tests green", checked by that suite. Each suite run calls a TCP listener of this program's
before it starts (the checks run confined, so counting by a file outside the worktree is not
possible), so the counts are the suite's own. Measured, the engine in-process:

- by hand: `python -m pytest` in the checkout (the baseline of every ratio);
- a tick on a green base seen for the first time: one suite run (the baseline and the "already
  holds" check share it);
- a tick on a green base nothing changed since: no suite run, no agent (goal: <= 0.1x one run);
- a tick on a failing base with one fixing attempt: the base once, the attempt once.

`--corpus` measures the same on a real project instead: humanize 4.9.0 from the corpus of
tests/corpus (`scripts/fetch-corpus`), a `src/` layout installed with `pip install -e .` into its
`.venv`, its own suite as the check ("tests green", detected), its filesize bug and fix as the
failing and green bases. Its suite is counted by the same listener, from a `conftest.py` at its
root.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows

TEST_TREE = Path(__file__).resolve().parents[1] / "tests"

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
AGENT = """import pathlib, sys
sys.stdin.read()
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
"""
TESTS = """import hashlib

from calc import add


def test_add():
    assert add(2, 3) == 5


def test_real_work():
    digest = b""
    for number in range({rounds}):
        digest = hashlib.sha256(digest + str(number).encode()).digest()
    assert len(digest) == 32
"""
CONFTEST = """import socket


def pytest_sessionstart(session):
    with socket.create_connection(("127.0.0.1", {port})) as counted:
        counted.sendall(b"1")
        counted.recv(1)
"""


class Counter:
    """How many times the suite started: each run says one byte and waits for the answer."""

    def __init__(self) -> None:
        self.runs = 0
        counter = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                if self.request.recv(1):
                    counter.runs += 1  # one handler thread at a time: runs are sequential
                    self.request.sendall(b"k")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def rounds_for(seconds: float) -> int:
    """sha256 rounds the test must do to take about `seconds` here."""
    sample = 200_000
    start = time.perf_counter()
    digest = b""
    for number in range(sample):
        digest = hashlib.sha256(digest + str(number).encode()).digest()
    took = time.perf_counter() - start
    return max(1000, int(sample * seconds / took))


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def checker_network(port: int) -> str:
    """Config that lets the check reach the counter: a check's network namespace has only its
    own loopback unless the config names a local server, which then keeps its port."""
    return f'\n[checker]\nnetwork = ["127.0.0.1:{port}"]\n'


def make_repo(parent: Path, port: int, rounds: int) -> Path:
    root = parent / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests" / "test_calc.py").write_text(TESTS.format(rounds=rounds))
    (root / "tests" / "conftest.py").write_text(CONFTEST.format(port=port))
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / "tools").mkdir()
    (root / "tools" / "agent.py").write_text(AGENT)
    (root / "agents").mkdir()
    (root / "agents" / "fixer.toml").write_text(
        f'backend = "command"\nargv = {json.dumps([sys.executable, "tools/agent.py"])}\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / ".loop" / "config.toml").write_text(
        f'[defaults]\nmaker = "fixer"\n[worktree]\nroot = "{parent / "wt"}"\n\n'
        f'[conditions]\n"tests green" = {json.dumps(PYTEST)}\n' + checker_network(port)
    )
    (root / ".loop" / "loops" / "green.toml").write_text(
        'goal = "tests green"\nprompt = "Make the tests pass."\n\n[budget]\nmax_iterations = 1\n'
    )
    (root / ".gitignore").write_text(".loop/log/\n.loop/runs/\n.loop/locks/\n.loop/cache/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def make_corpus_repo(parent: Path, port: int) -> Path:
    """humanize as the corpus tests set it up: its own git repository and `.venv` (editable)."""
    sys.path.insert(0, str(TEST_TREE))  # the corpus's set-up is the tests' own (tests/support)
    from support.corpus import PROJECTS, checkout, corpus_root, ignore, python_venv

    if not (corpus_root() / "installed").is_file():
        raise SystemExit(f"no corpus in {corpus_root()}: run scripts/fetch-corpus first")
    fix = PROJECTS["humanize"].bug.undone()
    root = checkout("humanize", parent)
    ignore(root, ".venv/", "__pycache__/", ".loop/log/", ".loop/runs/", ".loop/locks/")
    ignore(root, ".loop/cache/")
    python_venv(root, editable=True)
    (root / "conftest.py").write_text(CONFTEST.format(port=port))
    agent = [sys.executable, str(TEST_TREE / "agents" / "replaces_text.py"), *astuple(fix)]
    (root / "agents").mkdir()
    (root / "agents" / "fixer.toml").write_text(
        f'backend = "command"\nargv = {json.dumps(agent)}\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / ".loop" / "config.toml").write_text(
        f'[defaults]\nmaker = "fixer"\n[worktree]\nroot = "{parent / "wt"}"\n'
        + checker_network(port)
    )
    (root / ".loop" / "loops" / "green.toml").write_text(
        'goal = "tests green"\nprompt = "Make the tests pass."\n\n[budget]\nmax_iterations = 1\n'
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "humanize as published, with loopctl's files")
    return root


def set_filesize(root: Path, fixed: bool, note: str) -> None:
    """humanize's base green or failing (its filesize bug), as a new commit with a new tree."""
    from support.corpus import PROJECTS

    bug = PROJECTS["humanize"].bug
    path = root / bug.path
    text = path.read_text().replace(bug.new, bug.old)
    path.write_text(text if fixed else text.replace(bug.old, bug.new, 1))
    (root / "ROUND.txt").write_text(f"{note}\n")
    git(root, "add", bug.path, "ROUND.txt")
    git(root, "commit", "-q", "-m", note)


def reset(root: Path) -> None:
    """Forget every earlier tick (log, cache, worktrees, loop branches): the next one is a
    first one. The worktrees go first: git refuses to delete a branch a worktree (a parked one
    too) has checked out."""
    shutil.rmtree(root.parent / "wt", ignore_errors=True)
    git(root, "worktree", "prune")
    for folder in ("log", "runs", "locks", "cache"):
        shutil.rmtree(root / ".loop" / folder, ignore_errors=True)
    for name in ("STATE.md", "INBOX.md"):
        (root / ".loop" / name).unlink(missing_ok=True)
    branches = subprocess.run(
        ["git", "branch", "--list", "loop/*", "--format=%(refname:short)"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if branches:
        git(root, "branch", "-D", "--", *branches)


def set_calc(root: Path, fixed: bool, note: str) -> None:
    """Make the checkout's base green or failing, as a new commit (a new tree: `note` differs)."""
    body = "a + b" if fixed else "a - b"
    (root / "calc.py").write_text(f"# {note}\ndef add(a, b):\n    return {body}\n")
    git(root, "commit", "-q", "-am", note)


def agent_calls(root: Path) -> int:
    from loopctl.journal.events import EventLog
    from loopctl.paths import ProjectPaths

    return sum(
        1 for e in EventLog(ProjectPaths(root).events_file).read() if e.type == "agent_started"
    )


def tick(root: Path, counter: Counter) -> tuple[float, int, int]:
    """(seconds, suite runs, agent calls) of one tick of the loop, in-process."""
    from loopctl.definitions import load_project
    from loopctl.engine.runner import Engine
    from loopctl.journal.recorder import Recorder

    runs, calls = counter.runs, agent_calls(root)
    start = time.perf_counter()
    project = load_project(root)
    Engine(Recorder(project)).run_loop_once(project.loop("green"))
    took = time.perf_counter() - start
    return took, counter.runs - runs, agent_calls(root) - calls


def by_hand(root: Path, counter: Counter, pytest: list[str]) -> tuple[float, int, int]:
    runs = counter.runs
    start = time.perf_counter()
    subprocess.run(pytest, cwd=root, check=True, capture_output=True)
    return time.perf_counter() - start, counter.runs - runs, 0


def measure(suite_s: float = 1.5, runs: int = 5, corpus: bool = False) -> list[Row]:
    counter = Counter()
    samples: dict[str, list[tuple[float, int, int]]] = {
        "hand": [],
        "first": [],
        "unchanged": [],
        "failing": [],
    }
    try:
        with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
            parent = Path(tmp)
            os.environ["LOOPCTL_HOME"] = str(parent / "home")
            if corpus:
                root = make_corpus_repo(parent, counter.port)
                pytest = [str(root / ".venv" / "bin" / "python"), *PYTEST[1:]]
                set_base = set_filesize
            else:
                root = make_repo(parent, counter.port, rounds_for(suite_s))
                pytest, set_base = PYTEST, set_calc
            steps: list[tuple[str, Callable[[], tuple[float, int, int]]]] = [
                ("hand", lambda: by_hand(root, counter, pytest)),
                ("first", lambda: tick(root, counter)),
                ("unchanged", lambda: tick(root, counter)),
                ("unchanged", lambda: tick(root, counter)),
            ]
            for n in range(runs):  # interleaved, so the machine's noise hits all alike
                reset(root)
                set_base(root, False, f"round {n}: the base is broken")
                samples["failing"].append(tick(root, counter))
                set_base(root, True, f"round {n}: the base is right")
                for name, step in steps:
                    samples[name].append(step())
    finally:
        counter.close()

    def median(name: str) -> tuple[float, float, float]:
        found = samples[name]
        return (
            statistics.median(s[0] for s in found),
            statistics.median(s[1] for s in found),
            statistics.median(s[2] for s in found),
        )

    hand, _, _ = median("hand")
    # The suite's work is calibrated at start; on a busy machine a run takes longer.
    note = f"median of {runs}; the suite's own work calibrated to ~{suite_s:g} s"
    if corpus:
        note = f"median of {runs}; humanize 4.9.0's own suite (tests/corpus)"
    rows: list[Row] = []
    for name, label, goal, limit in (
        ("unchanged", "tick cost: green base, unchanged since it held", "<= 0.1x", 0.1),
        ("first", "tick cost: green base, first seen", "", None),
        ("failing", "tick cost: failing base, one fixing attempt", "", None),
    ):
        took, suites, calls = median(name)
        met = None if limit is None else took / hand <= limit
        rows.append(
            Row(
                ("humanize: " if corpus else "") + label + ", vs the suite by hand",
                took,
                "s",
                hand,
                goal,
                met,
                f"suite runs per tick: {suites:g}, agent calls: {calls:g}; {note}",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--suite-s", type=float, default=1.5)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--corpus", action="store_true", help="measure on humanize (the corpus)")
    args = parser.parse_args()
    rows = measure(args.suite_s, args.runs, args.corpus)
    print_rows(rows)
    for row in rows:  # the suite runs and agent calls per tick, which the table leaves out
        print(f"    {row.name.split(', vs')[0]}: {row.note}")


if __name__ == "__main__":
    main()
