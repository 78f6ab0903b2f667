"""Print MEBIBYTES MiB of numbered lines, SECRET in the first, the middle and the last of them.

usage: floods_output.py MEBIBYTES SECRET CAPTURE_FILE

`lines(mebibytes, secret)` is the exact stream, so a test can rebuild what it expects. Before
exiting, once the reader has taken everything (FIONREAD says the pipe is empty), the program
prints the capture file's size at that moment on stderr: what a crash would leave on disk.
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys
import termios
import time
from collections.abc import Iterator

LINE = 64  # bytes per line, newline included


def lines(mebibytes: int, secret: str) -> Iterator[bytes]:
    count = mebibytes * (1 << 20) // LINE
    for number in range(count):
        text = f"line {number:012d} {secret if number in (0, count // 2, count - 1) else ''}"
        yield text.ljust(LINE - 1, ".").encode() + b"\n"


def main() -> None:
    mebibytes, secret, capture = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    out = sys.stdout.buffer
    batch: list[bytes] = []
    for line in lines(mebibytes, secret):
        batch.append(line)
        if len(batch) == 4096:
            out.write(b"".join(batch))
            batch.clear()
    out.write(b"".join(batch))
    out.flush()
    deadline = time.monotonic() + 30
    while struct.unpack("i", fcntl.ioctl(1, termios.FIONREAD, b"\0" * 4))[0]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.001)
    print(f"capture size {os.stat(capture).st_size}", file=sys.stderr)


if __name__ == "__main__":
    main()
