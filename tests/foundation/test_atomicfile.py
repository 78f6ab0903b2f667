"""Whole-file writes and the sweep of what killed writers left (the fsync order itself is in
tests/reliability/test_durable_on_disk.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.outside_tmp import Place

from loopctl.atomicfile import fsync_dir, sweep_temp_files, write_atomic

PY = sys.executable


@pytest.fixture
def live_writer() -> Iterator[subprocess.Popen[bytes]]:
    """Another process that runs until the test ends (a writer still writing); it answers
    each line it reads, so a test can ask whether it still lives."""
    code = "import sys\nfor line in sys.stdin: print(line, end='', flush=True)"
    proc = subprocess.Popen([PY, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait()


def _answers(proc: subprocess.Popen[bytes]) -> bool:
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(b"still there?\n")
        proc.stdin.flush()
    except BrokenPipeError:
        return False
    return proc.stdout.readline() == b"still there?\n"


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has ended and been reaped (a writer killed mid-write)."""
    child = subprocess.Popen([PY, "-c", "pass"])
    child.wait()
    return child.pid


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_write_lands_whole_with_its_mode_in_a_new_folder(tmp_path: Path) -> None:
    target = tmp_path / "new" / "folder" / "STATE.md"

    write_atomic(target, "état ✓\n")
    write_atomic(tmp_path / "secret", b"\x00\xff", mode=0o600)

    assert target.read_bytes() == "état ✓\n".encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert (tmp_path / "secret").read_bytes() == b"\x00\xff"
    assert stat.S_IMODE((tmp_path / "secret").stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["STATE.md"]


def test_a_rewrite_replaces_the_file_and_leaves_no_temp_file_or_descriptor(
    tmp_path: Path,
) -> None:
    target = tmp_path / "INBOX.md"
    write_atomic(target, "first, and longer\n")
    before = _open_fds()

    write_atomic(target, "second\n")

    assert target.read_text() == "second\n"
    assert [p.name for p in tmp_path.iterdir()] == ["INBOX.md"]
    assert _open_fds() == before


def test_a_failed_write_removes_its_temp_file(tmp_path: Path) -> None:
    # A folder where the file should be: the rename fails after the temp file was written.
    (tmp_path / "STATE.md").mkdir()

    with pytest.raises(IsADirectoryError):
        write_atomic(tmp_path / "STATE.md", "text\n")

    assert [p.name for p in tmp_path.iterdir()] == ["STATE.md"]


def test_the_sweep_removes_only_dead_writers_leftovers(
    tmp_path: Path, live_writer: subprocess.Popen[bytes], dead_pid: int
) -> None:
    # Several of each, so that the order the folder lists them in cannot hide a sweep that
    # stops at the first live writer's file.
    dead = [tmp_path / f".loopctl-{dead_pid}-a{n}.tmp" for n in range(5)]
    older = tmp_path / ".loopctl-a1b2c3.tmp"  # an older loopctl named no writer
    live = [tmp_path / f".loopctl-{live_writer.pid}-c{n}.tmp" for n in range(5)]
    mine = tmp_path / f".loopctl-{os.getpid()}-e5f6.tmp"
    # The user's own files, whatever they look like, are never loopctl's to remove.
    theirs = [
        tmp_path / n for n in ("notes.tmp", "loopctl-1-x.tmp", ".loopctl-notes", ".loopctl-1")
    ]
    for path in (*dead, older, *live, mine, *theirs):
        path.write_text("half a file")

    removed = sweep_temp_files(tmp_path)

    assert removed == 6
    assert [path for path in (*dead, older) if path.exists()] == []
    assert all(path.exists() for path in (*live, mine, *theirs))
    # Asking whether a writer lives must not signal it (kill(pid, 1) would hang it up).
    assert _answers(live_writer)


def test_a_writer_of_another_user_counts_as_alive(tmp_path: Path) -> None:
    # kill(pid, 0) on another user's process fails with EPERM: it exists, so its file stays.
    shared = Path(tempfile.mkdtemp(prefix="loopctl-sweep-"))
    try:
        shared.chmod(0o777)
        owner = 1 if os.geteuid() != 0 else os.getpid()  # init, or this root process
        theirs = shared / f".loopctl-{owner}-x.tmp"
        theirs.write_text("being written")
        code = (
            "import os, sys; from pathlib import Path;"
            "from loopctl.atomicfile import sweep_temp_files;"
            "os.geteuid() == 0 and (os.setgid(65534), os.setuid(65534));"
            "print(sweep_temp_files(Path(sys.argv[1])))"
        )
        done = subprocess.run(
            [PY, "-c", code, str(shared)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == "0\n"
        assert theirs.exists()
    finally:
        shutil.rmtree(shared)


def test_the_sweep_of_a_missing_folder_removes_nothing(tmp_path: Path) -> None:
    assert sweep_temp_files(tmp_path / "absent") == 0


def test_a_folder_that_cannot_be_opened_or_synced_is_no_error(tmp_path: Path) -> None:
    # Some file systems refuse a folder's fsync (EINVAL, as /proc does); the data is synced,
    # and a write must not fail on the folder's flush alone.
    fsync_dir(tmp_path / "absent")
    fsync_dir(Path("/proc"))


def test_a_writer_killed_before_its_rename_leaves_the_old_file_and_a_leftover_the_sweep_takes(
    place: Place,
) -> None:
    """A real writer dies (SIGKILL) between writing its temp file and renaming it: the file it
    replaced is whole, and what it left is in the same folder, named so the next sweep removes
    it (not in /tmp, nor under a name no sweep looks for)."""
    folder = place.base / "repo" / ".loop"
    target = folder / "STATE.md"
    write_atomic(target, "before\n")
    code = (
        "import os, signal, sys; from pathlib import Path; import loopctl.atomicfile as a;"
        "a.os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL);"
        "a.write_atomic(Path(sys.argv[1]), 'after\\n')"
    )

    died = subprocess.run([PY, "-c", code, str(target)], check=False, capture_output=True)

    assert died.returncode == -9, died.stderr
    assert target.read_text() == "before\n"
    (leftover,) = [p for p in folder.iterdir() if p != target]
    assert leftover.read_text() == "after\n"
    assert sweep_temp_files(folder) == 1
    assert list(folder.iterdir()) == [target]
