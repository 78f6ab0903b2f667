"""Fake maker that tries hosts its agent file does not list, then fixes nothing.

Each argument is a `host:port` it asks the egress proxy (HTTPS_PROXY) to tunnel to, as any
HTTPS client would; it prints what the proxy answered, writes notes.txt, and exits 0. Without
a proxy in its environment it says so and tries nothing (no DNS, no outside connection).
"""

import json
import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

sys.stdin.read()
proxy = os.environ.get("HTTPS_PROXY", "")
answers: dict[str, str] = {}
if not proxy:
    answers["*"] = "no HTTPS_PROXY: nothing tried"
else:
    where = urlsplit(proxy)
    for target in sys.argv[1:]:
        try:
            with socket.create_connection((where.hostname, where.port), timeout=30) as conn:
                conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
                answers[target] = conn.recv(200).decode("latin-1").split("\r\n", 1)[0]
        except OSError as exc:
            answers[target] = f"error: {exc}"
Path("notes.txt").write_text(json.dumps(answers) + "\n")
print(json.dumps({"type": "result", "result": json.dumps(answers), "is_error": False}))
