"""Warm workspaces: time from a task being found to its worktree being ready for the agent.

Run: python bench/workspace_ready.py [--tasks N]
Goals (issue 17), each against a baseline measured in the same run:
(a) a 3,000-file repository, no setup: the first task <= 1.1x a bare `git worktree add` of the
    same tree, the following tasks (pooled worktrees) <= 0.5x;
(b) a repository whose setup writes a 30,000-file dependency folder (generated offline, no
    registry): the second and later tasks <= 0.2x a fresh worktree plus that setup.
The first task is measured as the median over several loops' first tasks (pool misses), each
taken next to one bare add (in turns, which goes first alternating, the disk's queue flushed
before each), so that a busy moment of the machine weighs on both alike.
Each task's time runs from the later of its `task_found` event and the previous task's
`task_finished` to its `workspace_ready` note: retiring an earlier worktree, resolving the base,
getting the worktree (pooled or added), copies, setup or its seed, and recording it ready.
The engine runs in-process, the sandbox on; the maker is `python -c pass` and the check passes,
so each task ends one short attempt after its worktree is ready (and is parked for the next one).
Also reported: disk used by one more worktree, fresh against warm (pooled or seeded).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows

# Setup that "installs" a 30,000-file dependency tree: 600 packages of 50 small files.
INSTALL = (
    "import pathlib\n"
    "root = pathlib.Path('node_modules')\n"
    "for p in range(600):\n"
    "    d = root / f'pkg{p}' / 'lib'\n"
    "    d.mkdir(parents=True, exist_ok=True)\n"
    "    for f in range(50):\n"
    "        (d / f'm{f}.js').write_text(f'module.exports = {p * 50 + f};\\n')\n"
)
ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b"}
ENV |= {"GIT_COMMITTER_EMAIL": "b@b"}


def make_repo(
    root: Path, files: int, *, setup: bool, tasks: int, pool: bool, firsts: int = 0
) -> Path:
    """A repository of `files` files, its loop `warm` of `tasks` tasks, and `firsts` more loops
    (`first0`, ...) of one task each: each of those is a loop's first task, a pool miss."""
    root.mkdir(parents=True)
    env = {**os.environ, **ENV}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    per_folder = 30
    for index in range(files):
        folder = root / "src" / f"d{index // per_folder:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index:05d}.py").write_text(f"VALUE = {index}\n" + "# padding\n" * 20)
    ids = json.dumps([{"id": f"t{n}"} for n in range(1, tasks + 1)])
    worktree = f"pool = {'true' if pool else 'false'}\n"
    if setup:
        (root / "package.json").write_text('{"name": "bench"}\n')
        (root / "package-lock.json").write_text('{"lockfileVersion": 3}\n')
        worktree += f"setup = [{json.dumps([sys.executable, '-c', INSTALL])}]\n"
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / "agents").mkdir()
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps([sys.executable, "-c", "pass"])}\n'
    )
    (root / ".loop" / "config.toml").write_text('[defaults]\nmaker = "maker"\n')

    def loop(name: str, ids: str) -> None:
        (root / ".loop" / "loops" / f"{name}.toml").write_text(
            'prompt = "task {id}"\n\n'
            f"[tasks]\ncommand = {json.dumps([sys.executable, '-c', f'print({ids!r})'])}\n\n"
            f"[checker]\ncommand = {json.dumps([sys.executable, '-c', 'pass'])}\n\n"
            f"[budget]\nmax_parallel = 1\n\n[worktree]\n{worktree}"
        )

    loop("warm", ids)
    for index in range(firsts):
        loop(f"first{index}", json.dumps([{"id": "t1"}]))
    (root / ".gitignore").write_text(
        ".loop/log/\n.loop/runs/\n.loop/locks/\n__pycache__/\nnode_modules/\n"
    )
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "bench"], cwd=root, check=True, env=env)
    return root


def progress(text: str) -> None:
    print(f"  … {text}", file=sys.stderr, flush=True)


