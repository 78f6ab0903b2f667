"""Fake maker: fixes add(), and writes what a patch must carry exactly: CR LF line endings,
bytes that are not UTF-8, a binary file, and terminal escape sequences in a file's text."""

import json
import sys
from pathlib import Path

sys.stdin.read()
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
Path("windows.txt").write_bytes(b"one\r\ntwo\r\n")
Path("latin1.txt").write_bytes(b"caf\xe9\n")
Path("blob.bin").write_bytes(bytes(range(256)) * 4)
Path("notes.txt").write_text("all good\x1b]0;pwned\x07\x1b[2J\x1b[32mALL CHECKS PASSED\x1b[0m\n")
print(json.dumps({"type": "result", "result": "fixed add()", "is_error": False}))
