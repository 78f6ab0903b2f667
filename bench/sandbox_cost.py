"""The sandbox's cost: an agent start, and a whole attempt, with and without it.

Run: python bench/sandbox_cost.py
Goal (issue 12): at most 50 ms added per agent start. Both sides are measured in the same run:
`process.run` of a small program bare and inside the sandbox, and one `loopctl run --once`
attempt of a command agent and a check (two sandboxed starts) with `[sandbox] mode` off and on.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows

AGENT = "import pathlib; pathlib.Path('calc.py').write_text('def add(a, b):\\n    return a + b\\n')"
CHECK = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"


def starts(runs: int) -> tuple[float, float]:
    """Median seconds to run a trivial Python program, bare and sandboxed."""
    from loopctl import limits, process, sandbox

    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        root = Path(tmp)
        # With the default limits, as every agent and check gets them (rlimits and watcher).
        box = sandbox.make_sandbox(root=root, worktree=root, limits=limits.Limits())
        env = dict(os.environ)
        argv = [sys.executable, "-S", "-c", "pass"]
        bare, boxed = [], []
        for _ in range(runs):
            for sample, with_box in ((bare, None), (boxed, box)):
                start = time.perf_counter()
                done = process.run(argv, cwd=root, env=env, timeout=60, sandbox=with_box)
                sample.append(time.perf_counter() - start)
                assert done.ok, done.output_tail()
    return statistics.median(bare), statistics.median(boxed)


def make_repo(root: Path, mode: str) -> Path:
    root.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "agents").mkdir()
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps([sys.executable, "-c", AGENT])}\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / ".loop" / "config.toml").write_text(
        f'[defaults]\nmaker = "maker"\n\n[sandbox]\nmode = "{mode}"\n'
    )
    (root / ".loop" / "loops" / "fix.toml").write_text(
        f'prompt = "fix"\n\n[checker]\ncommand = {json.dumps([sys.executable, "-c", CHECK])}\n'
        '\n[worktree]\nkeep = "never"\n'
    )
    (root / ".gitignore").write_text(".loop/log/\n.loop/runs/\n.loop/locks/\n__pycache__/\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "bench"], cwd=root, check=True, env=env)
    return root


def attempt(root: Path) -> float:
    from loopctl.definitions import load_project
    from loopctl.engine.runner import Engine
    from loopctl.journal.recorder import Recorder

    project = load_project(root)
    start = time.perf_counter()
    outcome = Engine(Recorder(project)).run_loop_once(project.loop("fix"))
    took = time.perf_counter() - start
    assert outcome.ok, outcome
    return took


def measure(runs: int = 30, attempts: int = 5) -> list[Row]:
    bare, boxed = starts(runs)
    off, on = [], []
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        os.environ["LOOPCTL_HOME"] = str(Path(tmp) / "home")
        for index in range(attempts):
            off.append(attempt(make_repo(Path(tmp) / f"off{index}", "off")))
            on.append(attempt(make_repo(Path(tmp) / f"on{index}", "required")))
    added_ms = (boxed - bare) * 1000
    return [
        Row(
            "sandbox: one agent start (python -S -c pass)",
            boxed * 1000,
            "ms",
            baseline=bare * 1000,
            goal="+<= 50 ms",
            met=added_ms <= 50,
            note=f"{added_ms:.1f} ms added (median of {runs})",
        ),
        Row(
            "sandbox: one attempt (agent + check), mode on vs off",
            statistics.median(on),
            "s",
            baseline=statistics.median(off),
            note=f"median of {attempts}; two sandboxed starts per attempt",
        ),
    ]


if __name__ == "__main__":
    print_rows(measure())
