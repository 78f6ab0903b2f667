"""Overhead of one `loopctl goal` attempt against doing the same steps by hand.

Run: python bench/goal_overhead.py [--files 3000] [--runs 5]

Both sides work on the same generated repository (N files) with the same agent (a small
program that fixes one line) and the same check. By hand: git worktree add, run the agent, run
the check, git add + commit, git worktree remove. loopctl: the same through `loopctl goal`,
measured both in-process (the engine) and as a CLI invocation (adds interpreter start-up).
Prints medians and ratios (goal: <= 1.2x).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows

AGENT = """import pathlib, sys
sys.stdin.read()
p = pathlib.Path("src/calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
"""
CHECK = """import pathlib, sys
sys.exit(0 if "a + b" in pathlib.Path("src/calc.py").read_text() else 1)
"""


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_repo(parent: Path, files: int) -> Path:
    root = parent / "repo"
    (root / "src").mkdir(parents=True)
    for index in range(files):
        folder = root / "pkg" / f"m{index // 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index}.py").write_text(f"VALUE_{index} = {index}\n")
    (root / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tools").mkdir()
    (root / "tools" / "agent.py").write_text(AGENT)
    (root / "tools" / "check.py").write_text(CHECK)
    (root / "agents").mkdir()
    (root / "agents" / "fixer.toml").write_text(
        f'backend = "command"\nargv = ["{sys.executable}", "tools/agent.py"]\n'
    )
    (root / ".loop").mkdir()
    (root / ".loop" / "config.toml").write_text(
        f'[defaults]\nmaker = "fixer"\n[worktree]\nroot = "{parent / "wt"}"\nkeep = "never"\n'
    )
    (root / ".gitignore").write_text(".loop/log/\n.loop/runs/\n.loop/locks/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def by_hand(root: Path, parent: Path, n: int) -> float:
    path = parent / "hand" / str(n)
    start = time.perf_counter()
    git(root, "worktree", "add", "-q", "-b", f"hand/{n}", "--", str(path), "HEAD")
    subprocess.run([sys.executable, "tools/agent.py"], cwd=path, input=b"prompt", check=True)
    subprocess.run([sys.executable, "tools/check.py"], cwd=path, check=True)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "fix")
    git(root, "worktree", "remove", "--force", "--", str(path))
    return time.perf_counter() - start


def reset(root: Path) -> None:
    for folder in ("log", "runs", "locks"):
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


def with_engine(root: Path) -> float:
    from loopctl.definitions import load_project
    from loopctl.engine.runner import Engine, GoalOptions
    from loopctl.journal.recorder import Recorder

    reset(root)
    start = time.perf_counter()
    outcome = Engine(Recorder(load_project(root))).run_goal(
        GoalOptions("fixed", check=(sys.executable, "tools/check.py"))
    )
    took = time.perf_counter() - start
    assert outcome.ok, outcome
    return took


def with_cli(root: Path) -> float:
    reset(root)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "loopctl",
            "goal",
            "fixed",
            "--check",
            f"{sys.executable} tools/check.py",
        ],
        cwd=root,
        check=True,
        capture_output=True,
        env=env,
    )
    return time.perf_counter() - start


def measure(files: int = 3000, runs: int = 5) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        parent = Path(tmp)
        os.environ["LOOPCTL_HOME"] = str(parent / "home")
        root = make_repo(parent, files)
        hand_times, engine_times, cli_times = [], [], []
        for n in range(runs):  # interleaved, so the machine's noise hits all three alike
            hand_times.append(by_hand(root, parent, n))
            engine_times.append(with_engine(root))
            cli_times.append(with_cli(root))
    hand = statistics.median(hand_times)
    engine = statistics.median(engine_times)
    cli = statistics.median(cli_times)
    note = f"{files}-file repository, median of {runs}"
    return [
        Row("one goal attempt, engine in-process, vs by hand", engine * 1000, "ms", hand * 1000,
            "<= 1.2x", engine / hand <= 1.2, note),
        Row("one goal attempt, `loopctl goal` CLI, vs by hand", cli * 1000, "ms", hand * 1000,
            "", None, note + "; adds interpreter start-up"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print_rows(measure(args.files, args.runs))


if __name__ == "__main__":
    main()
