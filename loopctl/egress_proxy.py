"""loopctl's egress proxy: the only way out of a sandbox's network namespace (issue 25).

It runs in loopctl's own process, outside the sandbox, for as long as one sandboxed process
does (`serving`). It listens on one unix socket per inner port, in a private folder the sandbox
sees read-only; inside, `egress_bridge` pipes each loopback connection to its socket. Per socket:

- the forward proxy (`PROXY_PORT`): `CONNECT host:port` opens a tunnel to an allowed target (its
  bytes are encrypted: nothing is rewritten), an absolute-form `GET http://host:port/...` is
  forwarded to an allowed target; anything else is refused with 403 and recorded as `host:port`;
- a route (`ROUTE_PORT + i`): origin-form requests go to the route's upstream, over TLS when it
  is https (so the headers are ours to rewrite), with its Host;
- a mirror (an allowed loopback `host:port`, the same port inside): to that port on the host.

A lent secret's stand-in is replaced by its real value in request *headers* only, and only when
the request goes to a host that secret is for. Every request is parsed from its own head: the
upstream request says `Connection: close`, only the body its head declares is forwarded, and
the connection ends with the response, so no pipelined request can pass unparsed. An `Upgrade`
(websocket) is piped both ways after its head. Nothing here logs a header.
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

from loopctl.egress import (
    PROXY_PORT,
    ROUTE_PORT,
    EgressPolicy,
    HostPort,
    LentSecret,
    Route,
    socket_name,
)
from loopctl.egress_cassette import EgressTap, Exchange, Sink, Tee, dechunk
from loopctl.egress_heads import Head, rewrite_request, rewrite_response

MAX_HEAD = 64 * 1024  # a request or response head larger than this is refused
MAX_LINE = 8 * 1024  # a chunk-size or trailer line
CONNECT_TIMEOUT = 30.0
MAX_CONNECTIONS = 256  # at once, per sandboxed process
_CHUNK = 64 * 1024
# A unix socket's path holds at most 108 bytes (sun_path): the folder is made in /tmp.
_SHORT_TMP = "/tmp"
HTTPS_PORT = 443


class _Refused(Exception):
    """A request the proxy answers itself (status, reason), never forwarded."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.reason, self.detail = status, reason, detail


@contextlib.contextmanager
def serving(
    policy: EgressPolicy,
    refused: list[str],
    tap: EgressTap | None = None,
    asked: list[str] | None = None,
) -> Iterator[Path]:
    """Serve `policy` on unix sockets in a new private folder (yielded) until the block ends;
    every refused target is appended to `refused` once, as `host:port`, and every target asked
    for, allowed or not, to `asked` (the turn's footprint, issue 31); each forwarded exchange
    is told to `tap` (a cassette), which offline also says where requests go."""
    server = _Server(policy, refused, tap, asked)
    try:
        yield server.start()
    finally:
        server.stop()


