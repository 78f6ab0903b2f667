"""A maker that tries what a capability or a kernel interface would let it do, then fixes calc.py.

argv: VICTIM [VICTIM ...]: host files outside anything the sandbox lets it write. Each attempt
prints one line `CAPS <what> <outcome>` to stdout; the test decides from the host (the key's
bytes in no output, each victim's bytes, the caller's terminal) whether the promise held.

- `capeff`: the effective capability set, from /proc/self/status;
- `session`: whether the agent shares a session (and so a terminal) with loopctl: its session id
  is 0 when the session's leader lives outside its PID namespace; /dev/tty opens only with one;
- `userns`: unshare(CLONE_NEWUSER), the door to every namespaced capability;
- `umount`: detach the tmpfs that hides ~/.ssh, then read the key under it;
- `remount`: every mount made writable again (MS_REMOUNT | MS_BIND, its other flags kept),
  then an append to each victim.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from pathlib import Path

MNT_DETACH = 2
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND = 32, 4096
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
CLONE_NEWUSER = 0x10000000
_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}

libc = ctypes.CDLL(None, use_errno=True)


def say(what: str, outcome: str) -> None:
    print(f"CAPS {what} {outcome}", flush=True)


def outcome(result: int) -> str:
    return "ok" if result == 0 else f"refused {errno.errorcode.get(ctypes.get_errno(), '?')}"


def capeff() -> None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            say("capeff", line.split()[1])


def session() -> None:
    say("session", f"sid={os.getsid(0)}")
    try:
        os.close(os.open("/dev/tty", os.O_RDWR))
        say("tty", "opened")
    except OSError as exc:
        say("tty", f"refused {errno.errorcode.get(exc.errno or 0, '?')}")


def userns() -> None:
    say("userns", outcome(libc.unshare(CLONE_NEWUSER)))


def umount_ssh() -> None:
    ssh = Path.home() / ".ssh"
    say("umount", outcome(libc.umount2(str(ssh).encode(), MNT_DETACH)))
    for key in sorted(ssh.glob("*")) if ssh.is_dir() else []:
        try:
            say("key", f"READ {key.read_text().strip()}")
        except OSError as exc:
            say("key", f"refused {exc.strerror}")


def mounts() -> list[tuple[str, int]]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")
        flags = sum(_FLAGS.get(option, 0) for option in fields[5].split(","))
        found.append((point, flags))
    return found


def remount(victims: list[Path]) -> None:
    results = {}
    for point, flags in mounts():
        done = libc.mount(b"none", point.encode(), None, MS_REMOUNT | MS_BIND | flags, None)
        results[point] = outcome(done)
    say("remount", "ok" if any(v == "ok" for v in results.values()) else "refused all")
    for victim in victims:
        try:
            with victim.open("a", encoding="utf-8") as handle:
                handle.write("PWNED by the agent\n")
            say("victim", f"WROTE {victim}")
        except OSError as exc:
            say("victim", f"refused {victim}: {exc.strerror}")


def main() -> None:
    victims = [Path(arg) for arg in sys.argv[1:]]
    if not sys.stdin.isatty():
        sys.stdin.read()
    capeff()
    session()
    umount_ssh()
    remount(victims)
    userns()  # last: once in a user namespace of its own, the sandbox's mounts are out of reach
    calc = Path("calc.py")
    if calc.is_file():
        calc.write_text(calc.read_text().replace("a - b", "a + b"))


if __name__ == "__main__":
    main()
