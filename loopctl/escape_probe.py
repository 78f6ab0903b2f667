"""The program `loopctl doctor` runs inside a real sandbox: it tries to get out, as an agent would.

A child program, never imported: it runs under `python -I` with the standard library only.
argv: ROOT WORKTREE HOME STORE LIMITS DOORS, where STORE is a credential store loopctl hid for
this probe (a key file inside), LIMITS the rlimits it should find, as JSON, and DOORS (JSON) a
host loopback port and abstract socket name it must not reach. Each finding is one line
`name ok|FAIL detail`; a FAIL means that escape worked.

The escapes are those a process holding a capability, or a kernel door it should not have, can
take (issue 24): unmount what hides a credential store and read under it, remount a read-only
place writable, create a user namespace (in which every capability is back), and write through
a link planted in the worktree to a place outside it. Two need no capability, so only the
seccomp filter shuts them: reaching the kernel keyring, and tracing another process (the
CLI that started a tool holds the model connection in its memory).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import resource
import signal
import socket
import sys
from pathlib import Path

MNT_DETACH = 2
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND = 32, 4096
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
CLONE_NEWUSER = 0x10000000
KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING = 0, -3
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
# keyctl(2)'s number (glibc has no wrapper for it): x86-64's, and the generic table's.
_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "loongarch64": 219}
_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}
_RLIMITS = {
    "memory": resource.RLIMIT_DATA,
    "pids": resource.RLIMIT_NPROC,
    "cpu_time": resource.RLIMIT_CPU,
    "disk": resource.RLIMIT_FSIZE,
}

libc = ctypes.CDLL(None, use_errno=True)


def line(name: str, ok: bool, detail: str) -> None:
    print(name, "ok" if ok else "FAIL", detail, flush=True)


def why() -> str:
    return errno.errorcode.get(ctypes.get_errno(), "?")


def processes() -> None:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    line("processes", len(pids) < 10, f"{len(pids)} processes visible (only the sandbox's own)")


def checkout(root: Path) -> None:
    try:
        (root / ".loop" / ".doctor-probe").write_text("x")
        line("checkout", False, f"wrote {root / '.loop'}")
    except OSError as exc:
        line("checkout", True, f"{root / '.loop'} is read-only ({exc.strerror})")


def worktree(place: Path) -> None:
    try:
        (place / "probe").write_text("x")
        line("worktree", True, f"{place} is writable")
    except OSError as exc:
        line("worktree", False, f"cannot write the worktree: {exc.strerror}")


def credentials(home: Path) -> None:
    ssh = home / ".ssh"
    try:
        shown = os.listdir(ssh) if ssh.is_dir() else []
        line("credentials", not shown, f"{ssh}: {len(shown)} entries visible")
    except OSError as exc:
        line("credentials", True, f"{ssh}: {exc.strerror}")


def umount(store: Path) -> None:
    done = libc.umount2(str(store).encode(), MNT_DETACH)
    refused = why()
    try:
        shown = sorted(entry.name for entry in store.iterdir())
    except OSError:
        shown = []
    if done == 0 or shown:
        line("umount", False, f"unmounted what hides {store} and saw {len(shown)} entries")
    else:
        line("umount", True, f"umount of the hidden {store} refused ({refused})")


def mounts() -> list[tuple[str, int]]:
    found = []
    for text in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = text.split()
        point = fields[4].encode().decode("unicode_escape")
        flags = sum(_FLAGS.get(option, 0) for option in fields[5].split(","))
        found.append((point, flags))
    return found


def remount(root: Path) -> None:
    """Every mount made writable again (its other flags kept): the checkout's among them."""
    worked = []
    for point, flags in mounts():
        done = libc.mount(b"none", point.encode(), None, MS_REMOUNT | MS_BIND | flags, None)
        if done == 0:
            worked.append(point)
    if worked:
        line("remount", False, f"remounted {len(worked)} mounts writable, {worked[0]} first")
        return
    try:
        (root / ".loop" / ".doctor-probe").write_text("x")
        line("remount", False, f"remount refused, yet {root / '.loop'} took a write")
    except OSError:
        line("remount", True, "remount of every mount refused; the checkout stays read-only")


