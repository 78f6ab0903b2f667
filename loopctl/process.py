"""The only way loopctl starts a program: argv in, Completed out, the whole process group reaped."""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from loopctl import egress_proxy, limits, syscall_filter
from loopctl.errors import LoopctlError
from loopctl.idle import IdleClock, IdleLimit
from loopctl.secrets import REDACTED, Redactor, masked_regions
from loopctl.text import strip_controls

if TYPE_CHECKING:
    from loopctl.sandbox import Sandbox

_READ_SIZE = 64 * 1024
# What a capture file keeps of its output: the first and the last bytes, with a note of how
# many were cut between them. A program printing without end must not fill the disk (one
# attempt's maker.out once reached 2 GiB); the head shows how it started, the tail how it ended.
CAPTURE_HEAD_BYTES = 4 * 1024 * 1024
CAPTURE_TAIL_BYTES = 4 * 1024 * 1024
_CUT_NOTE = (
    "\n[loopctl: {cut} bytes cut here; the first {head} and the last {tail} bytes are kept]\n"
)
# How long output may keep arriving after the process group is gone: only a program that
# escaped the group (its own setsid) can still hold the pipes open, and we stop waiting for it.
_DRAIN_TIMEOUT = 2.0
_DRAIN_LIMIT = 16 * 1024 * 1024
_POLL_MAX = 0.05
_HAS_WAITID = hasattr(os, "waitid") and hasattr(os, "WNOWAIT")


class ProgramNotFound(LoopctlError):
    """The program to run is not installed, not on PATH, or not executable."""


