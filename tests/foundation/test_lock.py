from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.processes import read_line

from loopctl import lock as lock_module
from loopctl.errors import LockHeld
from loopctl.lock import RunnerLock, lock_path, read_holder

REPO = Path(lock_module.__file__).resolve().parents[1]

# Takes the lock when told to on stdin, reports WON or HELD, then holds until stdin closes.
_CHILD = """
import sys
from pathlib import Path
from typing import Any
from loopctl.errors import LockHeld
from loopctl.lock import RunnerLock
lock = RunnerLock(Path(sys.argv[1]), sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()
try:
    lock.acquire()
except LockHeld as exc:
    print("HELD", exc, flush=True)
else:
    print("WON", flush=True)
sys.stdin.read()
"""


def _spawn(locks_dir: Path, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(locks_dir), name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _go(child: subprocess.Popen[bytes]) -> None:
    assert child.stdin is not None
    child.stdin.write(b"go\n")
    child.stdin.flush()


def _finish(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        assert child.stdin is not None
        child.stdin.close()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process holding the lock of loop 'babysit' in tmp_path/locks."""
    child = _spawn(tmp_path / "locks", "babysit")
    try:
        assert read_line(child) == "ready"
        _go(child)
        assert read_line(child) == "WON"
        yield child
    finally:
        _finish(child)


def test_a_second_runner_is_refused_naming_the_holder(
    tmp_path: Path, holder: subprocess.Popen[bytes]
) -> None:
    with pytest.raises(LockHeld) as caught:
        RunnerLock(tmp_path / "locks", "babysit").acquire()

    message = str(caught.value)
    assert message.startswith(f"loop 'babysit' is already running (pid {holder.pid} on ")
    assert socket.gethostname() in message
    assert message.endswith("); stop it first or wait for it to finish")


def test_read_holder_reports_the_live_holder(
    tmp_path: Path, holder: subprocess.Popen[bytes]
) -> None:
    info = read_holder(tmp_path / "locks", "babysit")

    assert info is not None
    assert info["pid"] == holder.pid
    assert info["host"] == socket.gethostname()
    assert info["since"].endswith("Z")
    assert info["argv"][0] == "-c"


def test_a_lock_left_by_a_killed_holder_is_taken_over_at_once(
    tmp_path: Path, holder: subprocess.Popen[bytes]
) -> None:
    locks = tmp_path / "locks"
    assert read_holder(locks, "babysit") is not None

    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)

    assert read_holder(locks, "babysit") is None
    with RunnerLock(locks, "babysit") as taken:
        info = read_holder(locks, "babysit")
        assert info is not None
        assert info["pid"] == os.getpid()
        assert taken.held


def test_twenty_racing_processes_elect_exactly_one_runner(tmp_path: Path) -> None:
    children = [_spawn(tmp_path / "locks", "race") for _ in range(20)]
    try:
        for child in children:
            assert read_line(child) == "ready"
        for child in children:
            _go(child)
        results = [read_line(child) for child in children]
    finally:
        for child in children:
            _finish(child)

    winners = [result for result in results if result == "WON"]
    assert len(winners) == 1, results
    assert sum(result.startswith("HELD loop 'race' is already running") for result in results) == 19


def test_release_lets_the_next_runner_in(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    first = RunnerLock(locks, "babysit")
    first.acquire()
    with pytest.raises(LockHeld, match=f"pid {os.getpid()} "):
        RunnerLock(locks, "babysit").acquire()

    first.release()

    assert read_holder(locks, "babysit") is None
    assert first.path.exists()  # released, not unlinked
    with RunnerLock(locks, "babysit") as second:
        assert second.held
    assert not second.held


def test_a_child_process_can_take_a_lock_this_process_released(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    with RunnerLock(locks, "babysit"):
        pass
    child = _spawn(locks, "babysit")
    try:
        assert read_line(child) == "ready"
        _go(child)
        assert read_line(child) == "WON"
    finally:
        _finish(child)


def test_different_loops_do_not_block_each_other(tmp_path: Path) -> None:
    with RunnerLock(tmp_path, "a"):
        # Another process takes loop b's lock while this one holds loop a's.
        child = _spawn(tmp_path, "b")
        try:
            assert read_line(child) == "ready"
            _go(child)
            assert read_line(child) == "WON"
            held_a, held_b = read_holder(tmp_path, "a"), read_holder(tmp_path, "b")
            assert held_a is not None
            assert held_a["pid"] == os.getpid()
            assert held_b is not None
            assert held_b["pid"] == child.pid
        finally:
            _finish(child)
        assert read_holder(tmp_path, "b") is None  # released when the child ended
        assert read_holder(tmp_path, "a") is not None
    assert read_holder(tmp_path, "a") is None


def test_the_holder_file_records_pid_host_since_and_argv(tmp_path: Path) -> None:
    with RunnerLock(tmp_path, "babysit") as taken:
        info = json.loads(taken.path.read_text())

    assert info["pid"] == os.getpid()
    assert info["host"] == socket.gethostname()
    assert info["argv"] == sys.argv
    assert info["since"].endswith("Z")
    assert taken.path.read_text() == ""  # cleared on release: no stale pid to mislead


def test_read_holder_of_a_never_locked_loop_is_none(tmp_path: Path) -> None:
    assert read_holder(tmp_path / "missing", "babysit") is None
    RunnerLock(tmp_path, "babysit").release()  # releasing an unheld lock is harmless
    assert read_holder(tmp_path, "babysit") is None


def test_acquiring_twice_on_one_object_is_a_bug(tmp_path: Path) -> None:
    with RunnerLock(tmp_path, "babysit") as taken, pytest.raises(RuntimeError):
        taken.acquire()


@pytest.mark.parametrize(
    "name",
    [
        "../escape",
        "../../etc/passwd",
        "/abs/path",
        "a/b",
        "..",
        ".",
        ".hidden",
        "",
        "name with spaces",
        "ünïcode",
        "nul\x00byte",
        "x" * 300,
        "-leading-dash",
    ],
)
def test_hostile_names_stay_inside_locks_dir(tmp_path: Path, name: str) -> None:
    locks = tmp_path / "sandbox" / "locks"

    with RunnerLock(locks, name) as taken:
        assert taken.path.parent == locks
        assert [entry.name for entry in locks.iterdir()] == [taken.path.name]
        assert taken.path.name.endswith(".lock")
        assert not taken.path.name.startswith(".")
        assert read_holder(locks, name) is not None
        with pytest.raises(LockHeld, match="is already running"):
            RunnerLock(locks, name).acquire()
    assert sorted(p.name for p in (tmp_path / "sandbox").iterdir()) == ["locks"]


def test_sanitised_names_do_not_collide(tmp_path: Path) -> None:
    names = ["a/b", "a_b", "a b", "a:b"]

    paths = {lock_path(tmp_path, name) for name in names}

    assert len(paths) == len(names)
    assert lock_path(tmp_path, "babysit") == tmp_path / "babysit.lock"
    assert lock_path(tmp_path, "fix-ci_2.v1") == tmp_path / "fix-ci_2.v1.lock"


def test_a_symlink_at_the_lock_path_is_not_followed(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    locks.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (locks / "babysit.lock").symlink_to(target)

    with pytest.raises(OSError, match="symbolic links"):
        RunnerLock(locks, "babysit").acquire()
    assert target.read_text() == "keep me"


@pytest.mark.parametrize(
    ("held", "loop"),
    [
        (lambda d: lock_module.inbox_lock(d), "inbox"),
        (lambda d: lock_module.short_lock(d, lock_module.WORKTREES_LOCK), "worktrees"),
        (lambda d: lock_module.short_lock(d, lock_module.STATE_SYNC_LOCK), "state-sync"),
    ],
)
def test_a_loop_named_like_an_internal_lock_never_shares_its_file(
    tmp_path: Path, held: Any, loop: str
) -> None:
    # flock conflicts between two descriptors of one file even in one process, so a shared
    # file would make the loop's own lock refuse while an inbox decision is being recorded.
    with held(tmp_path):
        runner = RunnerLock(tmp_path, loop)
        runner.acquire()
        assert runner.held
        runner.release()
    assert lock_path(tmp_path, loop) != lock_path(tmp_path, lock_module.INBOX_LOCK)
