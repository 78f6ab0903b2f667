"""`loopctl spend --since 30d` over a 100,000-event log, against the log's full replay.

Run: python bench/spend_scale.py [--events 100000]
Spend = the whole command in-process (repository root, a fresh EventLog read with checksums,
grouping, the table); replay = a fresh EventLog read + history.fold(), as in
events_throughput. 60 days of events, about a quarter of them agent calls. Goal: spend <= 2x replay.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, at_most, print_rows


def _write_log(path: Path, events: int) -> None:
    """A log in EventLog's own line format, made in one go (100,000 fsynced appends take
    minutes); the records are what the engine writes, the reader verifies every checksum."""
    from loopctl.journal.events import FORMAT_VERSION, EventType, _encode

    start = datetime.now(UTC) - timedelta(days=60)
    step = timedelta(days=60) / events
    kinds = [EventType.ATTEMPT_STARTED, EventType.AGENT_FINISHED, EventType.ATTEMPT_FINISHED]
    lines = []
    for n in range(events):
        kind = kinds[n % 3] if n % 5 else EventType.TICK_STARTED
        data: dict[str, object] = {"attempt": n % 3 + 1}
        if kind == EventType.AGENT_FINISHED:
            data |= {"backend": "claude", "input_tokens": 900, "output_tokens": 100}
            data |= {"cost_usd": 0.01, "summary": "x" * 200}
        record = {
            "v": FORMAT_VERSION,
            "seq": n + 1,
            "ts": (start + step * n).isoformat(timespec="microseconds"),
            "type": str(kind),
            "run": f"r{n // 50}",
            "loop": f"loop{n % 7}",
            "task": f"t{n % 11}",
            "data": data,
        }
        lines.append(_encode(record))
    path.write_bytes(b"".join(lines))


def measure(events: int = 100_000) -> list[Row]:
    from loopctl.cli.app import app
    from loopctl.journal import history
    from loopctl.journal.events import EventLog
    from loopctl.paths import ProjectPaths

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        log_path = ProjectPaths(root).events_file
        log_path.parent.mkdir(parents=True)
        _write_log(log_path, events)
        assert len(EventLog(log_path).read()) == events

        def replay() -> None:
            history.fold(EventLog(log_path).read())

        def spend() -> None:
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    app(args=["spend", "--since", "30d", "--by", "loop"], prog_name="loopctl")
                except SystemExit as done:
                    if done.code:
                        raise RuntimeError(f"spend exited {done.code}") from None

        here = os.getcwd()
        os.chdir(root)
        try:
            spend()  # imports and the local time zone, once, as replay's imports are warm
            replay_times, spend_times = [], []
            for _ in range(5):
                for work, times in ((replay, replay_times), (spend, spend_times)):
                    start = time.perf_counter()
                    work()
                    times.append(time.perf_counter() - start)
        finally:
            os.chdir(here)
    replay_s, spend_s = statistics.median(replay_times), statistics.median(spend_times)
    return [
        Row(
            f"spend --since 30d, {events} events vs replay",
            spend_s * 1000,
            "ms",
            baseline=replay_s * 1000,
            goal="<= 2x",
            met=at_most(spend_s / replay_s, 2.0),
            note="in-process; replay = read + history.fold",
        )
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    print_rows(measure(parser.parse_args().events))
