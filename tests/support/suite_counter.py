"""Counting a check's suite runs from inside the sandbox: each run connects to a TCP listener
of the test's before it checks anything. A confined check may write no file outside its
worktree, but it has the network, so the count needs no hole in the sandbox."""

from __future__ import annotations

import socketserver
import threading

from support.repos import PY

CHECKS = "import calc; assert calc.add(2, 3) == 5, 'add(2, 3) is not 5'"


class SuiteCounter:
    """Counts suite runs: each run connects, says one byte and waits for the answer, so a run
    is counted before it ends."""

    def __init__(self) -> None:
        self.runs = 0
        lock = threading.Lock()
        counter = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                if self.request.recv(1):
                    with lock:
                        counter.runs += 1
                    self.request.sendall(b"k")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def call(self) -> str:
        """Python source that counts one run."""
        return (
            f"import socket; _s = socket.create_connection(('127.0.0.1', {self.port}));"
            " _s.sendall(b'1'); _s.recv(1); _s.close()"
        )

    @property
    def network(self) -> str:
        """.loop/config.toml lines that let checks reach the counter: they have no network
        unless a loop or the config says (issue 25)."""
        return f'\n[checker]\nnetwork = ["127.0.0.1:{self.port}"]\n'

    def check(self, body: str = CHECKS) -> tuple[str, ...]:
        return (PY, "-B", "-c", f"{self.call}\n{body}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
