"""Git remotes over HTTP on 127.0.0.1 that record the paths they were asked for.

- `unauthorized_remote`: answers every request 401 and asks for a password, so git asks its
  askpass program and credential helpers for one: what the tests of those look at.
- `cookie_remote`: answers as an empty repository served the "dumb" way (an empty `info/refs`)
  and sets a cookie, which git saves wherever `http.cookieFile` names when `http.saveCookies`
  is on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COOKIE = "loopctl-test-session=from-the-server"


class _Recording(BaseHTTPRequestHandler):
    seen: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Unauthorized(_Recording):
    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="loopctl-test"')
        self.send_header("Content-Length", "0")
        self.end_headers()


class _SetsCookie(_Recording):
    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Set-Cookie", f"{COOKIE}; Path=/")
        self.send_header("Content-Length", "0")
        self.end_headers()


@contextmanager
def _serve(kind: type[_Recording]) -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []
    handler = type("Handler", (kind,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/project.git", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def unauthorized_remote() -> AbstractContextManager[tuple[str, list[str]]]:
    """(the URL of a repository on the server, the paths it has been asked for so far)."""
    return _serve(_Unauthorized)


def cookie_remote() -> AbstractContextManager[tuple[str, list[str]]]:
    """The same for a server that sets the cookie `COOKIE`."""
    return _serve(_SetsCookie)