class _Server:
    def __init__(
        self,
        policy: EgressPolicy,
        refused: list[str],
        tap: EgressTap | None,
        asked: list[str] | None = None,
    ) -> None:
        self.policy = policy
        self.refused = refused
        self.tap = tap
        self.asked = asked if asked is not None else []
        self.allowed = frozenset(policy.allowed())
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._listeners: list[socket.socket] = []
        self._folder: Path | None = None
        self._names: list[str] = []
        self._wake_read, self._wake_write = -1, -1
        self._acceptor: threading.Thread | None = None
        self._tls: ssl.SSLContext | None = None
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Path:
        base = _SHORT_TMP if os.access(_SHORT_TMP, os.W_OK | os.X_OK) else None
        folder = Path(tempfile.mkdtemp(prefix="loopctl-egress-", dir=base))  # mode 0700
        self._folder = folder
        handlers: dict[socket.socket, Callable[[socket.socket], None]] = {}
        try:
            for port, handler in self._plan().items():
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._listeners.append(listener)
                name = socket_name(port)
                listener.bind(str(folder / name))
                self._names.append(name)
                listener.listen(128)
                listener.setblocking(False)
                handlers[listener] = handler
            self._wake_read, self._wake_write = os.pipe()
        except BaseException:
            self.stop()
            raise
        self._acceptor = threading.Thread(
            target=self._accept_loop, args=(handlers,), name="loopctl-egress", daemon=True
        )
        self._acceptor.start()
        return folder

    def stop(self) -> None:
        if self._wake_write >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_write, b"x")
        if self._acceptor is not None:
            self._acceptor.join()
        for listener in self._listeners:
            listener.close()
        with self._lock:
            self._stopping = True
            live = list(self._live)
            threads = list(self._threads)
        for sock in live:
            _shut(sock)
        # Each ends at once, its sockets shut down; only one stuck in connect() could linger,
        # and it is a daemon that finds its socket shut when it gets one.
        deadline = time.monotonic() + 2.0
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        for fd in (self._wake_read, self._wake_write):
            if fd >= 0:
                os.close(fd)
        self._wake_read = self._wake_write = -1
        if self._folder is not None:
            # Names we made, unlinked by name (unlink follows no link); then the folder.
            for name in self._names:
                with contextlib.suppress(OSError):
                    os.unlink(self._folder / name)
            with contextlib.suppress(OSError):
                os.rmdir(self._folder)
            self._folder = None

    def _plan(self) -> dict[int, Callable[[socket.socket], None]]:
        """Which handler serves each inner port."""
        plan: dict[int, Callable[[socket.socket], None]] = {PROXY_PORT: self._forward_proxy}
        for index, route in enumerate(self.policy.routes):
            plan[ROUTE_PORT + index] = functools.partial(self._route, route)
        for mirror in self.policy.mirrors():
            plan.setdefault(mirror.port, functools.partial(self._mirror, mirror))
        return plan

    def _accept_loop(self, handlers: dict[socket.socket, Callable[[socket.socket], None]]) -> None:
        with selectors.DefaultSelector() as selector:
            for listener in handlers:
                selector.register(listener, selectors.EVENT_READ, listener)
            selector.register(self._wake_read, selectors.EVENT_READ, None)
            while True:
                for key, _ in selector.select():
                    ready: socket.socket | None = key.data
                    if ready is None:
                        return
                    # Until none waits (or no descriptor is left: the client's connect waits).
                    with contextlib.suppress(OSError):
                        while True:
                            conn, _ = ready.accept()
                            conn.setblocking(True)
                            self._spawn(handlers[ready], conn)

    def _spawn(self, handler: Callable[[socket.socket], None], conn: socket.socket) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            busy = len(self._threads) >= MAX_CONNECTIONS
        if busy:
            # A thread each: an agent opening connections without end must not exhaust
            # loopctl's own process. Its connection closes; the ones under way go on.
            conn.close()
            return
        self._track(conn)

        def run() -> None:
            try:
                handler(conn)
            except OSError:
                pass  # a peer that went away mid-request: nothing to answer
            finally:
                self._close(conn)

        thread = threading.Thread(target=run, name="loopctl-egress-conn", daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._live.add(sock)
            stopping = self._stopping
        if stopping:
            _shut(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._live.discard(sock)
        sock.close()

    def _record(self, target: HostPort) -> None:
        with self._lock:
            if str(target) not in self.refused:
                self.refused.append(str(target))

    # -- the three kinds of socket -----------------------------------------------------------

    def _forward_proxy(self, client: socket.socket) -> None:
        reader = _Reader(client)
        try:
            head = _parse_request(reader.head())
            if head.method == "CONNECT":
                target = _authority(head.target, 443)
                self._check(target)
                if self.tap is not None:  # encrypted: a cassette cannot hold it, nor replay it
                    if self.tap.redirect is not None:
                        raise _Refused(403, "Forbidden", "offline replay: no tunnel")
                    self.tap.tunnelled(target)
                upstream = self._connect(target, tls=False)
                try:
                    client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                    _pipe(client, upstream, reader.take())
                finally:
                    self._close(upstream)
                return
            parts = urlsplit(head.target)
            if parts.scheme != "http" or not parts.hostname:
                raise _Refused(400, "Bad Request", "the proxy takes CONNECT or http:// URLs")
            host = parts.netloc.rpartition("@")[2]
            target = _authority(host, 80)
            self._check(target)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            self._forward(reader, head, target, path, host, tls=False)
        except _Refused as refusal:
            _answer(client, refusal)

    def _route(self, route: Route, client: socket.socket) -> None:
        reader = _Reader(client)
        try:
            head = _parse_request(reader.head())
            target = route.target
            upstream = urlsplit(route.upstream)
            self._check(target)
            host = upstream.netloc.rpartition("@")[2]
            tls = upstream.scheme == "https"
            self._forward(reader, head, target, _origin_path(head.target), host, tls=tls)
        except _Refused as refusal:
            _answer(client, refusal)

    def _mirror(self, target: HostPort, client: socket.socket) -> None:
        reader = _Reader(client)
        try:
            self._check(target)
            if not reader.starts_like_http():
                # Another protocol (a database's, say): piped as it is. Nothing is rewritten,
                # so a stand-in in it stays a stand-in.
                upstream = self._connect(target, tls=False)
                try:
                    _pipe(client, upstream, reader.take())
                finally:
                    self._close(upstream)
                return
            head = _parse_request(reader.head())
            given = head.values("host")
            host = given[0] if len(given) == 1 else str(target)
            self._forward(reader, head, target, _origin_path(head.target), host, tls=False)
        except _Refused as refusal:
            _answer(client, refusal)

    # -- forwarding --------------------------------------------------------------------------

    def _check(self, target: HostPort) -> None:
        with self._lock:
            if str(target) not in self.asked:
                self.asked.append(str(target))
        if target not in self.allowed:
            self._record(target)
            raise _Refused(403, "Forbidden", f"{target} is not an allowed host of this sandbox")

    def _connect(self, target: HostPort, tls: bool) -> socket.socket:
        if self.tap is not None and self.tap.redirect is not None:
            target, tls = self.tap.redirect, False  # offline: the replay server, nothing else
        try:
            sock = socket.create_connection((target.host, target.port), CONNECT_TIMEOUT)
        except OSError as exc:
            raise _Refused(
                502, "Bad Gateway", f"cannot reach {target}: {exc.strerror or exc}"
            ) from exc
        self._track(sock)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls:
                wrapped = self._tls_context().wrap_socket(sock, server_hostname=target.host)
                self._untrack(sock)
                sock = wrapped
                self._track(sock)
            sock.settimeout(None)
        except (OSError, ssl.SSLError) as exc:
            self._close(sock)
            raise _Refused(502, "Bad Gateway", f"TLS with {target} failed: {exc}") from exc
        return sock

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._live.discard(sock)

    def _tls_context(self) -> ssl.SSLContext:
        # Made on first use, so that SSL_CERT_FILE as set when the turn starts counts.
        with self._lock:
            if self._tls is None:
                self._tls = ssl.create_default_context()
            return self._tls

    def _forward(
        self, reader: _Reader, head: Head, target: HostPort, path: str, host: str, tls: bool
    ) -> None:
        """Send one request (its head rewritten, exactly its declared body) to `target` and its
        response back; then the connection ends, or becomes a pipe after an upgrade."""
        framing = _request_framing(head)
        upgrade = "upgrade" in head.tokens("connection") and bool(head.values("upgrade"))
        if "100-continue" in head.tokens("expect"):
            # Answered here, so the body is sent before the response is read: one thread, one
            # direction at a time (a TLS socket must not be read and written at once).
            reader.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        # A real value never crosses the network in clear text to the HTTPS port: an agent
        # could send `http://api.example.com:443/` through the proxy to have it written in.
        secrets = self._secrets(target) if tls or target.port != HTTPS_PORT else ()
        upstream = self._connect(target, tls)
        sent, answered = Tee(upstream), Tee(reader.sock)
        try:
            upstream.sendall(rewrite_request(head, path, host, upgrade, secrets))
            _copy_body(reader, sent if self.tap else upstream, framing)
            answer = _Reader(upstream)
            while True:
                raw = answer.head()
                status = _status(raw)
                if 100 <= status < 200 and status != 101:
                    reader.sock.sendall(raw)  # an interim answer (103 Early Hints)
                    continue
                break
            if status == 101:
                reader.sock.sendall(raw)
                # Everything after the client's head so far is part of the new protocol.
                _pipe(reader.sock, upstream, reader.take(), answer.take())
                return
            reader.sock.sendall(rewrite_response(raw))
            framed = _response_framing(head.method, status, raw)
            _copy_body(answer, answered if self.tap else reader.sock, framed)
            if self.tap is not None:
                body = dechunk(bytes(sent.kept)) if framing[0] == "chunked" else bytes(sent.kept)
                self.tap.exchange(
                    Exchange(
                        str(target),
                        head.method,
                        path,
                        head.headers,
                        body,
                        raw[:-4],
                        bytes(answered.kept),
                        not (sent.over or answered.over),
                    )
                )
        finally:
            self._close(upstream)

    def _secrets(self, target: HostPort) -> tuple[LentSecret, ...]:
        return tuple(s for s in self.policy.secrets if target in s.hosts)


# -- reading and parsing -------------------------------------------------------------------


class _Reader:
    """Buffered reads of one socket: a head, a line, or exactly n bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        data = self.sock.recv(_CHUNK)
        self.buffer += data
        return bool(data)

    def starts_like_http(self) -> bool:
        """Whether the first bytes are an HTTP method and a space (what arrives first)."""
        # A method split across reads is read on; anything else is decided by what came.
        while (not self.buffer or self.buffer.isalpha()) and len(self.buffer) < 16:
            if not self._fill():
                break
        method, space, _ = self.buffer.partition(b" ")
        return bool(space) and method.isalpha() and method.isupper()

    def head(self) -> bytes:
        """Everything up to and including the blank line that ends a head."""
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            if len(self.buffer) > MAX_HEAD:
                raise _Refused(431, "Request Header Fields Too Large", "head too large")
            if not self._fill():
                raise _Refused(400, "Bad Request", "the connection ended inside a head")
        raw, self.buffer = self.buffer[: end + 4], self.buffer[end + 4 :]
        return raw

    def line(self) -> bytes:
        while (end := self.buffer.find(b"\r\n")) < 0:
            if len(self.buffer) > MAX_LINE:
                raise _Refused(400, "Bad Request", "line too long")
            if not self._fill():
                raise OSError("the connection ended inside a body")
        raw, self.buffer = self.buffer[: end + 2], self.buffer[end + 2 :]
        return raw

    def copy(self, count: int, sink: Sink) -> None:
        while count > 0:
            if not self.buffer and not self._fill():
                raise OSError("the connection ended inside a body")
            part, self.buffer = self.buffer[:count], self.buffer[count:]
            sink.sendall(part)
            count -= len(part)

    def copy_to_end(self, sink: Sink) -> None:
        if self.buffer:
            sink.sendall(self.take())
        while data := self.sock.recv(_CHUNK):
            sink.sendall(data)

    def take(self) -> bytes:
        taken, self.buffer = self.buffer, b""
        return taken


def _parse_request(raw: bytes) -> Head:
    """A request head, strictly: no folded lines, no bare CR or LF, one framing."""
    text = raw[:-4].decode("latin-1")
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0") or not parts[0].isalpha():
        raise _Refused(400, "Bad Request", "not an HTTP/1.x request line")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if (
            not colon
            or not name
            or name != name.strip()
            or any(c in line for c in "\r\n\0")
            or any(c in name for c in " \t")
        ):
            raise _Refused(400, "Bad Request", "a malformed header line")
        headers.append((name, value.strip(" \t")))
    return Head(parts[0].upper(), parts[1], parts[2], tuple(headers))


def _authority(text: str, default_port: int) -> HostPort:
    try:
        return HostPort.parse(text, default_port=default_port)
    except ValueError as exc:
        raise _Refused(400, "Bad Request", "not a host:port") from exc


def _origin_path(target: str) -> str:
    if target.startswith("/"):
        return target
    parts = urlsplit(target)
    if parts.scheme in ("http", "https") and parts.netloc:
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    raise _Refused(400, "Bad Request", "an origin-form request (a path) was expected")


# Framing: ("length", n), ("chunked", 0) or ("close", 0): to the end of the connection.
_Framing = tuple[str, int]


def _request_framing(head: Head) -> _Framing:
    encodings = head.values("transfer-encoding")
    lengths = {value.strip() for value in head.values("content-length")}
    if encodings:
        if lengths or ",".join(encodings).strip().lower() != "chunked":
            raise _Refused(400, "Bad Request", "ambiguous or unsupported body framing")
        return ("chunked", 0)
    if len(lengths) > 1 or any(not value.isdigit() for value in lengths):
        raise _Refused(400, "Bad Request", "a bad Content-Length")
    return ("length", int(lengths.pop())) if lengths else ("length", 0)


def _response_framing(method: str, status: int, raw: bytes) -> _Framing:
    if method == "HEAD" or status in (204, 304):
        return ("length", 0)
    head = _response_headers(raw)
    encodings = [v for k, v in head if k.lower() == "transfer-encoding"]
    lengths = {v.strip() for k, v in head if k.lower() == "content-length"}
    if encodings:
        last = encodings[-1].split(",")[-1].strip().lower()
        return ("chunked", 0) if last == "chunked" else ("close", 0)
    if len(lengths) == 1 and (value := lengths.pop()).isdigit():
        return ("length", int(value))
    return ("close", 0)


def _copy_body(reader: _Reader, sink: Sink, framing: _Framing) -> None:
    kind, length = framing
    if kind == "length":
        reader.copy(length, sink)
    elif kind == "close":
        reader.copy_to_end(sink)
    else:
        while True:
            line = reader.line()
            sink.sendall(line)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise OSError("a bad chunk size") from exc
            if size < 0:
                raise OSError("a bad chunk size")
            if size == 0:
                while (trailer := reader.line()) != b"\r\n":
                    sink.sendall(trailer)
                sink.sendall(b"\r\n")
                return
            reader.copy(size + 2, sink)  # the chunk and its CRLF


def _status(raw: bytes) -> int:
    first = raw.split(b"\r\n", 1)[0].split(b" ")
    if len(first) < 2 or not first[0].startswith(b"HTTP/") or not first[1].isdigit():
        raise OSError("the upstream did not answer HTTP")
    return int(first[1])


def _response_headers(raw: bytes) -> list[tuple[str, str]]:
    lines = raw[:-4].decode("latin-1").split("\r\n")[1:]
    return [(n, v.strip()) for n, _, v in (line.partition(":") for line in lines)]


def _answer(client: socket.socket, refusal: _Refused) -> None:
    body = f"loopctl egress proxy: {refusal.detail}\n".encode()
    head = (
        f"HTTP/1.1 {refusal.status} {refusal.reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        client.sendall(head.encode("ascii") + body)


# -- piping --------------------------------------------------------------------------------


def _pipe(
    first: socket.socket, second: socket.socket, to_second: bytes = b"", to_first: bytes = b""
) -> None:
    """Copy bytes both ways until both directions have ended or one side fails. One thread,
    non-blocking: a TLS socket is never read and written from two threads at once."""
    pending = {first: to_first, second: to_second}  # bytes waiting to be written to the key
    peer = {first: second, second: first}
    reading = {first: True, second: True}
    for sock in (first, second):
        sock.setblocking(False)
    with selectors.DefaultSelector() as selector:
        registered: dict[socket.socket, int] = {}
        while True:
            for sock in (first, second):
                events = (
                    selectors.EVENT_READ if reading[sock] and not pending[peer[sock]] else 0
                ) | (selectors.EVENT_WRITE if pending[sock] else 0)
                if events and sock not in registered:
                    selector.register(sock, events, sock)
                elif events and registered[sock] != events:
                    selector.modify(sock, events, sock)
                elif not events and sock in registered:
                    selector.unregister(sock)
                if events:
                    registered[sock] = events
                else:
                    registered.pop(sock, None)
            if not registered:
                return
            for key, mask in selector.select():
                sock = key.data
                if mask & selectors.EVENT_WRITE and pending[sock]:
                    try:
                        sent = sock.send(pending[sock])
                    except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                        sent = 0
                    pending[sock] = pending[sock][sent:]
                    if not pending[sock] and not reading[peer[sock]]:
                        _shut(sock, socket.SHUT_WR)
                if mask & selectors.EVENT_READ:
                    try:
                        data = sock.recv(_CHUNK)
                        while isinstance(sock, ssl.SSLSocket) and sock.pending():
                            data += sock.recv(sock.pending())
                    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                        continue
                    if data:
                        pending[peer[sock]] += data
                    else:
                        reading[sock] = False
                        if not pending[peer[sock]]:
                            _shut(peer[sock], socket.SHUT_WR)


def _shut(sock: socket.socket, how: int = socket.SHUT_RDWR) -> None:
    # The plain socket's shutdown, also for a TLS one: it wakes a thread blocked in it.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, how)