@dataclass(frozen=True, slots=True)
class Completed:
    """How a program ended and what it printed (tails already redacted)."""

    argv: tuple[str, ...]
    exit_code: int | None  # None when loopctl killed it (timeout, stall or cancel); -N for signal N
    timed_out: bool
    interrupted: bool  # stopped because the caller's `cancel` event was set
    duration_s: float
    stdout_path: Path | None
    stderr_path: Path | None
    stdout_tail: str
    stderr_tail: str
    # The resource limit that ended it ("memory limit 4 GiB reached"), when one did.
    limit: str | None = None
    # Ended because it made no progress for its IdleLimit (not a timeout: it was not working).
    stalled: bool = False

    @property
    def ok(self) -> bool:
        """True if the program exited 0 by itself."""
        return self.exit_code == 0 and not self.timed_out and not self.stalled

    def output_tail(self, limit: int = 4000) -> str:
        """The end of stdout then stderr, at most `limit` characters, each stream given a share."""
        out, err = self.stdout_tail, self.stderr_tail
        if out and err and not out.endswith("\n"):
            out += "\n"
        if len(out) + len(err) <= limit:
            return out + err
        # Keep the end of both streams: an error message on stderr must not be crowded out by
        # a chatty stdout, nor a final JSON line on stdout by a noisy stderr.
        err_share = min(len(err), max(limit // 2, limit - len(out)))
        out_share = limit - err_share
        return (out[-out_share:] if out_share > 0 else "") + (err[-err_share:] if err_share else "")


class _Sink:
    """A capture file for one or both output streams: its head and tail kept, the middle cut.

    The head is written once and never moved. What follows it is written as it arrives; when
    that grows past twice the tail size it is compacted to the last `tail` bytes behind a note
    of how much was cut, so the file stays bounded while the program runs (a crash leaves no
    giant file) and ends as head, note, tail.
    """

    def __init__(
        self, path: Path, head: int = CAPTURE_HEAD_BYTES, tail: int = CAPTURE_TAIL_BYTES
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Unbuffered writes, so `tail -f` on the log sees output as it happens; readable, to
        # move the tail when compacting; 0600, as it may hold what a program should not print.
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        self._head = max(head, 0)
        self._tail = max(tail, 0)
        self._size = 0  # bytes in the file
        self._rest = self._head  # where the part after the head (and the note) starts
        self._cut = 0  # bytes dropped from the middle so far
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self._pwrite(data, self._size)
            self._size += len(data)
            if self._size - self._rest > 2 * self._tail:
                self._compact()

    def close(self) -> None:
        try:
            with self._lock:
                if self._size - self._rest > self._tail:
                    self._compact()
        finally:
            os.close(self._fd)

    def _compact(self) -> None:
        """Keep the head and the last `tail` bytes, with the note of what was cut between."""
        kept = self._pread(self._size - self._tail, self._tail)
        self._cut += self._size - self._rest - self._tail
        note = _CUT_NOTE.format(cut=self._cut, head=self._head, tail=self._tail).encode()
        self._pwrite(note + kept, self._head)
        self._rest = self._head + len(note)
        self._size = self._rest + len(kept)
        os.ftruncate(self._fd, self._size)

    def _pwrite(self, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written

    def _pread(self, offset: int, size: int) -> bytes:
        parts: list[bytes] = []
        while size > 0:
            part = os.pread(self._fd, size, offset)
            if not part:
                break
            parts.append(part)
            offset, size = offset + len(part), size - len(part)
        return b"".join(parts)


class _Capture:
    """One output stream: redacts it as it arrives, logs it, and keeps a bounded tail."""

    def __init__(self, sink: _Sink | None, redactor: Redactor | None, tail_bytes: int) -> None:
        self._sink = sink
        self._redactor = redactor
        # Every form the redactor looks for: the end of what has arrived may be the start of
        # one, so the last len(longest)-1 bytes wait for the next read to show whether it is.
        self._needles = tuple(s.encode("utf-8") for s in redactor.secrets) if redactor else ()
        self._hold = max((len(needle) for needle in self._needles), default=1) - 1
        self._tail_bytes = max(tail_bytes, 0)
        self._tail = bytearray()
        self._pending = b""
        # The last bytes already written when they ended inside a masked run of overlapping
        # secrets: the run may go on in the next read, and must then stay one mask.
        self._masked = b""
        self.error: BaseException | None = None
        # When the last bytes arrived (time.monotonic), for an IdleLimit: any output, even
        # output still held back for redaction, is progress.
        self.last_output = 0.0

    def feed(self, chunk: bytes) -> None:
        self.last_output = time.monotonic()
        if self.error is not None:
            return  # keep draining the pipe so the program never blocks on a full one
        try:
            self._feed(chunk)
        except Exception as exc:  # a full disk must not leave the program writing into a void
            self.error = exc

    def finish(self) -> None:
        if self.error is None and self._pending:
            pending, self._pending = self._pending, b""
            try:
                if self._redactor is None:
                    self._emit(pending)
                else:
                    self._write(self._masked + pending, len(self._masked) + len(pending))
            except Exception as exc:
                self.error = exc

    def tail(self) -> str:

        raw = bytes(self._tail[-self._tail_bytes :] if self._tail_bytes else b"")
        # Tails become event data and reach a human's terminal (agent and check output): no
        # terminal control sequences. The log files keep the output as it was.
        return strip_controls(raw.decode("utf-8", errors="replace"))

    def _feed(self, chunk: bytes) -> None:
        if self._redactor is None:
            self._emit(chunk)
            return
        # A secret split across two reads (or any cut of a long line) must still be seen
        # whole: write only up to a point no secret can straddle, carry the rest over.
        pending = self._pending + chunk
        data = self._masked + pending
        cut = _flush_point(data, self._needles, self._hold)
        if cut <= len(self._masked):
            self._pending = pending
            return
        self._pending = data[cut:]
        self._write(data, cut)

    def _write(self, data: bytes, cut: int) -> None:
        """Redact and write `data[len(self._masked):cut]`, as redacting the whole stream would:
        a match that begins in the masked bytes already written extends that mask."""
        written = len(self._masked)
        out: list[bytes] = []
        cursor = written
        last: tuple[int, int] | None = None
        for start, end in masked_regions(data[:cut], self._needles):
            if end <= written:
                continue  # wholly inside what is already written
            if start >= written:
                out += [data[cursor:start], REDACTED.encode("ascii")]
            cursor, last = end, (start, end)
        out.append(data[cursor:cut])
        ends_masked = last is not None and last[1] == cut
        self._masked = data[max(last[0], cut - self._hold) : cut] if ends_masked and last else b""
        self._emit(b"".join(out))

    def _emit(self, data: bytes) -> None:
        if self._sink is not None:
            self._sink.write(data)
        if self._tail_bytes:
            self._tail += data
            if len(self._tail) > 2 * self._tail_bytes:
                del self._tail[: -self._tail_bytes]


def _flush_point(data: bytes, needles: tuple[bytes, ...], hold: int) -> int:
    """How much of `data` to redact and write now so the result equals redacting it whole.

    At most the last `hold` bytes (len(longest needle)-1) can hold an unfinished match, so the
    cut starts there and moves back to the start of any match that straddles it.
    """
    cut = len(data) - hold
    if cut <= 0:
        return 0
    point = cut
    while (start := _straddling(data, needles, point)) is not None:
        if start < cut - hold:
            # Matches overlapping one another (a secret repeated over itself) reach back past
            # any one secret's length: write through the end of that run instead, so the carry
            # stays small. A later read can then show only a fragment shorter than a secret.
            return _run_end(data, needles, cut)
        point = start
    return point


def _straddling(data: bytes, needles: tuple[bytes, ...], point: int) -> int | None:
    """The earliest start of a match that begins before `point` and ends after it."""
    starts = [
        data.find(needle, max(point - len(needle) + 1, 0), point + len(needle) - 1)
        for needle in needles
    ]
    return min((start for start in starts if start != -1), default=None)


def _run_end(data: bytes, needles: tuple[bytes, ...], point: int) -> int:
    """The end of the run of overlapping matches that covers `point`."""
    end = point
    while True:
        ends = [
            found + len(needle)
            for needle in needles
            if (found := data.rfind(needle, max(end - len(needle) + 1, 0), end + len(needle) - 1))
            != -1
        ]
        if not ends or max(ends) <= end:
            return end
        end = max(ends)


def _pump(fd: int, capture: _Capture, wake_fd: int) -> None:
    """Copy a pipe into `capture` until EOF, or until woken, then drain what is left."""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        selector.register(wake_fd, selectors.EVENT_READ)
        while True:
            ready = {key.fd for key, _ in selector.select()}
            if fd in ready:
                chunk = os.read(fd, _READ_SIZE)
                if not chunk:
                    break
                capture.feed(chunk)
            elif wake_fd in ready:
                _drain(fd, capture)
                break
    capture.finish()


def _drain(fd: int, capture: _Capture) -> None:
    os.set_blocking(fd, False)
    taken = 0
    with contextlib.suppress(BlockingIOError):
        while taken < _DRAIN_LIMIT:
            chunk = os.read(fd, _READ_SIZE)
            if not chunk:
                return
            taken += len(chunk)
            capture.feed(chunk)


def _feed_stdin(pipe: IO[bytes], payload: bytes) -> None:
    # A program that exits without reading its stdin breaks the pipe: that is not our error.
    with contextlib.suppress(OSError):
        pipe.write(payload)
    with contextlib.suppress(OSError):
        pipe.close()


def _resolve(program: str, cwd: Path, env: Mapping[str, str]) -> str:
    if os.sep in program:
        # Popen looks a relative path up from the child's cwd, so we do too.
        candidate = program if os.path.isabs(program) else os.path.join(cwd, program)
        found = candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise ProgramNotFound(f"program not found: {program} (is it installed and on PATH?)")
    return found


def _has_exited(proc: subprocess.Popen[bytes]) -> bool:
    if not _HAS_WAITID:
        return proc.poll() is not None
    # WNOWAIT leaves the exited leader unreaped, so its pid still pins the process group and
    # the group kill that follows cannot hit an unrelated process that reused the number.
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def _wait_exit(
    proc: subprocess.Popen[bytes],
    deadline: float | None,
    cancel: threading.Event | None,
    idle: IdleClock | None = None,
) -> bool:
    """Wait until the program exits (True), the deadline passes, `cancel` is set or the
    program stalls (False)."""
    delay = 0.001
    while not _has_exited(proc):
        now = time.monotonic()
        if (deadline is not None and now >= deadline) or (cancel is not None and cancel.is_set()):
            return False
        if idle is not None and idle.expired(now):
            return False
        pause = min(delay, _POLL_MAX) if deadline is None else min(delay, _POLL_MAX, deadline - now)
        if cancel is not None:
            cancel.wait(pause)
        else:
            time.sleep(pause)
        delay *= 2
    return True


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _terminate(proc: subprocess.Popen[bytes], kill_grace: float) -> None:
    """SIGTERM the group, give the leader `kill_grace` seconds, then SIGKILL the group."""
    _signal_group(proc.pid, signal.SIGTERM)
    _wait_exit(proc, time.monotonic() + kill_grace, None)
    _signal_group(proc.pid, signal.SIGKILL)


def _open_sinks(
    stack: contextlib.ExitStack, stdout_path: Path | None, stderr_path: Path | None
) -> tuple[_Sink | None, _Sink | None]:
    if stdout_path is None:
        out = None
    else:
        out = _Sink(stdout_path)
        stack.callback(out.close)
        if stderr_path is not None and stdout_path.resolve() == stderr_path.resolve():
            return out, out
    if stderr_path is None:
        return out, None
    err = _Sink(stderr_path)
    stack.callback(err.close)
    return out, err


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None = None,
    stdin: str | bytes | None = None,
    stdout_path: Path | None = None,
    stderr_path: Path | None = None,
    redactor: Redactor | None = None,
    tail_bytes: int = 64_000,
    kill_grace: float = 3.0,
    cancel: threading.Event | None = None,
    on_start: Callable[[int], None] | None = None,
    sandbox: Sandbox | None = None,
    idle: IdleLimit | None = None,
) -> Completed:
    """Run `argv` in its own process group; a non-zero exit or a timeout is data, not an error.

    With `sandbox`, the program runs confined (loopctl.sandbox): the group then holds the
    sandbox's reaper, whose exit ends every process the program started. With `idle`, a
    program that makes no progress for its limit is ended as for a timeout, `stalled`.
    """
    args = tuple(argv)
    if not args:
        raise ValueError("argv must name a program")
    if not cwd.is_dir():
        raise LoopctlError(f"working directory does not exist: {cwd}")
    executable = _resolve(args[0], cwd, env)
    rules = sandbox.limits if sandbox is not None and sandbox.limits is not None else None
    # Computed here, so that the child only calls setrlimit between fork and exec.
    pairs = limits.rlimits(rules) if rules is not None and rules.any else []
    preexec = limits.preexec(pairs) if pairs else None
    ceiling = next((soft for kind, (soft, _) in pairs if kind == limits.RLIMITS["pids"]), None)
    active = redactor if redactor is not None and redactor.secrets else None
    payload = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    shown = tuple(active.redact(arg) for arg in args) if active is not None else args

    with contextlib.ExitStack() as stack:
        # The egress proxy serves for as long as the program runs: entered first, left last.
        egress_dir = _serve_egress(stack, sandbox)
        executable, launch, env, filter_fd = _confine(
            sandbox, args, executable, cwd, env, egress_dir
        )
        if filter_fd is not None:
            stack.callback(os.close, filter_fd)
        out_sink, err_sink = _open_sinks(stack, stdout_path, stderr_path)
        # Made before the program starts: nothing that can fail may sit between Popen and the
        # try block that guarantees the group is killed.
        wake_read, wake_write = os.pipe()
        stack.callback(os.close, wake_read)
        stack.callback(os.close, wake_write)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                launch,
                executable=executable,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.PIPE if payload is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                pass_fds=() if filter_fd is None else (filter_fd,),
                preexec_fn=preexec,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ProgramNotFound(
                f"program not found: {args[0]} (is it installed and on PATH?)"
            ) from exc

        watch: limits.Watch | None = None
        assert proc.stdout is not None
        assert proc.stderr is not None
        stack.enter_context(proc.stdout)
        stack.enter_context(proc.stderr)
        captures = (
            _Capture(out_sink, active, tail_bytes),
            _Capture(err_sink, active, tail_bytes),
        )
        readers = [
            threading.Thread(target=_pump, args=(pipe.fileno(), capture, wake_read), daemon=True)
            for pipe, capture in zip((proc.stdout, proc.stderr), captures, strict=True)
        ]
        writer: threading.Thread | None = None
        killed = False
        clock = (
            IdleClock(idle, lambda: max(capture.last_output for capture in captures), started)
            if idle is not None
            else None
        )
        try:
            if on_start is not None:
                on_start(proc.pid)  # the pid is the group id: a resumed run can find leftovers
            if rules is not None and rules.any and sandbox is not None:
                pid = proc.pid
                watch = limits.Watch(
                    rules,
                    pid,
                    sandbox.watched_folders(env),
                    lambda: _signal_group(pid, signal.SIGKILL),
                    ceiling=ceiling,
                )
                watch.start()
            for reader in readers:
                reader.start()
            if payload is not None and proc.stdin is not None:
                writer = threading.Thread(
                    target=_feed_stdin, args=(proc.stdin, payload), daemon=True
                )
                writer.start()
            deadline = None if timeout is None else started + timeout
            if _wait_exit(proc, deadline, cancel, clock):
                # Agents must not leave daemons behind: whatever remains of the group goes too.
                _signal_group(proc.pid, signal.SIGKILL)
            else:
                killed = True
                _terminate(proc, kill_grace)
        except BaseException:
            # Ctrl-C (or any failure of ours) must not orphan the program: stop it, then re-raise.
            _terminate(proc, kill_grace)
            raise
        finally:
            if watch is not None:
                # Before the wait: the unreaped leader keeps the group id from being reused.
                watch.finish()
            returncode = proc.wait()
            _join_readers(readers, wake_write)
            if writer is not None:
                writer.join(_DRAIN_TIMEOUT)
        duration = time.monotonic() - started

    for capture in captures:
        if capture.error is not None:
            raise capture.error
    interrupted = killed and cancel is not None and cancel.is_set()
    stalled = killed and not interrupted and clock is not None and clock.fired
    reached = None
    if rules is not None and not killed:
        reached = (watch.reason if watch is not None else None) or limits.reason_from_exit(
            rules, returncode, captures[1].tail() + captures[0].tail()
        )
    if reached is not None and sandbox is not None:
        sandbox.reached.append(reached)
    return Completed(
        argv=shown,
        exit_code=None if killed else returncode,
        timed_out=killed and not interrupted and not stalled,
        interrupted=interrupted,
        duration_s=duration,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        stdout_tail=captures[0].tail(),
        stderr_tail=captures[1].tail(),
        limit=reached,
        stalled=stalled,
    )


def _serve_egress(stack: contextlib.ExitStack, sandbox: Sandbox | None) -> Path | None:
    """Start the egress proxy of a proxied bwrap sandbox (its socket folder), else None."""
    if sandbox is None or sandbox.mechanism != "bwrap" or not sandbox.egress.proxied:
        return None

    return stack.enter_context(
        egress_proxy.serving(sandbox.egress, sandbox.refused, sandbox.cassette, sandbox.asked)
    )


def _confine(
    sandbox: Sandbox | None,
    args: tuple[str, ...],
    executable: str,
    cwd: Path,
    env: Mapping[str, str],
    egress_dir: Path | None = None,
) -> tuple[str, tuple[str, ...], Mapping[str, str], int | None]:
    """(program, argv, environment, filter descriptor) that run `args` in `sandbox`.

    The descriptor holds the seccomp filter bwrap loads (`--seccomp`): one of its own per
    start, inherited by bwrap, closed by the caller once the program has started."""
    if sandbox is None:
        return executable, args, env, None
    fd = None
    if sandbox.mechanism == "bwrap" and sandbox.syscall_filter:
        fd = syscall_filter.open_program(sandbox.nested_userns)
    try:
        program, wrapped, inner = sandbox.wrap(
            args, executable, cwd, env, seccomp_fd=fd, egress_dir=egress_dir
        )
    except BaseException:
        if fd is not None:
            os.close(fd)
        raise
    return program, tuple(wrapped), inner, fd


def _join_readers(readers: list[threading.Thread], wake_write: int) -> None:
    readers = [reader for reader in readers if reader.ident is not None]
    deadline = time.monotonic() + _DRAIN_TIMEOUT
    for reader in readers:
        reader.join(max(deadline - time.monotonic(), 0.0))
    if any(reader.is_alive() for reader in readers):
        os.write(wake_write, b"x")
        for reader in readers:
            reader.join()


def kill_leftover_group(pgid: int, inside: Path) -> bool:
    """SIGKILL process group `pgid` if its members still work inside `inside`.

    A runner killed with SIGKILL cannot take its agent down with it (the agent leads its own
    session); the resumed run calls this so two agents never share a worktree. The cwd check
    keeps a recycled group id from hitting an unrelated program.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return False
    root = inside.resolve()
    found = False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            cwd = Path(os.readlink(entry / "cwd")).resolve()
        except (OSError, ValueError):
            continue
        if cwd == root or root in cwd.parents:
            found = True
            break
    if found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return found


def spawn_detached(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], log_path: Path
) -> subprocess.Popen[bytes]:
    """Start a long-lived program in its own session, output appended to `log_path`.

    For `loopctl up --detach`: the caller does not wait for it, and a terminal's Ctrl-C or
    hang-up never reaches it.
    """
    args = tuple(argv)
    if not args:
        raise ValueError("argv must name a program")
    executable = _resolve(args[0], cwd, env)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab", buffering=0) as log:
        try:
            return subprocess.Popen(
                args,
                executable=executable,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise ProgramNotFound(
                f"program not found: {args[0]} (is it installed and on PATH?)"
            ) from exc
