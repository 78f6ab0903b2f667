"""The seccomp filter every bwrap sandbox loads: kernel doors an agent never needs, closed.

Dropped capabilities and `--disable-userns` already make most of these calls fail; the filter is
the second wall (a kernel bug in one of them, a capability bwrap left by mistake) and it closes
doors that need no capability at all: another process's memory (`ptrace` attach,
`process_vm_readv`, `pidfd_getfd`: a tool the CLI starts could otherwise read the CLI that
holds the model connection), the kernel keyring, `bpf`, `perf_event_open`, `userfaultfd`,
TIOCSTI/TIOCLINUX keystroke injection, and the 32-bit ABIs whose syscall numbers a filter
for the native one does not see. The list follows Flatpak's and Codex's; docs/sandbox.md's
seccomp table gives the reason for each.

A denied call returns EPERM (never a kill), so a tool that tries one degrades as it would on a
locked-down host. A few return ENOSYS instead: callers fall back to an older call the filter
can judge (`clone3` to `clone`, whose flags it reads; the new mount API to `mount`) or to
plain I/O (io_uring, whose operations no filter sees).

The program is compiled by libseccomp (through `pyseccomp`, a ctypes binding of its C API)
once per process and handed to bwrap with `--seccomp FD`. Without libseccomp (macOS, a Linux
without the library) there is no filter: `unavailable()` says why and `doctor` shows it.
"""

from __future__ import annotations

import errno
import functools
import os
import sys

# Namespace flags of clone(2) and unshare(2): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
# NEWPID, NEWNET and NEWTIME.
NAMESPACE_FLAGS: tuple[int, ...] = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x00000080,
)
TIOCSTI = 0x5412  # push a byte into a terminal's input: keystrokes in someone else's shell
TIOCLINUX = 0x541C  # the Linux console's selection paste does the same
PTRACE_ATTACH = 16
PTRACE_SEIZE = 0x4206
# The one personality(2) an agent may set; the query (0xffffffff) is refused too, as in
# Flatpak: gdb then warns that it cannot switch off address randomisation, and goes on.
PER_LINUX = 0

# Refused for every agent: (syscall, why).
DENIED: tuple[tuple[str, str], ...] = (
    ("keyctl", "the kernel keyring holds other sessions' secrets"),
    ("add_key", "the kernel keyring"),
    ("request_key", "the kernel keyring"),
    ("bpf", "a kernel-level program loader"),
    ("perf_event_open", "profiling that reads other code's timing, and a frequent kernel bug"),
    ("userfaultfd", "the usual tool of kernel race exploits"),
    ("process_vm_readv", "reads another process's memory"),
    ("process_vm_writev", "writes another process's memory"),
    ("pidfd_getfd", "takes a file descriptor out of another process"),
    ("kexec_load", "replaces the running kernel"),
    ("kexec_file_load", "replaces the running kernel"),
    ("init_module", "loads kernel code"),
    ("finit_module", "loads kernel code"),
    ("delete_module", "unloads kernel code"),
    ("open_by_handle_at", "opens files by handle, past every mount that hides them"),
    ("acct", "process accounting to a file of its choice"),
    ("swapon", "host memory configuration"),
    ("swapoff", "host memory configuration"),
    ("reboot", "the host's power"),
    ("settimeofday", "the host's clock"),
    ("clock_settime", "the host's clock"),
    ("syslog", "the kernel log"),
    ("uselib", "an obsolete loader"),
    ("quotactl", "file-system quotas"),
    ("nfsservctl", "the NFS server"),
    ("vhangup", "hangs up a terminal"),
)
# Refused unless the agent nests a sandbox of its own (Codex's bwrap makes a user namespace,
# mounts in it, pivots into it and chroots; without capabilities in the outer namespaces that
# reaches nothing of the host).
DENIED_UNLESS_NESTED: tuple[tuple[str, str], ...] = (
    ("mount", "mounts: unhide a credential store, remount a read-only place"),
    ("umount2", "unmounts what hides a credential store"),
    ("umount", "unmounts what hides a credential store"),
    ("pivot_root", "changes the root"),
    ("chroot", "changes the root"),
    ("unshare", "new namespaces, a user namespace with every capability in it"),
    ("setns", "joins other namespaces"),
)
# ENOSYS, so that the caller falls back to a call the filter can judge, or to plain I/O.
NOT_THERE: tuple[tuple[str, str], ...] = (
    ("clone3", "its flags sit in memory no filter reads: libc falls back to clone"),
    ("open_tree", "the new mount API: mount is judged instead"),
    ("move_mount", "the new mount API"),
    ("fsopen", "the new mount API"),
    ("fsconfig", "the new mount API"),
    ("fsmount", "the new mount API"),
    ("fspick", "the new mount API"),
    ("mount_setattr", "the new mount API"),
    ("io_uring_setup", "its operations bypass every filter"),
    ("io_uring_enter", "its operations bypass every filter"),
    ("io_uring_register", "its operations bypass every filter"),
)


