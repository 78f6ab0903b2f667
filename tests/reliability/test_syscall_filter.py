"""The seccomp filter closes each kernel door an agent never needs (issue 24, item 1).

A hostile maker (agents/tries_syscalls.py) makes every refused call through a real `loopctl run`,
as root and as an unprivileged user, and reports the errno: each one is EPERM (ENOSYS for the
calls whose callers fall back to a judged one), the 32-bit and x32 ABIs are shut, and what an
ordinary program does (trace its own child, clone a plain child, other ioctls) still works.

Many of these calls also fail for want of a capability, with the same EPERM. So the filter is
also built with a marker errno instead: every refused call then answers the marker, which only
the filter can have said, and the canary (the same sandbox without the filter) answers none
with it, and shows the calls the filter alone stops (reading another process's memory, the
keyring, the 32-bit ABI) working. Codex's lighter filter lets its nested sandbox's calls
through and nothing else; and without libseccomp there is no filter, said by `unavailable()`.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.accounts import as_user, give_to, unprivileged_python
from support.cli import invoke
from support.repos import git

from loopctl import process, sandbox, syscall_filter

pyseccomp = pytest.importorskip("pyseccomp")

PY = sys.executable
AGENT = Path(__file__).parents[1] / "agents" / "tries_syscalls.py"
sys.path.insert(0, str(AGENT.parent))
import tries_syscalls  # noqa: E402  (the hostile program's own table of calls)

MARKER = errno.ENOTRECOVERABLE  # an errno no refused call here returns by itself
FALLBACK = {name for name, _ in syscall_filter.NOT_THERE}
NESTED = {name for name, _ in syscall_filter.DENIED_UNLESS_NESTED} | {"clone"}

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap" or syscall_filter.unavailable() != "",
    reason=f"no bwrap sandbox with a seccomp filter here: {sandbox.probe()[2]}"
    f" {syscall_filter.unavailable()}",
)


def numbers() -> dict[str, int]:
    arch = pyseccomp.system_arch()
    names = {name for _, name, _ in [*tries_syscalls.CALLS, *tries_syscalls.ALLOWED]}
    found = {name: pyseccomp.resolve_syscall(arch, name) for name in [*names, "getpid"]}
    return {name: number for name, number in found.items() if number >= 0}


def parse(output: str) -> dict[str, str]:
    return {
        words[1]: words[2]
        for words in (line.split() for line in output.splitlines())
        if len(words) == 3 and words[0] == "SYSCALL"
    }


def expected(label: str, name: str, refused: int) -> str:
    return "ENOSYS" if name in FALLBACK else errno.errorcode[refused]


@pytest.fixture
def base() -> Iterator[Path]:
    # Not pytest's tmp_path: an unprivileged user must be able to enter it.
    folder = Path(tempfile.mkdtemp(prefix="loopctl-seccomp-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def make_project(base: Path, python: str = PY) -> Path:
    root = base / "repo"
    root.mkdir()
    (base / "home").mkdir()
    (base / "home" / ".gitconfig").write_text("[user]\n\tname = t\n\temail = t@t\n")
    git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("a project\n")
    (root / "agents").mkdir()
    argv = [python, str(AGENT), json.dumps(numbers())]
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps(argv)}\ntimeout = "120s"\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    config = '[defaults]\nmaker = "maker"\n'
    if python != PY:
        config += '\n[env]\nallow = ["PYTHONPATH"]\n'
    (root / ".loop" / "config.toml").write_text(config)
    check = json.dumps([python, "-c", "pass"])
    (root / ".loop" / "loops" / "attack.toml").write_text(
        'prompt = "Try the kernel."\n\n[maker]\nagent = "maker"\n\n'
        f"[checker]\ncommand = {check}\n\n[budget]\nmax_iterations = 1\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def run_loop(
    root: Path, user: str | None = None, python: str = PY, pythonpath: str | None = None
) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LANG": "C.UTF-8",
        **({"PYTHONPATH": pythonpath} if pythonpath else {}),
    }
    done = subprocess.run(
        [python, "-m", "loopctl", "run", "attack", "--once"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
        stdin=subprocess.DEVNULL, **as_user(user),
    )  # fmt: skip
    outs = sorted((root / ".loop" / "runs").glob("*/*/attempt-*/maker.out"))
    output = "\n".join(out.read_text(errors="replace") for out in outs)
    assert "SYSCALL mode" in output, done.stdout + done.stderr + output
    return parse(output)


def assert_every_door_shut(seen: dict[str, str]) -> None:
    assert seen["mode"] == "2", seen  # a seccomp filter is loaded
    for label, name, _ in tries_syscalls.CALLS:
        if name in numbers():
            assert seen[label] == expected(label, name, errno.EPERM), (label, seen)
    if os.uname().machine == "x86_64":
        assert seen["i386-getpid"] == "EPERM", seen
        assert seen["x32-getpid"] == "EPERM", seen
    for label, _, _ in tries_syscalls.ALLOWED:
        assert seen[label] != "EPERM", (label, seen)
    assert seen["ptrace-traceme"] == "ok", seen
    assert seen["clone-plain"] == "ok", seen


def test_as_root_every_refused_call_gets_eperm_in_a_real_run(base: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the root case needs root")
    assert_every_door_shut(run_loop(make_project(base)))


def test_as_an_unprivileged_user_every_refused_call_gets_eperm(base: Path) -> None:
    runtime = unprivileged_python()
    if runtime is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, pythonpath = runtime
    root = make_project(base, python=python)
    give_to("nobody", base)
    assert_every_door_shut(run_loop(root, user="nobody", python=python, pythonpath=pythonpath))


def in_box(base: Path, cli: str | None, compiled: bytes | None) -> dict[str, str]:
    """The hostile program in the sandbox as built, with `compiled` as its filter (or none)."""
    worktree = base / "work"
    worktree.mkdir(exist_ok=True)
    box = sandbox.make_sandbox(root=base, worktree=worktree, cli=cli)
    env = {**os.environ, "HOME": str(base / "home")}
    fd = None
    if compiled is not None:
        fd = os.memfd_create("filter")
        os.write(fd, compiled)
        os.lseek(fd, 0, os.SEEK_SET)
    try:
        argv = [PY, str(AGENT), json.dumps(numbers())]
        program, wrapped, inner = box.wrap(argv, PY, worktree, env, seccomp_fd=fd)
        done = subprocess.run(
            wrapped, executable=program, env=inner, capture_output=True, text=True,
            check=False, timeout=120, pass_fds=() if fd is None else (fd,),
        )  # fmt: skip
    finally:
        if fd is not None:
            os.close(fd)
    assert "SYSCALL mode" in done.stdout, done.stdout + done.stderr
    return parse(done.stdout)


def test_each_refusal_comes_from_the_filter_not_a_missing_capability(base: Path) -> None:
    seen = in_box(base, None, syscall_filter.build(False, denied_errno=MARKER))
    for label, name, _ in tries_syscalls.CALLS:
        if name in numbers():
            assert seen[label] == expected(label, name, MARKER), (label, seen)
    if os.uname().machine == "x86_64":
        assert seen["i386-getpid"] == errno.errorcode[MARKER], seen


def test_canary_without_the_filter_no_call_is_refused_by_it(base: Path) -> None:
    seen = in_box(base, None, None)
    assert seen["mode"] == "0", seen
    for label, name, _ in tries_syscalls.CALLS:
        if name in FALLBACK:
            assert seen.get(label) != "ENOSYS", (label, seen)
    assert errno.errorcode[MARKER] not in seen.values(), seen
    # The doors only the filter shuts: they open without it, even with no capability.
    for label in ("keyctl", "process_vm_readv", "process_vm_writev", "personality-no-aslr"):
        assert seen[label] == "ok", (label, seen)
    assert seen["mount"] == "EFAULT", seen  # reached the kernel's argument checks
    if os.uname().machine == "x86_64":
        assert seen["i386-getpid"] == "ok", seen


def test_codex_keeps_what_its_nested_sandbox_needs_and_nothing_more(base: Path) -> None:
    seen = in_box(base, "codex", syscall_filter.build(True, denied_errno=MARKER))
    for label, name, _ in tries_syscalls.CALLS:
        if name not in numbers():
            continue
        if name in NESTED:
            assert seen[label] != errno.errorcode[MARKER], (label, seen)
        else:
            assert seen[label] == expected(label, name, MARKER), (label, seen)
    assert seen["unshare"] == "ok", seen  # its own user namespace


def test_process_run_loads_the_filter_and_degrades_without_libseccomp(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = sandbox.make_sandbox(root=base, worktree=base)
    code = "print(open('/proc/self/status').read().split('Seccomp:')[1].split()[0])"
    done = process.run([PY, "-c", code], cwd=base, env=dict(os.environ), sandbox=box, timeout=60)
    assert done.stdout_tail.strip() == "2", done.output_tail()
    off = dataclasses.replace(box, syscall_filter=False)
    done = process.run([PY, "-c", code], cwd=base, env=dict(os.environ), sandbox=off, timeout=60)
    assert done.stdout_tail.strip() == "0", done.output_tail()
    # No libseccomp: the agent still runs, without a filter.
    monkeypatch.setattr(syscall_filter, "program", lambda nested_userns: None)
    done = process.run([PY, "-c", code], cwd=base, env=dict(os.environ), sandbox=box, timeout=60)
    assert done.stdout_tail.strip() == "0", done.output_tail()


def test_without_the_binding_unavailable_says_how_to_get_it(base: Path) -> None:
    code = (
        "import sys; sys.modules['pyseccomp'] = None\n"
        "from loopctl import syscall_filter\n"
        "print(syscall_filter.program(False)); print(syscall_filter.unavailable())"
    )
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "None",
        "the `pyseccomp` package is not installed (`pip install pyseccomp`)",
    ]


def test_doctor_says_whether_the_filter_is_loaded(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = base / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    monkeypatch.setenv("HOME", str(base / "home"))
    result = invoke(monkeypatch, root, "doctor")
    assert "seccomp:      loaded" in result.output, result.output
    why = "the `pyseccomp` package is not installed (`pip install pyseccomp`)"
    monkeypatch.setattr(syscall_filter, "unavailable", lambda: why)
    result = invoke(monkeypatch, root, "doctor", "--json")
    shown = json.loads(result.output)["doctor"]["syscall_filter"]
    assert shown == {"loaded": False, "why_not": why}
    result = invoke(monkeypatch, root, "doctor")
    assert f"seccomp:      NO FILTER: {why}; agents run without it" in result.output
