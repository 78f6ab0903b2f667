"""Print one long line with SECRET at byte START, handing the reader the first CUT bytes alone.

usage: secret_at_cut.py SECRET START CUT TOTAL

The line is TOTAL bytes of filler (no newline until the very end) with SECRET written over it at
START. The first CUT bytes go out in one write; the rest only after the reader has taken them
all (FIONREAD says the pipe is empty), so CUT is certainly a boundary between two reads. A
capture that flushed a long line at CUT without holding back a possible secret prefix would
write SECRET raw, split over its two flushes.
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
    secret = sys.argv[1].encode()
    start, cut, total = (int(arg) for arg in sys.argv[2:5])
    line = bytearray(b"x" * total)
    line[start : start + len(secret)] = secret
    line += b"\n"
    out = sys.stdout.buffer
    out.write(line[:cut])
    out.flush()
    deadline = time.monotonic() + 10
    while unread_bytes(1) and time.monotonic() < deadline:
        time.sleep(0.001)
    out.write(line[cut:])
    out.flush()


if __name__ == "__main__":
    main()
