"""A git remote over HTTP on 127.0.0.1 that answers every request 401 and asks for a password,
so git asks its askpass program and credential helpers for one: what the tests of those look
at. It records the paths it was asked for."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Unauthorized(BaseHTTPRequestHandler):
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="loopctl-test"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def unauthorized_remote() -> Iterator[tuple[str, list[str]]]:
    """(the URL of a repository on the server, the paths it has been asked for so far)."""
    seen: list[str] = []
    handler = type("Handler", (_Unauthorized,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/project.git", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
