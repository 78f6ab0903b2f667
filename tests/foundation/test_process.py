from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import SAFETY_NET

from loopctl.errors import LoopctlError
from loopctl.process import Completed, ProgramNotFound, run
from loopctl.secrets import REDACTED, Redactor

PROGRAMS = Path(__file__).parents[1] / "programs"
SLEEPY_TREE = str(PROGRAMS / "sleepy_tree.py")
SPLIT_SECRET = str(PROGRAMS / "split_secret.py")
PY = sys.executable
SECRET = "sk-live-0123456789abcdef"


@pytest.fixture
def env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath)}


def _is_gone(pid: int) -> bool:
    # Grandchildren are reparented to init (which in a container may never reap them), so a
    # zombie counts as gone: it runs nothing and holds nothing.
    proc = Path("/proc")
    if proc.is_dir():
        try:
            status = (proc / str(pid) / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return True
        state = next((line for line in status.splitlines() if line.startswith("State:")), "")
        return state.split()[1:2] in (["Z"], ["X"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _still_alive(pids: list[int], within: float = SAFETY_NET) -> list[int]:
    """The pids still running once they all died or `within` seconds passed (a safety net
    shorter than sleepy_tree's lifetimes, so a tree nobody killed is still found alive)."""
    deadline = time.monotonic() + within
    while True:
        alive = [pid for pid in pids if not _is_gone(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


@pytest.fixture
def pidfile(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pids.txt"
    yield path
    # Whatever a failing test left running must not outlive it.
    for pid in _read_pids(path) if path.exists() else []:
        if not _is_gone(pid):
            os.kill(pid, signal.SIGKILL)


def _read_pids(path: Path) -> list[int]:
    pids = [int(line) for line in path.read_text().split()]
    assert len(pids) == 3
    return pids


@pytest.fixture
def ready_fifo(tmp_path: Path) -> Path:
    """A FIFO that sleepy_tree's `notify` mode writes "ready" to once all three processes run."""
    fifo = tmp_path / "ready.fifo"
    os.mkfifo(fifo)
    return fifo


def _wait_for_tree(fifo: Path, within: float = SAFETY_NET) -> None:
    """Block until sleepy_tree reports its whole tree is up; fail the test if it never does."""
    # Opened read-write, so the FIFO has a writer (us) and select() cannot see EOF before the
    # tree writes; the tree's own open() for writing does not block either.
    fd = os.open(fifo, os.O_RDWR)
    try:
        readable, _, _ = select.select([fd], [], [], within)
        assert readable, f"the process tree did not come up within {within:g}s"
        assert os.read(fd, 64) == b"ready\n"
    finally:
        os.close(fd)


def test_exit_code_and_output_go_to_files_and_tails(tmp_path: Path, env: dict[str, str]) -> None:
    code = "import sys; print('to out'); print('to err', file=sys.stderr); sys.exit(3)"
    out, err = tmp_path / "logs" / "a" / "out.log", tmp_path / "logs" / "err.log"
    done = run([PY, "-c", code], cwd=tmp_path, env=env, stdout_path=out, stderr_path=err)
    assert done.exit_code == 3
    assert not done.ok
    assert not done.timed_out
    assert not done.interrupted
    assert done.argv == (PY, "-c", code)
    assert out.read_text() == "to out\n"
    assert err.read_text() == "to err\n"
    assert done.stdout_tail == "to out\n"
    assert done.stderr_tail == "to err\n"
    assert (done.stdout_path, done.stderr_path) == (out, err)
    # The duration is the program's run, measured around it: between its own sleep and ours.
    started = time.monotonic()
    slow = run([PY, "-c", "import time; time.sleep(0.3)"], cwd=tmp_path, env=env)
    outer = time.monotonic() - started
    assert 0.3 <= slow.duration_s <= outer


def test_success_runs_in_cwd_with_exactly_the_given_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEAKY_VARIABLE", "should-not-pass")
    code = "import os; print(os.getcwd()); print(sorted(os.environ))"
    work = tmp_path / "work"
    work.mkdir()
    done = run([PY, "-c", code], cwd=work, env={"ONLY": "this"})
    assert done.ok
    cwd_line, names_line = done.stdout_tail.splitlines()
    assert Path(cwd_line).resolve() == work.resolve()
    # CPython may add LC_CTYPE when coercing the C locale; nothing of ours may leak.
    assert "ONLY" in names_line
    assert "LEAKY_VARIABLE" not in names_line
    assert "PATH" not in names_line


def test_stdout_and_stderr_may_share_one_log(tmp_path: Path, env: dict[str, str]) -> None:
    code = "import sys; print('out', flush=True); print('err', file=sys.stderr, flush=True)"
    log = tmp_path / "both.log"
    run([PY, "-c", code], cwd=tmp_path, env=env, stdout_path=log, stderr_path=log)
    assert sorted(log.read_text().splitlines()) == ["err", "out"]


@pytest.mark.parametrize("stdin", ["héllo\nworld", "héllo\nworld".encode()])
def test_stdin_is_delivered(tmp_path: Path, env: dict[str, str], stdin: str | bytes) -> None:
    code = "import sys; sys.stdout.buffer.write(b'got:' + sys.stdin.buffer.read())"
    done = run([PY, "-c", code], cwd=tmp_path, env=env, stdin=stdin)
    assert done.stdout_tail == "got:héllo\nworld"


def test_without_stdin_the_program_sees_eof(tmp_path: Path, env: dict[str, str]) -> None:
    done = run([PY, "-c", "import sys; print(repr(sys.stdin.read()))"], cwd=tmp_path, env=env)
    assert done.stdout_tail == "''\n"


def test_unread_stdin_does_not_deadlock(tmp_path: Path, env: dict[str, str]) -> None:
    # The program fills its stdout pipe and exits without reading a byte of a stdin far larger
    # than any pipe buffer: writing stdin inline would block both sides.
    code = "import sys; sys.stdout.write('x' * 1_000_000); sys.exit(0)"
    done = run([PY, "-c", code], cwd=tmp_path, env=env, stdin=b"y" * 10_000_000)
    assert done.ok
    assert done.stdout_tail == "x" * 64_000


def test_timeout_kills_the_whole_group(
    pidfile: Path, ready_fifo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    # The timeout counts from the start, and on_start runs before the first check of it: waiting
    # there for the tree makes the timeout hit all three processes, however slow the machine
    # (three interpreters may take longer than the timeout to start).
    done = run(
        [PY, SLEEPY_TREE, str(pidfile), "notify", str(ready_fifo)],
        cwd=tmp_path,
        env=env,
        timeout=1,
        kill_grace=10,
        on_start=lambda _pid: _wait_for_tree(ready_fifo),
    )
    assert done.timed_out
    assert done.exit_code is None
    assert not done.ok
    assert done.stdout_tail == "tree up\n"
    assert _still_alive(_read_pids(pidfile)) == []


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(
    pidfile: Path, ready_fifo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    done = run(
        [PY, SLEEPY_TREE, str(pidfile), "stubborn", str(ready_fifo)],
        cwd=tmp_path,
        env=env,
        timeout=1,
        kill_grace=0.2,
        on_start=lambda _pid: _wait_for_tree(ready_fifo),
    )
    assert done.timed_out
    assert done.exit_code is None
    assert _still_alive(_read_pids(pidfile)) == []


def test_leftover_background_processes_are_killed_after_a_normal_exit(
    pidfile: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    done = run([PY, SLEEPY_TREE, str(pidfile), "exit"], cwd=tmp_path, env=env, timeout=30)
    assert done.ok
    assert not done.timed_out
    assert _still_alive(_read_pids(pidfile)) == []


def test_keyboard_interrupt_kills_the_group_and_propagates(
    pidfile: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    # The tree sends the SIGINT once it is up: that is the synchroniser. The timeout is only a
    # safety net (three interpreters starting on a loaded machine may take many seconds).
    with pytest.raises(KeyboardInterrupt):
        run([PY, SLEEPY_TREE, str(pidfile), "sigint"], cwd=tmp_path, env=env, timeout=SAFETY_NET)
    assert _still_alive(_read_pids(pidfile)) == []


def test_cancel_event_interrupts_the_run(
    pidfile: Path, ready_fifo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    cancel = threading.Event()

    def cancel_when_ready() -> None:
        _wait_for_tree(ready_fifo)
        cancel.set()

    watcher = threading.Thread(target=cancel_when_ready, daemon=True)
    watcher.start()
    done = run(
        [PY, SLEEPY_TREE, str(pidfile), "notify", str(ready_fifo)],
        cwd=tmp_path,
        env=env,
        timeout=60,
        cancel=cancel,
    )
    watcher.join()
    assert done.interrupted
    assert not done.timed_out
    assert done.exit_code is None
    assert _still_alive(_read_pids(pidfile)) == []


def test_secrets_are_redacted_in_logs_tails_and_argv(tmp_path: Path, env: dict[str, str]) -> None:
    code = "import sys; print('token is', sys.argv[1]); print(sys.argv[1], file=sys.stderr)"
    out, err = tmp_path / "out.log", tmp_path / "err.log"
    done = run(
        [PY, "-c", code, SECRET],
        cwd=tmp_path,
        env=env,
        stdout_path=out,
        stderr_path=err,
        redactor=Redactor([SECRET]),
    )
    assert out.read_text() == f"token is {REDACTED}\n"
    assert err.read_text() == f"{REDACTED}\n"
    assert done.stdout_tail == f"token is {REDACTED}\n"
    assert done.stderr_tail == f"{REDACTED}\n"
    assert SECRET not in done.output_tail()
    assert done.argv[-1] == REDACTED


def test_a_secret_split_across_writes_is_still_redacted(
    tmp_path: Path, env: dict[str, str]
) -> None:
    out = tmp_path / "out.log"
    done = run(
        [PY, SPLIT_SECRET, SECRET],
        cwd=tmp_path,
        env=env,
        stdout_path=out,
        redactor=Redactor([SECRET]),
    )
    assert out.read_text() == f"before {REDACTED} after\n"
    assert done.stdout_tail == f"before {REDACTED} after\n"


def test_an_unterminated_last_line_is_redacted_and_kept(
    tmp_path: Path, env: dict[str, str]
) -> None:
    code = "import sys; sys.stdout.write('first\\nlast ' + sys.argv[1])"
    out = tmp_path / "out.log"
    done = run(
        [PY, "-c", code, SECRET],
        cwd=tmp_path,
        env=env,
        stdout_path=out,
        redactor=Redactor([SECRET]),
    )
    assert out.read_text() == f"first\nlast {REDACTED}"
    assert done.stdout_tail == f"first\nlast {REDACTED}"


def test_huge_output_keeps_only_a_tail_in_memory(tmp_path: Path, env: dict[str, str]) -> None:
    code = (
        "import sys\nfor i in range(5 * 1024 * 1024 // 16):\n    sys.stdout.write(f'{i:015d}\\n')\n"
    )
    out = tmp_path / "out.log"
    done = run(
        [PY, "-c", code],
        cwd=tmp_path,
        env=env,
        stdout_path=out,
        tail_bytes=10_000,
        redactor=Redactor([SECRET]),
    )
    data = out.read_bytes()
    assert len(data) == 5 * 1024 * 1024
    assert len(done.stdout_tail) == 10_000
    assert data.endswith(done.stdout_tail.encode())


def test_a_long_line_without_newline_is_written_whole(tmp_path: Path, env: dict[str, str]) -> None:
    code = "import sys; sys.stdout.write('z' * 3_000_000)"
    out = tmp_path / "out.log"
    run(
        [PY, "-c", code],
        cwd=tmp_path,
        env=env,
        stdout_path=out,
        redactor=Redactor([SECRET]),
    )
    assert out.read_text() == "z" * 3_000_000


def test_missing_program_raises_program_not_found(tmp_path: Path) -> None:
    with pytest.raises(
        ProgramNotFound,
        match=r"^program not found: no-such-agent-cli \(is it installed and on PATH\?\)$",
    ):
        run(["no-such-agent-cli", "--help"], cwd=tmp_path, env={"PATH": str(tmp_path)})


def test_program_is_looked_up_on_the_given_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "my-agent"
    tool.write_text(f"#!{PY}\nimport sys\nprint('agent', sys.argv[1:])\n")
    tool.chmod(0o755)
    done = run(["my-agent", "go"], cwd=tmp_path, env={"PATH": str(bin_dir)})
    assert done.stdout_tail == "agent ['go']\n"
    # A relative path is taken from the program's working directory, as Popen does.
    done = run(["./my-agent", "again"], cwd=bin_dir, env={})
    assert done.stdout_tail == "agent ['again']\n"
    with pytest.raises(ProgramNotFound, match="my-agent"):
        run(["my-agent"], cwd=tmp_path, env={"PATH": str(tmp_path)})


def test_a_file_that_is_not_executable_is_not_a_program(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("print('hi')\n")
    with pytest.raises(ProgramNotFound, match=r"script\.py"):
        run(["./script.py"], cwd=tmp_path, env={})


def test_missing_working_directory_is_a_clear_error(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(LoopctlError, match="working directory does not exist"):
        run([PY, "-c", "pass"], cwd=tmp_path / "gone", env=env)


def _completed(out: str, err: str) -> Completed:
    return Completed(
        argv=("x",),
        exit_code=0,
        timed_out=False,
        interrupted=False,
        duration_s=0.0,
        stdout_path=None,
        stderr_path=None,
        stdout_tail=out,
        stderr_tail=err,
    )


@pytest.mark.parametrize(
    ("out", "err", "limit", "expected"),
    [
        ("out\n", "err\n", 100, "out\nerr\n"),
        ("out", "err", 100, "out\nerr"),
        ("", "err", 100, "err"),
        ("out", "", 100, "out"),
        ("a" * 10, "b" * 10, 8, "aaa\nbbbb"),
        ("a" * 2, "b" * 10, 8, "aa\nbbbbb"),
        ("a" * 10, "b" * 2, 8, "aaaaa\nbb"),
    ],
)
def test_output_tail_keeps_the_end_of_both_streams(
    out: str, err: str, limit: int, expected: str
) -> None:
    tail = _completed(out, err).output_tail(limit)
    assert tail == expected
    assert len(tail) <= limit


@pytest.mark.parametrize(
    ("exit_code", "timed_out", "ok"),
    [(0, False, True), (1, False, False), (None, True, False), (-9, False, False)],
)
def test_ok(exit_code: int | None, timed_out: bool, ok: bool) -> None:
    done = Completed(
        argv=("x",),
        exit_code=exit_code,
        timed_out=timed_out,
        interrupted=False,
        duration_s=0.0,
        stdout_path=None,
        stderr_path=None,
        stdout_tail="",
        stderr_tail="",
    )
    assert done.ok is ok


def test_a_capture_file_from_an_earlier_run_holds_only_this_runs_output(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A resumed attempt starts its program again with the same log file: what it prints must
    replace what the earlier, longer run left, not overwrite its start and keep its end."""
    log = tmp_path / "maker.out"
    run([PY, "-c", "print('an earlier and much longer run ' * 20)"], cwd=tmp_path, env=env,
        timeout=SAFETY_NET, stdout_path=log)  # fmt: skip

    run([PY, "-c", "print('short')"], cwd=tmp_path, env=env, timeout=SAFETY_NET, stdout_path=log)

    assert log.read_text() == "short\n"


def test_output_that_is_not_utf8_is_shown_with_replacements_not_a_traceback(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A Latin-1 compiler message, a binary dump: the tail a human and the event log read
    replaces what is not UTF-8; the log file keeps the bytes as they were."""
    log = tmp_path / "maker.out"
    script = "import sys; sys.stdout.buffer.write(b'caf\\xe9 \\xff\\n')"

    done = run([PY, "-c", script], cwd=tmp_path, env=env, timeout=SAFETY_NET, stdout_path=log)

    assert done.ok
    assert done.stdout_tail == "caf\ufffd \ufffd\n"
    assert log.read_bytes() == b"caf\xe9 \xff\n"
