"""Scheduling precision of `loopctl run --every 1s`, and the idle CPU of `loopctl up`.

Run: python bench/schedule_precision.py [--ticks 20] [--idle 30]

1. Lateness: `loopctl run beat --every 1s --max-ticks N+1` with an agent that returns at once;
   for each scheduled tick (the first, immediate one is left out), `tick_started` time minus its
   due time, both read back from the event log. Goal: median <= 50 ms, worst <= 250 ms.
2. Idle CPU: `loopctl up` with 5 loops (3 hourly, 1 nightly cron, 1 file watch) that do not
   fire during the window; the process's user+system CPU time over N seconds, as a percentage
   of one core. Goal: <= 1 %.
A benchmark, not a test: it prints figures and never fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

AGENT = """import pathlib, sys
sys.stdin.read()
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
"""
CHECK = """import pathlib, sys
sys.exit(0 if "a + b" in pathlib.Path("calc.py").read_text() else 1)
"""
LOOP = 'goal = "fixed"\nprompt = "Fix add() in calc.py"\n'


sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows  # noqa: E402


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_repo(parent: Path, loops: dict[str, str]) -> Path:
    root = parent / "repo"
    (root / "tools").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tools" / "agent.py").write_text(AGENT)
    (root / "tools" / "check.py").write_text(CHECK)
    (root / "agents").mkdir()
    (root / "agents" / "fixer.toml").write_text(
        f'backend = "command"\nargv = ["{sys.executable}", "tools/agent.py"]\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / ".loop" / "config.toml").write_text(
        '[defaults]\nmaker = "fixer"\n[worktree]\nkeep = "never"\n'
        f'[conditions]\nfixed = ["{sys.executable}", "tools/check.py"]\n'
    )
    for name, trigger in loops.items():
        (root / ".loop" / "loops" / f"{name}.toml").write_text(trigger + "\n" + LOOP)
    (root / ".gitignore").write_text(".loop/log/\n.loop/runs/\n.loop/locks/\n.loop/cache/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def read_events(root: Path) -> list[object]:
    from loopctl.journal.events import EventLog

    return list(EventLog(root / ".loop" / "log" / "events.jsonl").read())


def lateness(parent: Path, ticks: int) -> list[float]:
    root = make_repo(parent / "precision", {"beat": ""})
    argv = [sys.executable, "-m", "loopctl", "run", "beat", "--every", "1s"]
    done = subprocess.run(
        [*argv, "--max-ticks", str(ticks + 1)],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
    late: list[float] = []
    for event in read_events(root):
        data = getattr(event, "data", {})
        trigger = data.get("trigger") if getattr(event, "type", "") == "tick_started" else None
        if not trigger or trigger.get("fired") != "schedule":
            continue
        started = datetime.fromisoformat(event.ts)  # type: ignore[attr-defined]
        late.append((started - datetime.fromisoformat(trigger["due"])).total_seconds())
    return late


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def idle_cpu(parent: Path, seconds: float) -> float:
    root = make_repo(
        parent / "idle",
        {
            "hourly-a": 'every = "1h"',
            "hourly-b": 'every = "1h"\njitter = "5m"',
            "hourly-c": 'every = "1h"',
            "nightly": 'cron = "0 3 * * *"',
            "docs": 'watch = ["src/**"]',
        },
    )
    up = subprocess.Popen(
        [sys.executable, "-m", "loopctl", "up"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not any(getattr(e, "type", "") == "scheduler_started" for e in read_events(root)):
            if time.monotonic() > deadline or up.poll() is not None:
                raise SystemExit("loopctl up did not start")
            time.sleep(0.1)
        time.sleep(1.0)  # let start-up work settle before the window opens
        before, t0 = cpu_seconds(up.pid), time.monotonic()
        time.sleep(seconds)
        used, wall = cpu_seconds(up.pid) - before, time.monotonic() - t0
    finally:
        up.terminate()
        up.wait(30)
    return 100.0 * used / wall


def measure(ticks: int = 20, idle: float = 30.0) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        parent = Path(tmp)
        os.environ["LOOPCTL_HOME"] = str(parent / "home")
        late = lateness(parent, ticks)
        if late:
            median, worst = statistics.median(late) * 1000, max(late) * 1000
            rows.append(
                Row(
                    f"tick lateness, median over {len(late)} ticks of --every 1s",
                    median,
                    "ms",
                    goal="<= 50 ms",
                    met=median <= 50,
                )
            )
            rows.append(
                Row("tick lateness, worst", worst, "ms", goal="<= 250 ms", met=worst <= 250)
            )
        cpu = idle_cpu(parent, idle)
        rows.append(
            Row(
                f"idle CPU of `loopctl up`, 5 loops, {idle:g}s",
                cpu,
                "%",
                goal="<= 1 %",
                met=cpu <= 1,
            )
        )
    return rows  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle to measure")
    args = parser.parse_args()
    print_rows(measure(args.ticks, args.idle))


if __name__ == "__main__":
    main()
