"""A hostile agent that makes each kernel call the seccomp filter refuses, and reports the errno.

argv: NUMBERS: a JSON object of syscall name -> number on this machine (the test resolves them
with libseccomp; unknown here: left out). Each call runs in a forked child, so that one that
works (a namespace, a trace) changes nothing for the next. One line per call:
`SYSCALL <label> <ok|ERRNAME>`, then the process's own `Seccomp:` mode.

Arguments are chosen so that, without the filter, most calls fail with another errno than EPERM
(a bad pointer: EFAULT; a bad descriptor: EBADF; bad flags: EINVAL) or succeed harmlessly: the
canary can tell the filter's answer from the kernel's.
"""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import sys
from collections.abc import Callable
from pathlib import Path

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

CLONE_NEWUSER = 0x10000000
SIGCHLD = 17
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
PTRACE_TRACEME, PTRACE_ATTACH, PTRACE_SEIZE = 0, 16, 0x4206
ADDR_NO_RANDOMIZE = 0x0040000
X32_SYSCALL_BIT = 0x40000000

# (label, syscall, arguments). Pointers are 0 (EFAULT), descriptors -1 (EBADF).
CALLS: list[tuple[str, str, tuple[int, ...]]] = [
    ("mount", "mount", (1, 1, 0, 0, 0)),
    ("umount2", "umount2", (0, 0xFFFF)),
    ("pivot_root", "pivot_root", (0, 0)),
    ("chroot", "chroot", (0,)),
    ("unshare", "unshare", (CLONE_NEWUSER,)),
    ("setns", "setns", (-1, 0)),
    ("clone-newuser", "clone", (CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)),
    ("clone3", "clone3", (0, 0)),
    ("keyctl", "keyctl", (0, -3, 0)),
    ("add_key", "add_key", (0, 0, 0, 0, 0)),
    ("request_key", "request_key", (0, 0, 0, 0)),
    ("bpf", "bpf", (0x7FFF, 0, 0)),
    ("perf_event_open", "perf_event_open", (0, 0, -1, -1, 0)),
    ("userfaultfd", "userfaultfd", (0xFFFF,)),
    ("process_vm_readv", "process_vm_readv", (os.getpid(), 0, 0, 0, 0, 0)),
    ("process_vm_writev", "process_vm_writev", (os.getpid(), 0, 0, 0, 0, 0)),
    ("pidfd_getfd", "pidfd_getfd", (-1, 0, 0)),
    ("kexec_load", "kexec_load", (0, 0, 0, 0)),
    ("kexec_file_load", "kexec_file_load", (-1, -1, 0, 0, 0)),
    ("init_module", "init_module", (0, 0, 0)),
    ("finit_module", "finit_module", (-1, 0, 0)),
    ("delete_module", "delete_module", (0, 0)),
    ("open_by_handle_at", "open_by_handle_at", (-1, 0, 0)),
    ("acct", "acct", (0,)),
    ("swapon", "swapon", (0, 0)),
    ("swapoff", "swapoff", (0,)),
    ("reboot", "reboot", (0, 0, 0, 0)),
    ("settimeofday", "settimeofday", (0, 0)),
    ("clock_settime", "clock_settime", (1, 0)),
    ("syslog", "syslog", (10, 0, 0)),
    ("uselib", "uselib", (0,)),
    ("quotactl", "quotactl", (0, 0, 0, 0)),
    ("nfsservctl", "nfsservctl", (0, 0, 0)),
    ("vhangup", "vhangup", ()),
    ("ioctl-TIOCSTI", "ioctl", (-1, TIOCSTI, 0)),
    # The same request with high bits set: the kernel truncates it to TIOCSTI.
    ("ioctl-TIOCSTI-high", "ioctl", (-1, (1 << 32) | TIOCSTI, 0)),
    ("ioctl-TIOCLINUX", "ioctl", (-1, TIOCLINUX, 0)),
    ("ptrace-attach", "ptrace", (PTRACE_ATTACH, -1, 0, 0)),
    ("ptrace-seize", "ptrace", (PTRACE_SEIZE, -1, 0, 0)),
    ("personality-no-aslr", "personality", (ADDR_NO_RANDOMIZE,)),
    ("open_tree", "open_tree", (-1, 0, 0)),
    ("move_mount", "move_mount", (-1, 0, -1, 0, 0)),
    ("fsopen", "fsopen", (0, 0)),
    ("fsconfig", "fsconfig", (-1, 0, 0, 0, 0)),
    ("fsmount", "fsmount", (-1, 0, 0)),
    ("fspick", "fspick", (-1, 0, 0)),
    ("mount_setattr", "mount_setattr", (-1, 0, 0, 0, 0)),
    ("io_uring_setup", "io_uring_setup", (0, 0)),
    ("io_uring_enter", "io_uring_enter", (-1, 0, 0, 0, 0, 0)),
    ("io_uring_register", "io_uring_register", (-1, 0, 0, 0)),
]
# What an ordinary program does, which the filter must leave alone.
ALLOWED: list[tuple[str, str, tuple[int, ...]]] = [
    ("ptrace-traceme", "ptrace", (PTRACE_TRACEME, 0, 0, 0)),
    ("personality-linux", "personality", (0,)),
    ("clone-plain", "clone", (SIGCHLD, 0, 0, 0, 0)),
    ("ioctl-other", "ioctl", (-1, 0x5401, 0)),  # TCGETS on no descriptor: EBADF
]


def in_child(number: int, args: tuple[int, ...]) -> str:
    """Make the call in a forked child; its errno comes back as the exit code (0: it worked)."""

    def call() -> int:
        result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
        return 0 if result >= 0 else ctypes.get_errno()

    return forked(call)


def forked(call: Callable[[], int]) -> str:
    pid = os.fork()
    if pid == 0:
        os._exit(min(call(), 255))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return "ok"
    if code < 0:
        return f"signal{-code}"
    return errno.errorcode.get(code, str(code))


def i386_getpid() -> int:
    """getpid through the 32-bit ABI (int 0x80), whose numbers a native filter does not see."""
    # mov eax, 20 (getpid on i386); int 0x80; ret  — eax holds the pid or -errno.
    code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    result: int = ctypes.CFUNCTYPE(ctypes.c_int)(address)()
    return 0 if result > 0 else -result


def main() -> None:
    numbers: dict[str, int] = json.loads(sys.argv[1])
    for label, name, args in [*CALLS, *ALLOWED]:
        if name in numbers:
            print(f"SYSCALL {label} {in_child(numbers[name], args)}", flush=True)
    if "getpid" in numbers and os.uname().machine == "x86_64":
        print(f"SYSCALL x32-getpid {in_child(X32_SYSCALL_BIT | numbers['getpid'], ())}")
        print(f"SYSCALL i386-getpid {forked(i386_getpid)}", flush=True)
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Seccomp:"):
            print(f"SYSCALL mode {line.split()[1]}", flush=True)


if __name__ == "__main__":
    main()
