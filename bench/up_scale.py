"""`loopctl up` carrying many loops: idle CPU, and ticks with nothing to do (issue 30, item 7).

Run: python bench/up_scale.py [--idle 15] [--busy 65] [--loops 100] [--many 1000]

Each loop's task source is a command that finds nothing (`true`: no output, no task), so a tick
is only loopctl's own work: deciding, recording, projecting. Measured on a real `loopctl up`
process (user + system CPU of it and of the programs it waited for, from /proc):

- baseline: `up` with ONE loop every 30 s, in the same run: its CPU while idle (before its first
  slot), then its CPU, resident memory and tick lateness over the busy window;
- `--loops` loops every hour: idle CPU (goal <= 0.5 % of a core);
- `--many` loops every hour: idle CPU (goal <= 1 %);
- `--loops` loops every 30 s, all due at the same slot: CPU over the busy window (goal <= 5 %),
  resident memory at its end (goal <= 150 MB) and each tick's start after its due time, the
  slot plus the loop's recorded spread (`delay` in its trigger), p99 (goal <= 1 s).

A benchmark, not a test: it prints figures and never fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows

AGENT = "import sys\nsys.stdin.read()\n"
# A task source that finds nothing: no output is no task.
LOOP = '[tasks]\ncommand = ["true"]\nid = "t-{n}"\nprompt = "Work on {n}"\n'


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def make_repo(root: Path, loops: int, every: str) -> Path:
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = ["{sys.executable}", "agent.py"]\n'
    )
    (root / "agent.py").write_text(AGENT)
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / ".loop" / "config.toml").write_text('[defaults]\nmaker = "maker"\n')
    for index in range(loops):
        path = root / ".loop" / "loops" / f"loop-{index:04d}.toml"
        path.write_text(f'every = "{every}"\n{LOOP}')
    (root / ".gitignore").write_text(".loop/log/\n.loop/runs/\n.loop/locks/\n.loop/cache/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and of the children it waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def events_of(root: Path) -> list[object]:
    from loopctl.journal.events import EventLog

    return list(EventLog(root / ".loop" / "log" / "events.jsonl").read())


@dataclass
class Measured:
    idle_cpu: float = 0.0  # % of a core
    busy_cpu: float = 0.0
    rss: float = 0.0  # MB at the end of the busy window
    late: list[float] = field(default_factory=list)  # s, each scheduled tick's start after due
    ticks: int = 0


def window(pid: int, seconds: float) -> float:
    before, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (cpu_seconds(pid) - before) / (time.monotonic() - t0)


def run_up(root: Path, idle: float, busy: float) -> Measured:
    """Start `up`; measure `idle` seconds from 2 s after it started, then (busy > 0) from 25 s
    after it started (the first 30 s slot) for `busy` seconds."""
    found = Measured()
    up = subprocess.Popen(
        [sys.executable, "-m", "loopctl", "up"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(getattr(e, "type", "") == "scheduler_started" for e in events_of(root)):
            if time.monotonic() > deadline or up.poll() is not None:
                raise SystemExit("loopctl up did not start")
            time.sleep(0.2)
        started = time.monotonic()
        time.sleep(2.0)  # start-up work settles
        found.idle_cpu = window(up.pid, idle)
        if busy > 0:
            time.sleep(max(0.0, started + 25 - time.monotonic()))
            found.busy_cpu = window(up.pid, busy)
            found.rss = rss_mb(up.pid)
    finally:
        up.terminate()
        up.wait(60)
    for event in events_of(root):
        data = getattr(event, "data", {})
        trigger = data.get("trigger") if getattr(event, "type", "") == "tick_started" else None
        if not trigger or trigger.get("fired") not in ("schedule", "catch-up"):
            continue
        due = datetime.fromisoformat(trigger["due"]) + timedelta(
            seconds=float(trigger.get("delay", 0.0))
        )
        started_at = datetime.fromisoformat(event.ts)  # type: ignore[attr-defined]
        found.late.append((started_at - due).total_seconds())
    found.ticks = len(found.late)
    return found


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0


def measure(
    idle: float = 15.0, busy: float = 65.0, loops: int = 100, many: int = 1000
) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        parent = Path(tmp)
        os.environ["LOOPCTL_HOME"] = str(parent / "home")
        one = run_up(make_repo(parent / "one", 1, "30s"), idle, busy)
        idle_loops = run_up(make_repo(parent / "idle", loops, "1h"), idle, 0)
        idle_many = run_up(make_repo(parent / "many", many, "1h"), idle, 0)
        ticking = run_up(make_repo(parent / "busy", loops, "30s"), idle, busy)
    base = "baseline: `up` with one loop every 30 s, same run"
    rows.append(
        Row(
            f"up, {loops} loops idle: CPU",
            idle_loops.idle_cpu,
            "%",
            baseline=one.idle_cpu or None,
            goal="<= 0.5 %",
            met=idle_loops.idle_cpu <= 0.5,
            note=f"{base}; {idle:g} s",
        )
    )
    rows.append(
        Row(
            f"up, {many} loops idle: CPU",
            idle_many.idle_cpu,
            "%",
            baseline=one.idle_cpu or None,
            goal="<= 1 %",
            met=idle_many.idle_cpu <= 1,
            note=f"{base}; {idle:g} s",
        )
    )
    rows.append(
        Row(
            f"up, {loops} loops every 30 s, nothing to do: CPU",
            ticking.busy_cpu,
            "%",
            baseline=one.busy_cpu or None,
            goal="<= 5 %",
            met=ticking.busy_cpu <= 5,
            note=f"{ticking.ticks} ticks in {busy:g} s",
        )
    )
    rows.append(
        Row(
            f"up, {loops} loops every 30 s: resident memory",
            ticking.rss,
            "MB",
            baseline=one.rss or None,
            goal="<= 150 MB",
            met=ticking.rss <= 150,
            note="at the end of the window",
        )
    )
    late = p99(ticking.late)
    rows.append(
        Row(
            f"up, {loops} loops every 30 s: tick start after due, p99",
            late,
            "s",
            baseline=p99(one.late) or None,
            goal="<= 1 s",
            met=late <= 1,
            note=f"worst {max(ticking.late, default=0):.3f} s; due = slot + spread",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=15.0, help="seconds of idle measured")
    parser.add_argument("--busy", type=float, default=65.0, help="seconds of ticking measured")
    parser.add_argument("--loops", type=int, default=100)
    parser.add_argument("--many", type=int, default=1000)
    args = parser.parse_args()
    print_rows(measure(args.idle, args.busy, args.loops, args.many))


if __name__ == "__main__":
    main()