@functools.lru_cache(maxsize=4)
def program(nested_userns: bool) -> bytes | None:
    """The compiled filter (BPF) for an agent, built once per process; None without libseccomp."""
    try:
        return build(nested_userns)
    except (ImportError, OSError, RuntimeError):
        return None


def build(nested_userns: bool, denied_errno: int = errno.EPERM) -> bytes:
    """Compile the filter; `denied_errno` is what refused calls return (tests use a marker).

    Raises ImportError or RuntimeError without pyseccomp or libseccomp, OSError if libseccomp
    refuses a rule."""
    # lazy: it loads libseccomp; only a sandboxed start needs the filter
    import pyseccomp as seccomp  # type: ignore[import-untyped]

    deny = seccomp.ERRNO(denied_errno)
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    # Only the native ABI: a 32-bit (int 0x80) or x32 call has other numbers, which a filter
    # for the native ones would let through.
    rules.set_attr(seccomp.Attr.ACT_BADARCH, deny)
    arch = seccomp.system_arch()
    names = [name for name, _ in DENIED]
    if not nested_userns:
        names += [name for name, _ in DENIED_UNLESS_NESTED]
    for name in names:
        _add(seccomp, rules, arch, deny, name)
    for name, _ in NOT_THERE:
        _add(seccomp, rules, arch, seccomp.ERRNO(errno.ENOSYS), name)
    if not nested_userns:
        for flag in NAMESPACE_FLAGS:
            _add(seccomp, rules, arch, deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    # ioctl's request is an int: compare only its low 32 bits, or a request with high bits set
    # would pass the filter yet reach the terminal (CVE-2019-10063 in Flatpak).
    for request in (TIOCSTI, TIOCLINUX):
        low = seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request)
        _add(seccomp, rules, arch, deny, "ioctl", low)
    # Attaching to a running process (the CLI that started the tool, its siblings) is refused;
    # tracing one's own child (`strace CMD`, `gdb ./prog`: PTRACE_TRACEME) still works.
    for request in (PTRACE_ATTACH, PTRACE_SEIZE):
        _add(seccomp, rules, arch, deny, "ptrace", seccomp.Arg(0, seccomp.EQ, request))
    # Only plain Linux (Flatpak's rule): no faked uname, no READ_IMPLIES_EXEC, no page 0.
    _add(seccomp, rules, arch, deny, "personality", seccomp.Arg(0, seccomp.NE, PER_LINUX))
    fd = os.memfd_create("loopctl-seccomp", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            rules.export_bpf(out)
        os.lseek(fd, 0, os.SEEK_SET)
        return _read_all(fd)
    finally:
        os.close(fd)


def _add(seccomp: object, rules: object, arch: int, action: int, name: str, *args: object) -> None:
    """One rule; a call this architecture does not have (`umount` on x86-64) is skipped."""
    if seccomp.resolve_syscall(arch, name) < 0:  # type: ignore[attr-defined]
        return
    rules.add_rule(action, name, *args)  # type: ignore[attr-defined]


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 65536):
        parts.append(chunk)
    return b"".join(parts)


@functools.lru_cache(maxsize=1)
def unavailable() -> str:
    """Why agents run without the filter here ("" when they get it)."""
    if not sys.platform.startswith("linux"):
        return f"no seccomp on {sys.platform}"
    try:
        build(nested_userns=False)
    except ImportError:
        return "the `pyseccomp` package is not installed (`pip install pyseccomp`)"
    except (OSError, RuntimeError) as exc:
        return f"libseccomp is missing or refused the filter: {exc} (install libseccomp2)"
    return ""


def open_program(nested_userns: bool) -> int | None:
    """A file descriptor holding the filter, positioned at its start, for bwrap to read; the
    caller passes it to the child and closes it. None without a filter."""
    compiled = program(nested_userns)
    if compiled is None:
        return None
    # Fresh per start: bwrap reads the descriptor to its end, and a descriptor shared between
    # starts would share that offset.
    fd = os.memfd_create("loopctl-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, compiled)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