def run_tasks(root: Path, loop: str = "warm") -> list[dict[str, float | str]]:
    """Run the loop once; per task: seconds to ready (from the log), pool and setup decision."""
    progress(f"loop {loop} of {root.name}")
    from loopctl.definitions import load_project
    from loopctl.engine.runner import Engine
    from loopctl.journal.events import EventLog
    from loopctl.journal.recorder import Recorder

    project = load_project(root)
    outcome = Engine(Recorder(project)).run_loop_once(project.loop(loop))
    assert outcome.ok, outcome
    events = [e for e in EventLog(project.paths.events_file).read() if e.loop == loop]
    found = {e.task: e.time for e in events if e.type == "task_found"}
    finished = [e for e in events if e.type == "task_finished"]
    found_list: list[dict[str, float | str]] = []
    previous: datetime | None = None
    for event in events:
        if event.type == "note" and event.data.get("what") == "workspace_ready":
            start = found[event.task]
            if previous is not None and previous > start:
                start = previous
            agent = next(e for e in events if e.type == "agent_started" and e.task == event.task)
            found_list.append(
                {
                    "task": event.task or "",
                    "ready_s": (event.time - start).total_seconds(),
                    # Then the turn's own steps (first check, integrity baseline, snapshot
                    # index): the same for any worktree, warm or not.
                    "agent_s": (agent.time - start).total_seconds(),
                    "took_s": float(event.data["took_s"]),
                    "pool": str(event.data.get("pool")),
                    "decision": str(event.data.get("decision", "none")),
                    "method": str(event.data.get("method") or ""),
                }
            )
            done = next(f for f in finished if f.task == event.task)
            previous = done.time
    return found_list


def bare_add(
    root: Path, target_root: Path, runs: int, name: str = "bare", *, remove: bool = True
) -> float:
    """Median seconds of `git worktree add` of the repository's HEAD (then removed, unless
    `remove` is False: the caller removes it once nothing else is timed)."""
    times = []
    for index in range(runs):
        target = target_root / f"{name}-{index}"
        os.sync()  # each add starts with nothing of the last one's writes still in flight
        start = time.perf_counter()
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(target), "HEAD"], cwd=root, check=True
        )
        times.append(time.perf_counter() - start)
        if remove:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(target)], cwd=root, check=True
            )
    return statistics.median(times)


def bare_setup(root: Path, target_root: Path, runs: int) -> tuple[float, int]:
    """Median seconds of `git worktree add` plus the setup run by hand; bytes of one such tree."""
    times = []
    used = 0
    for index in range(runs):
        target = target_root / f"by-hand-{index}"
        start = time.perf_counter()
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(target), "HEAD"], cwd=root, check=True
        )
        subprocess.run([sys.executable, "-c", INSTALL], cwd=target, check=True)
        times.append(time.perf_counter() - start)
        used = disk_used(target)
        subprocess.run(["git", "worktree", "remove", "--force", str(target)], cwd=root, check=True)
    return statistics.median(times), used


def disk_used(path: Path) -> int:
    from loopctl.seeds import tree_size

    return tree_size(path)[1]


