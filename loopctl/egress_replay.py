"""The model of an offline replay: one turn's cassette served on 127.0.0.1 (issue 31, item 5).

While a run is replayed (`loopctl replay RUN --offline`), each agent turn's egress proxy sends
every request it forwards to this turn's `TurnPlayer` instead of the network (its `redirect`);
tunnels are refused. The player answers each request with the recorded response of the first
unanswered recorded request that matches it (method, path, and body as `normalised`), byte for
byte as the upstream sent it. A request nothing matches is a divergence: the player notes the
first (the recorded request it should have been, its index, where the two first differ) in the
replay's results file; strict, it answers that request and every later one with an HTTP 400;
not strict, it answers with the next unanswered recorded response, so the run goes on to its end.
At the end of the turn a recorded request never made is a divergence too.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from loopctl.egress import HostPort
from loopctl.egress_cassette import (
    Cassette,
    Exchange,
    Recorded,
    dechunk,
    first_difference,
    normalised,
)
from loopctl.secrets import Redactor

_REFUSAL = json.dumps(
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "loopctl offline replay: this request diverged from the recording",
        },
    }
).encode()


class TurnPlayer:
    """The offline model of one turn (`turn`: "<task>/attempt-<n>/<role>"), its answers from
    `cassette` (None: the recording has no such turn), its findings appended to `results`."""

    def __init__(
        self,
        cassette: Cassette | None,
        turn: str,
        *,
        places: Mapping[str, str],
        strict: bool,
        results: Path,
        redactor: Redactor,
    ) -> None:
        self.cassette, self.turn, self.strict, self.results = cassette, turn, strict, results
        self.redactor = redactor
        recorded = dict(cassette.meta) if cassette else {}
        # What the recorded turn's paths were, and what they are now: both become the name.
        self._then = _spellings({k: str(recorded[k]) for k in places if recorded.get(k)})
        self._now = _spellings({name: path for name, path in places.items() if path})
        # A recorded answer names the recorded turn's places (a tool call's file path): they
        # are this turn's places when it is served, and the request echoing it is compared so.
        swaps = {str(recorded[k]): places[k] for k in places if recorded.get(k) and places[k]}
        self._swaps = sorted(swaps.items(), key=lambda item: -len(item[0]))
        self._now.update(self._then)
        self._left: list[Recorded] = list(cassette.exchanges) if cassette else []
        self._asked = 0
        self._lock = threading.Lock()
        self.divergence: dict[str, Any] | None = None
        player = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one_request(self) -> None:
                self.raw_requestline = self.rfile.readline(65537)
                if not self.raw_requestline or not self.parse_request():
                    self.close_connection = True
                    return
                body = _body(self)
                self.wfile.write(player.answer(self.command, self.path, body))
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the replay's results say what happened

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="loopctl-replay", daemon=True
        )
        self._thread.start()

    @property
    def redirect(self) -> HostPort | None:
        return HostPort("127.0.0.1", int(self._server.server_address[1]))

    def exchange(self, exchange: Exchange) -> None:
        pass  # answered (and compared) by the server itself

    def tunnelled(self, target: HostPort) -> None:
        pass  # refused by the proxy offline

    def answer(self, method: str, path: str, body: bytes) -> bytes:
        """The recorded response to this request, or a refusal; a divergence noted."""
        asked = normalised(self.redactor.redact_bytes(body), self._now)
        with self._lock:
            index = self._asked
            self._asked += 1
            if self.divergence is not None and self.strict:
                return _refused()
            for recorded in self._left:
                if (recorded.method, self._path(recorded.path, then=True)) == (
                    method,
                    self._path(path, then=False),
                ) and normalised(recorded.body, self._then) == asked:
                    self._left.remove(recorded)
                    return self._served(recorded.response)
            same = [r for r in self._left if r.method == method and r.path == path]
            expected = same[0] if same else (self._left[0] if self._left else None)
            if expected is None:
                total = len(self.cassette.exchanges) if self.cassette else 0
                what = (
                    "no such turn was recorded"
                    if self.cassette is None
                    else (f"the recording has {total} requests, all answered")
                )
                self._diverge(index, f"{method} {path} was not recorded ({what})")
                return _refused()
            if (expected.method, expected.path) != (method, path):
                detail = f"recorded {expected.method} {expected.path}, replayed {method} {path}"
            else:
                detail = first_difference(normalised(expected.body, self._then), asked)
            self._diverge(expected.index, detail)
            if self.strict:
                return _refused()
            self._left.remove(expected)
            return self._served(expected.response)

    def _served(self, response: bytes) -> bytes:
        """`response` with the recorded places swapped for this turn's, framed again by its
        length when that changed what it holds."""
        head, _, body = response.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        fields = [line.partition(b":")[0].strip().lower() for line in lines[1:]]
        chunked = any(
            name == b"transfer-encoding" and b"chunked" in line.lower()
            for name, line in zip(fields, lines[1:], strict=True)
        )
        content = dechunk(body) if chunked else body
        # At once: a place of this turn may lie under a recorded one (the replay's own cache).
        swaps = {then.encode(): now.encode() for then, now in self._swaps}
        pattern = re.compile(b"|".join(re.escape(then) for then in swaps))
        swapped = pattern.sub(lambda found: swaps[found.group(0)], content) if swaps else content
        if swapped == content:
            return response
        kept = [
            line
            for name, line in zip(fields, lines[1:], strict=True)
            if name not in (b"content-length", b"transfer-encoding")
        ]
        length = f"Content-Length: {len(swapped)}".encode()
        return b"\r\n".join([lines[0], *kept, length]) + b"\r\n\r\n" + swapped

    def _path(self, path: str, *, then: bool) -> str:
        return normalised(path.encode(), self._then if then else self._now).decode()

    def _diverge(self, index: int, detail: str) -> None:
        if self.divergence is None:
            self.divergence = {"attempt": self.turn, "index": index, "detail": detail}

    def close(self) -> None:
        """Stop serving; a recorded request never made is a divergence; the findings are
        appended to the results file."""
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            if self._left and self.divergence is None:
                first = self._left[0]
                self._diverge(
                    first.index,
                    f"recorded {first.method} {first.path} was never made"
                    f" ({len(self._left)} recorded requests left unasked)",
                )
            line = {"turn": self.turn, "asked": self._asked, "divergence": self.divergence}
        with self.results.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _spellings(places: Mapping[str, str]) -> dict[str, str]:
    """Each place's path → its name, as written and as a CLI spells it in a folder name
    (Claude Code keeps a project's files under its path with every other character a `-`)."""
    found: dict[str, str] = {}
    for name, path in places.items():
        found[path] = f"<{name}>"
        found.setdefault(re.sub(r"[^A-Za-z0-9]", "-", path), f"<{name}>")
    return found


def _refused() -> bytes:
    head = (
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(_REFUSAL)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + _REFUSAL


def _body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body, by its Content-Length or its chunks."""
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        out = bytearray()
        while True:
            size = int(handler.rfile.readline(8192).split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += handler.rfile.read(size)
            handler.rfile.readline(8192)
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length > 0 else b""
