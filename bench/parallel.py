"""Parallel efficiency: 8 tasks whose agent sleeps, run with max_parallel = 8 vs one at a time.

Run: python bench/parallel.py
Efficiency = (serial time / parallel time) / 8 (goal: >= 0.8). Sleep-bound agents measure
loopctl's own scheduling of tasks, not the CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows

TASKS = 8
SLEEP = 2.0


def make_repo(root: Path, parallel: int) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    (root / "README.md").write_text("bench\n")
    agent = f"import sys, time; sys.stdin.read(); time.sleep({SLEEP})"
    (root / "agents").mkdir()
    (root / "agents" / "sleeper.toml").write_text(
        f'backend = "command"\nargv = {json.dumps([sys.executable, "-c", agent])}\n'
    )
    items = json.dumps([{"id": f"t{n}"} for n in range(TASKS)])
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / ".loop" / "config.toml").write_text('[defaults]\nmaker = "sleeper"\n')
    (root / ".loop" / "loops" / "par.toml").write_text(
        f"[tasks]\ncommand = {json.dumps([sys.executable, '-c', f'print({items!r})'])}\n"
        f'id = "{{id}}"\nprompt = "sleep"\n\n[budget]\nmax_parallel = {parallel}\n'
        f"max_tasks = {TASKS}\n"
    )
    (root / ".gitignore").write_text(".loop/log/\n.loop/runs/\n.loop/locks/\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "bench"], cwd=root, check=True, env=env)
    return root


def tick(root: Path, home: Path) -> float:
    from loopctl.definitions import load_project
    from loopctl.engine.runner import Engine
    from loopctl.journal.recorder import Recorder

    os.environ["LOOPCTL_HOME"] = str(home)
    project = load_project(root)
    start = time.perf_counter()
    outcome = Engine(Recorder(project)).run_loop_once(project.loop("par"))
    took = time.perf_counter() - start
    assert outcome.ok, outcome
    return took


def measure() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        serial = tick(make_repo(Path(tmp) / "serial", 1), Path(tmp) / "h1")
        parallel = tick(make_repo(Path(tmp) / "parallel", TASKS), Path(tmp) / "h2")
    efficiency = serial / parallel / TASKS
    return [
        Row(
            f"{TASKS} sleep-bound tasks, max_parallel={TASKS} (efficiency)",
            efficiency,
            "",
            goal=">= 0.8",
            met=efficiency >= 0.8,
            note=f"serial {serial:.1f}s, parallel {parallel:.1f}s",
        )
    ]


if __name__ == "__main__":
    print_rows(measure())