def measure(files: int = 3000, tasks: int = 4, runs: int = 5) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        base = Path(tmp)
        os.environ["LOOPCTL_HOME"] = str(base / "home")
        targets = base / "home" / "worktrees" / "bare"  # where loopctl's worktrees go too
        targets.mkdir(parents=True)

        # (a) 3,000 files, no setup. A loop's first task (a pool miss) against a bare add,
        # taken in turns so that a busy moment of the machine weighs on both alike.
        plain = make_repo(base / "plain", files, setup=False, tasks=tasks, pool=True, firsts=runs)
        bares: list[float] = []
        firsts: list[float] = []
        to_agent: list[float] = []
        for index in range(runs):
            # Nothing is removed between the two (a removal's writes would land on the next
            # one timed), each starts with the disk's queue flushed, and which goes first
            # alternates, so that a disk slowing down or speeding up weighs on both alike.
            for which in ("bare", "loop") if index % 2 == 0 else ("loop", "bare"):
                if which == "bare":
                    bares.append(bare_add(plain, targets, 1, f"bare-{index}", remove=False))
                    continue
                os.sync()
                task = run_tasks(plain, f"first{index}")[0]
                firsts.append(float(task["ready_s"]))
                to_agent.append(float(task["agent_s"]))
        for index in range(runs):
            target = targets / f"bare-{index}-0"
            subprocess.run(["git", "worktree", "remove", "--force", str(target)], cwd=plain)
        pairs = [(round(b, 3), round(f, 3)) for b, f in zip(bares, firsts, strict=True)]
        progress(f"bare add and first task, in turns: {pairs}")
        bare = statistics.median(bares)
        first = statistics.median(firsts)
        pooled = run_tasks(plain)
        fresh = run_tasks(make_repo(base / "plain-fresh", files, setup=False, tasks=tasks,
                                    pool=False))  # fmt: skip
        later = statistics.median(float(t["ready_s"]) for t in pooled[1:])
        fresh_later = statistics.median(float(t["ready_s"]) for t in fresh[1:])
        hits = sum(t["pool"] == "hit" for t in pooled[1:])
        rows += [
            Row(
                f"workspace ready, {files} files: first task",
                first,
                "s",
                baseline=bare,
                goal="<= 1.1x",
                met=first <= 1.1 * bare,
                note=f"median of {runs} loops' first tasks, each next to a bare"
                f" `git worktree add` (the baseline, median of {runs}); the agent starts"
                f" {statistics.median(to_agent):.3f} s after the task is found (the turn's"
                f" own checks); without the pool the first task takes"
                f" {float(fresh[0]['ready_s']):.3f} s",
            ),
            Row(
                f"workspace ready, {files} files: later tasks (pooled)",
                later,
                "s",
                baseline=bare,
                goal="<= 0.5x",
                met=later <= 0.5 * bare,
                note=f"median of {tasks - 1} tasks, {hits} pool hits; without the pool the"
                f" engine takes {fresh_later:.3f} s",
            ),
        ]

        # (b) setup writes a 30,000-file dependency folder.
        deps = make_repo(base / "deps", files, setup=True, tasks=tasks, pool=True)
        progress("worktree add + setup by hand")
        by_hand, fresh_bytes = bare_setup(deps, targets, 2)
        warm = run_tasks(deps)
        deps_fresh = make_repo(base / "deps-fresh", files, setup=True, tasks=tasks, pool=False)
        seeded = run_tasks(deps_fresh)
        warm_later = statistics.median(float(t["ready_s"]) for t in warm[1:])
        seeded_later = statistics.median(float(t["ready_s"]) for t in seeded[1:])
        decisions = ", ".join(f"{t['pool']}/{t['decision']}" for t in warm)
        method = next((str(t["method"]) for t in seeded if t["method"]), "-")
        rows += [
            Row(
                "workspace ready, 30,000-file setup: first task",
                float(warm[0]["ready_s"]),
                "s",
                baseline=by_hand,
                note="runs setup and publishes the seed; baseline: worktree add + setup by hand",
            ),
            Row(
                "workspace ready, 30,000-file setup: later tasks (pooled)",
                warm_later,
                "s",
                baseline=by_hand,
                goal="<= 0.2x",
                met=warm_later <= 0.2 * by_hand,
                note=f"median of {tasks - 1}; pool/setup per task: {decisions}",
            ),
            Row(
                "workspace ready, 30,000-file setup: later tasks (no pool, seeded)",
                seeded_later,
                "s",
                baseline=by_hand,
                note=f"a new worktree each, dependencies from the seed by {method}",
            ),
        ]
        wt_root = base / "home" / "worktrees"
        pooled_bytes = [disk_used(p) for p in wt_root.glob("*/.pool/warm/idle/*")]
        seeds_bytes = disk_used(base / "home" / "seeds")
        rows.append(
            Row(
                "disk per extra worktree, 30,000-file setup",
                (max(pooled_bytes) if pooled_bytes else 0) / 1e6,
                "MB",
                baseline=fresh_bytes / 1e6,
                note=(
                    "a pooled worktree is reused, not added: sequential tasks need no extra one;"
                    f" a parallel one holds its own {method} of the seed; seeds hold"
                    f" {seeds_bytes / 1e6:.1f} MB once per inputs hash"
                ),
            )
        )
        shutil.rmtree(base / "home", ignore_errors=True)
    return rows


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print_rows(measure(tasks=args.tasks, runs=args.runs))
