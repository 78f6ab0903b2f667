"""Event log throughput: append and full replay, against a bare `json.loads` loop.

Run: python bench/events_throughput.py [--events 20000]
Replay = EventLog.read() (checksums verified) + history.fold(); baseline = json.loads of every
line of the same file. Goal: replay throughput >= 1x the bare loop.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows


def measure(events: int = 20000) -> list[Row]:
    from loopctl.journal import history
    from loopctl.journal.events import EventLog, EventType

    with tempfile.TemporaryDirectory() as tmp:
        log = EventLog(Path(tmp) / "events.jsonl")
        start = time.perf_counter()
        for n in range(events):
            log.append(
                EventType.AGENT_FINISHED,
                run="r1",
                loop="bench",
                task=f"t{n % 50}",
                data={
                    "attempt": n % 5 + 1,
                    "input_tokens": 100,
                    "output_tokens": 20,
                    "text": "x" * 200,
                },
            )
        append_s = time.perf_counter() - start
        raw = log.path.read_bytes()

        def bare() -> None:
            for line in raw.splitlines():
                json.loads(line)

        def replay() -> None:
            # A fresh reader each time: one EventLog remembers what it read and parses only
            # new bytes, which would measure nothing here.
            history.fold(EventLog(log.path).read())

        # Medians of repeated, interleaved runs: the machine's noise hits both sides alike.
        bare_times, replay_times = [], []
        for _ in range(7):
            for work, times in ((bare, bare_times), (replay, replay_times)):
                start = time.perf_counter()
                work()
                times.append(time.perf_counter() - start)
        bare_s, replay_s = statistics.median(bare_times), statistics.median(replay_times)
    return [
        Row(
            f"event append (fsync each), {events} events",
            events / append_s,
            "events/s",
            note="durable appends",
        ),
        Row(
            f"full replay of {events} events vs bare json.loads",
            events / replay_s,
            "events/s",
            baseline=events / bare_s,
            goal=">= 1x",
            met=(bare_s / replay_s) >= 1.0,
        ),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20000)
    print_rows(measure(parser.parse_args().events))
