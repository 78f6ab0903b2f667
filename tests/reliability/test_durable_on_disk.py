"""Invariant 1 below the process: every append and every atomic write is on disk before it is
reported (issue 27).

Killing a process cannot show a missing fsync: the page cache survives it, a power cut does not.
So these tests watch the system calls themselves. `strace` records what a real child does (and,
for `loopctl inbox approve`, what the real CLI does); each step must reach the disk in this order
before the program reports it:

    an append        write(log) → fsync(log) [→ fsync(log's folder) for a new log] → report
    an atomic write  write(tmp) → fsync(tmp) → rename(tmp, file) → fsync(file's folder) → report

Which holds here: a file system that really drops unsynced data (a loop device under
`dm-flakey`) needs root, `/dev/mapper` and the kernel's flakey target, which CI containers do not
have, so no test replays a power cut. The order of the calls is checked instead: under strace
when it is installed (the `strace` cases), and always one level up, by the child wrapping
`os.write`, `os.fsync` and `os.replace` itself (the `python` cases).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import loopctl_argv
from support.repos import make_project

from loopctl import load_project
from loopctl.journal.inbox import ItemKind
from loopctl.journal.recorder import Recorder

PROGRAM = Path(__file__).parents[1] / "programs" / "durable_writes.py"
STRACE = shutil.which("strace")
CALLS = "write,pwrite64,writev,fsync,fdatasync,rename,renameat,renameat2"
needs_strace = pytest.mark.skipif(
    STRACE is None, reason="strace is not installed: the python cases hold alone"
)


@dataclass(frozen=True)
class Op:
    """One call that decides durability: write, fsync, rename (path → to), or a report."""

    kind: str
    path: str = ""
    to: str = ""
    text: str = ""


# `strace -f -o FILE` starts each line with the pid.
_CALL = re.compile(r"^(?:\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)")
_FD = re.compile(r"^\d+<(.*?)>(?:, |$)")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_strace(text: str) -> list[Op]:
    """The writes, fsyncs and renames of an `strace -f -y` log; a write to a pipe is a report."""
    ops: list[Op] = []
    for line in text.splitlines():
        match = _CALL.match(line)
        if match is None or int(match.group(3)) < 0:
            continue  # a failed call, or a line strace split across threads
        name, args = match.group(1), match.group(2)
        if name.startswith("rename"):
            src, dst = _QUOTED.findall(args)[:2]
            ops.append(Op("rename", src, dst))
            continue
        fd = _FD.match(args)
        if fd is None:
            continue
        path, quoted = fd.group(1), _QUOTED.findall(args)
        if name in ("fsync", "fdatasync"):
            ops.append(Op("fsync", path))
        elif path.startswith(("pipe:", "/dev/")):
            ops.append(Op("report", text=quoted[0] if quoted else ""))
        else:
            ops.append(Op("write", path, text=quoted[0] if quoted else ""))
    return ops


def parse_record(text: str) -> list[Op]:
    """The JSON lines durable_writes.py records when it wraps the calls itself."""
    ops = []
    for line in text.splitlines():
        record = json.loads(line)
        ops.append(
            Op(record["op"], record.get("path", ""), record.get("to", ""), record.get("step", ""))
        )
    return ops


def durability_problems(ops: list[Op], under: Path) -> list[str]:
    """Everything a power cut right after a report could lose, for files under `under`."""
    root = str(under)
    problems: list[str] = []
    dirty: dict[str, None] = {}  # written since its last fsync
    synced: set[str] = set()  # fsynced since its last write
    folders: dict[str, str] = {}  # a folder whose new entry (a renamed file) is not fsynced yet
    for op in ops:
        if op.kind == "write" and op.path.startswith(root):
            dirty[op.path] = None
            synced.discard(op.path)
        elif op.kind == "fsync":
            dirty.pop(op.path, None)
            synced.add(op.path)
            folders.pop(op.path, None)
        elif op.kind == "rename" and op.to.startswith(root):
            if op.path not in synced:
                problems.append(f"{op.path} renamed to {op.to} before its data was fsynced")
            dirty.pop(op.path, None)
            folders[os.path.dirname(op.to)] = op.to
        elif op.kind == "report":
            what = op.text.strip()
            problems += [f"{what!r} reported while {path} holds unsynced writes" for path in dirty]
            problems += [
                f"{what!r} reported before {folder} was fsynced after {name} was renamed in"
                for folder, name in folders.items()
            ]
    return problems


def steps(ops: list[Op]) -> list[list[Op]]:
    """The calls each report closes, in order."""
    found: list[list[Op]] = [[]]
    for op in ops:
        found[-1].append(op)
        if op.kind == "report":
            found.append([])
    return found[:-1]


def _run_child(tmp_path: Path, tracer: str) -> list[Op]:
    folder = tmp_path / "project"
    if tracer == "strace":
        assert STRACE is not None
        trace = tmp_path / "strace.log"
        argv = [STRACE, "-f", "-y", "-qq", "-s", "200", "-o", str(trace), "-e", f"trace={CALLS}"]
        # Output to a pipe: a report is a write to a pipe, never to a file.
        done = subprocess.run(
            [*argv, sys.executable, str(PROGRAM), str(folder)], capture_output=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return parse_strace(trace.read_text())
    record = tmp_path / "calls.jsonl"
    done = subprocess.run(
        [sys.executable, str(PROGRAM), str(folder), str(record)], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return parse_record(record.read_text())


@pytest.mark.parametrize("tracer", [pytest.param("strace", marks=needs_strace), "python"])
def test_each_append_and_atomic_write_is_fsynced_before_it_is_reported(
    tmp_path: Path, tracer: str
) -> None:
    ops = _run_child(tmp_path, tracer)
    folder = (tmp_path / "project").resolve()
    log, state = folder / "log" / "events.jsonl", folder / "STATE.md"

    assert durability_problems(ops, folder) == []
    first, second, new, rewritten = steps(ops)
    for step in (first, second):
        kinds = [(op.kind, op.path) for op in step]
        # The record itself, then its fsync, then the report.
        assert kinds.index(("write", str(log))) < kinds.index(("fsync", str(log)))
    # A new log's name is in its folder only once the folder is synced too.
    assert ("fsync", str(log.parent)) in [(op.kind, op.path) for op in first]
    for step in (new, rewritten):
        (rename,) = [op for op in step if op.kind == "rename"]
        assert rename.to == str(state)
        order = [(op.kind, op.path) for op in step]
        assert order.index(("fsync", rename.path)) < order.index(("rename", rename.path))
        assert order.index(("rename", rename.path)) < order.index(("fsync", str(folder)))


def test_the_check_finds_a_missing_fsync(tmp_path: Path) -> None:
    log, tmp, state = (str(tmp_path / name) for name in ("events.jsonl", ".t.tmp", "STATE.md"))
    synced = [Op("write", log), Op("fsync", log), Op("report", text="ok")]
    assert durability_problems(synced, tmp_path) == []

    no_fsync = [Op("write", log), Op("report", text="appended")]
    renamed_raw = [Op("write", tmp), Op("rename", tmp, state), Op("fsync", str(tmp_path))]
    folder_unsynced = [Op("write", tmp), Op("fsync", tmp), Op("rename", tmp, state), Op("report")]

    assert durability_problems(no_fsync, tmp_path) == [
        f"'appended' reported while {log} holds unsynced writes"
    ]
    assert durability_problems(renamed_raw, tmp_path) == [
        f"{tmp} renamed to {state} before its data was fsynced"
    ]
    assert durability_problems(folder_unsynced, tmp_path) == [
        f"'' reported before {tmp_path} was fsynced after {state} was renamed in"
    ]


@needs_strace
def test_an_approval_is_on_disk_before_inbox_approve_says_so(repo: Path, tmp_path: Path) -> None:
    make_project(repo, "fixer.py")
    recorder = Recorder(load_project(repo))
    item = recorder.open_item(ItemKind.APPROVAL, "push?", {}, run="r1", loop="fix", task="t")
    assert item is not None
    trace = tmp_path / "strace.log"
    argv = [str(STRACE), "-f", "-y", "-qq", "-s", "4096", "-o", str(trace), "-e", f"trace={CALLS}"]

    done = subprocess.run(
        [*argv, *loopctl_argv("inbox", "approve", item)],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    ops = parse_strace(trace.read_text())
    loop_dir = (repo / ".loop").resolve()
    log = str(loop_dir / "log" / "events.jsonl")
    assert durability_problems(ops, loop_dir) == []
    # Nothing is said before the approved record is written and synced.
    said = next(i for i, op in enumerate(ops) if op.kind == "report" and op.text)
    written = next(
        i
        for i, op in enumerate(ops)
        if (op.kind, op.path) == ("write", log) and '\\"type\\": \\"approved\\"' in op.text
    )
    synced = next(i for i, op in enumerate(ops) if i > written and op == Op("fsync", log))
    assert written < synced < said
    approved = [e for e in recorder.log.read() if e.type == "approved"]
    assert [e.data.get("id") for e in approved] == [item]
