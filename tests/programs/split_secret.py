"""Print SECRET to stdout in two writes, the second only after the reader took the first.

usage: split_secret.py SECRET

This simulates an agent that read a credential from a file and echoes it in pieces. Waiting
until the pipe is empty (FIONREAD) guarantees the two halves reach loopctl in separate reads,
so redaction that works per read chunk instead of per line would let the secret through.
"""

from __future__ import annotations

import fcntl
import struct
import sys
import termios
import time


def unread_bytes(fd: int) -> int:
    raw = fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0))
    value: int = struct.unpack("i", raw)[0]
    return value


def main() -> None:
    secret = sys.argv[1]
    half = len(secret) // 2
    out = sys.stdout.buffer
    out.write(b"before ")
    out.write(secret[:half].encode())
    out.flush()
    deadline = time.monotonic() + 5
    try:
        while unread_bytes(1) and time.monotonic() < deadline:
            time.sleep(0.001)
    except OSError:
        pass  # not a pipe, or no FIONREAD here: the halves may merge, the output is still valid
    out.write(secret[half:].encode() + b" after\n")
    out.flush()


if __name__ == "__main__":
    main()