def userns() -> None:
    """unshare(CLONE_NEWUSER) in a child, so that this process keeps its own namespace."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(CLONE_NEWUSER) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        line("userns", False, "created a user namespace (every capability, inside it)")
    else:
        line("userns", True, "no user namespace can be created")


def keyring() -> None:
    """The session keyring's id asked for (never created): the keyring is other sessions'
    secrets, and no capability guards it."""
    number = _KEYCTL.get(os.uname().machine)
    if number is None:
        line("keyring", True, f"not tried: keyctl's number on {os.uname().machine} is unknown")
        return
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    args = (KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)
    found = syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    if found >= 0:
        line("keyring", False, f"keyctl reached the kernel keyring (session keyring {found})")
    else:
        line("keyring", True, f"keyctl refused ({why()})")


def ptrace() -> None:
    """PTRACE_SEIZE of its parent (which it does not stop, and which is let go when the child
    that seized it exits), and PTRACE_ATTACH of a child of its own: without the filter only
    the host's Yama setting, if any, keeps the first from working; the second Yama allows."""
    parent = os.getppid()
    worked = []
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.ptrace(PTRACE_SEIZE, parent, None, None) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        worked.append(f"seized its parent (pid {parent})")
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(writing)
        os.read(reading, 1)  # waits until the probe is done with it
        os._exit(0)
    os.close(reading)
    attached = libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0
    refused = why()
    if attached:
        worked.append(f"attached to a process of its own (pid {pid})")
    os.close(writing)
    if attached:
        os.kill(pid, signal.SIGKILL)  # a traced child stops; killing it is how a tracer ends it
    while True:  # a tracer is told of its child's stops too
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            break
    if worked:
        line("ptrace", False, "ptrace " + " and ".join(worked))
    else:
        line("ptrace", True, f"PTRACE_ATTACH and PTRACE_SEIZE refused ({refused})")


def planted_link(root: Path, place: Path, home: Path) -> None:
    """Links in the worktree to places outside it, written through. What a symlink reaches
    the host checks afterwards (a write may land in the private /tmp, which is no escape); a
    hard link to the user's file is judged here."""
    for number, target in enumerate(link_targets(root, home)):
        link = place / f"planted-{number}"
        with contextlib.suppress(OSError):
            link.symlink_to(target)
        with contextlib.suppress(OSError):
            fd = os.open(link, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.close(fd)
    victim = next((p for p in sorted(root.iterdir()) if p.is_file()), None)
    if victim is not None:
        hard = place / "planted-hard"
        try:
            os.link(victim, hard)
            # Opened, never written: a hole is shown without touching the user's file.
            os.close(os.open(hard, os.O_WRONLY | os.O_APPEND))
        except OSError as exc:
            line("link", True, f"a hard link to {victim} refused ({exc.strerror})")
            return
        line("link", False, f"opened {victim} for writing through a hard link")
        return
    line("link", True, "no file in the checkout to link to")


def link_targets(root: Path, home: Path) -> list[Path]:
    """Where the planted links point: in the checkout and in the user's home."""
    return [root / ".loop" / ".doctor-probe-link", home / ".doctor-probe-link"]


def limits(wanted: dict[str, int]) -> None:
    missing = []
    for name, value in wanted.items():
        soft, _ = resource.getrlimit(_RLIMITS[name])
        # pids: an ordinary user's ceiling is the tasks it already runs plus the limit.
        if soft == resource.RLIM_INFINITY or (name != "pids" and soft > value):
            missing.append(name)
    if missing:
        line("limits", False, f"not in place: {', '.join(missing)}")
    else:
        shown = ", ".join(wanted) or "none configured"
        line("limits", True, f"rlimits in place: {shown}")


def network(doors: dict[str, object]) -> None:
    """The host's loopback listener and abstract socket stay out of reach (a network namespace
    of its own); through the proxy, a host nobody listed is refused."""

    reached = []
    knocks: list[tuple[socket.AddressFamily, object, str]] = [
        (socket.AF_UNIX, "\0" + str(doors.get("abstract")), "the host's abstract socket"),
    ]
    if isinstance(doors.get("port"), int):
        knocks.append(
            (socket.AF_INET, ("127.0.0.1", doors["port"]), "the host's 127.0.0.1 listener")
        )
    for family, address, label in knocks:
        with socket.socket(family, socket.SOCK_STREAM) as knock:
            knock.settimeout(10)
            try:
                knock.connect(address)  # type: ignore[arg-type]
                reached.append(label)
            except OSError:
                pass
    proxy = os.environ.get("HTTPS_PROXY", "")
    if proxy.startswith("http://127.0.0.1:"):
        port = int(proxy.rsplit(":", 1)[1].strip("/"))
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 10) as c:
            c.sendall(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
            status = c.recv(64).split(b" ")[1:2]
            if status == [b"200"]:
                reached.append("an unlisted host through the proxy")
    if reached:
        line("network", False, "reached " + ", ".join(reached))
    else:
        line("network", True, "no host listener, abstract socket or unlisted host reachable")


def main() -> None:
    root, place, home, store = (Path(arg) for arg in sys.argv[1:5])
    wanted = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    doors = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    processes()
    checkout(root)
    worktree(place)
    credentials(home)
    umount(store)
    planted_link(root, place, home)
    limits(wanted)
    network(doors)
    remount(root)  # late: once a mount is writable, the checks after it would see it so
    userns()
    keyring()
    ptrace()


if __name__ == "__main__":
    main()
