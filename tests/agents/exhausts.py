"""A maker that uses up one resource until something stops it: argv MODE [LOG].

- `memory`: allocates (and touches) 16 MiB at a time, without end;
- `forks`: starts children that wait, one after another, retrying when a fork is refused; each
  child appends its pid to LOG, so the host can count how many ever ran at once;
- `cpu`: spins;
- `disk`: writes 1 MiB files into the worktree, up to 64 MiB, then waits to be stopped;
- `bigfile`: writes one file in the worktree, without end.

It never finishes its turn by itself before the 60 s its wait allows: a turn that ends sooner
was ended by a limit (or by an error the test then sees in its output).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

CHUNK = 16 * 1024 * 1024
WAIT = 60.0


def memory() -> None:
    held = []
    while True:
        held.append(bytearray(b"x" * CHUNK))
        print(f"holding {len(held) * 16} MiB", flush=True)


def forks(log: Path) -> None:
    started = 0
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            pid = os.fork()
        except OSError as exc:
            print(f"fork refused after {started}: {exc}", flush=True)
            time.sleep(0.01)
            continue
        if pid == 0:
            with log.open("a") as handle:
                handle.write(f"{os.getpid()}\n")
            time.sleep(WAIT)
            os._exit(0)
        started += 1


def cpu() -> None:
    while True:
        pass


def disk() -> None:
    folder = Path("fill")
    folder.mkdir(exist_ok=True)
    block = os.urandom(1024 * 1024)
    for number in range(64):
        with (folder / f"{number:04d}").open("wb") as handle:
            handle.write(block)
            handle.flush()
            os.fsync(handle.fileno())
    time.sleep(WAIT)


def bigfile() -> None:
    block = os.urandom(1024 * 1024)
    with open("big.bin", "wb") as handle:
        while True:
            handle.write(block)
            handle.flush()


def main() -> None:
    mode = sys.argv[1]
    if not sys.stdin.isatty():
        sys.stdin.read()
    print(f"exhausting {mode}", flush=True)
    if mode == "memory":
        memory()
    elif mode == "forks":
        forks(Path(sys.argv[2]))
    elif mode == "cpu":
        cpu()
    elif mode == "disk":
        disk()
    elif mode == "bigfile":
        bigfile()


if __name__ == "__main__":
    main()
