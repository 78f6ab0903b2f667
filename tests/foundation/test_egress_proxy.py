"""loopctl's egress proxy on its own (issue 25): real unix sockets, real upstream servers.

What a hostile agent does through the whole sandbox is in tests/reliability/test_egress.py;
here, the proxy's HTTP handling where it is easiest to see: its folder, refusals, exact body
framing (chunked, a smuggling attempt, `Expect: 100-continue`), upgrades, what a mirror does with
a protocol that is not HTTP, and that leaving `serving` ends a stream still running.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loopctl import egress_proxy
from loopctl.egress import PROXY_PORT, EgressPolicy, HostPort, LentSecret, socket_name

REAL = "real-value-4242"


class RawServer:
    """A TCP server on 127.0.0.1 that hands each connection to `handler` and keeps what it
    received (all of it, until the client's side ends or the handler returns)."""

    def __init__(self, handler: Callable[[socket.socket, bytearray], None], port: int = 0) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(8)
        self.received: list[bytearray] = []
        self.handler = handler
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def target(self) -> HostPort:
        return HostPort("127.0.0.1", self.listener.getsockname()[1])

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            record = bytearray()
            self.received.append(record)
            threading.Thread(target=self._run, args=(conn, record), daemon=True).start()

    def _run(self, conn: socket.socket, record: bytearray) -> None:
        with conn:
            self.handler(conn, record)

    def close(self) -> None:
        self.listener.close()


def read_until(conn: socket.socket, record: bytearray, marker: bytes) -> None:
    while marker not in record:
        data = conn.recv(65536)
        if not data:
            return
        record += data


def answer_ok(conn: socket.socket, record: bytearray) -> None:
    """Read a head and its chunked or counted body, answer 200 with a short body."""
    read_until(conn, record, b"\r\n\r\n")
    head, _, _ = bytes(record).partition(b"\r\n\r\n")
    if b"chunked" in head.lower():
        read_until(conn, record, b"0\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            while len(record) < len(head) + 4 + int(line.split(b":")[1]):
                record += conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


@pytest.fixture
def upstream() -> Iterator[RawServer]:
    server = RawServer(answer_ok)
    yield server
    server.close()


def ask(folder: Path, port: int, data: bytes) -> bytes:
    """Send `data` to the proxy's socket for inner `port`; everything that comes back."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(folder / socket_name(port)))
        conn.sendall(data)
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
    return got


def secret_for(target: HostPort, value: str = REAL) -> LentSecret:
    return LentSecret("API_KEY", value, (target,))


def test_the_folder_is_private_short_and_gone_afterwards(upstream: RawServer) -> None:
    policy = EgressPolicy(hosts=(upstream.target, HostPort("localhost", upstream.target.port)))
    with egress_proxy.serving(policy, []) as folder:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert len(str(folder / socket_name(65535))) < 100  # sun_path holds 108 bytes
        # One socket per port: two names of the same loopback port share it.
        assert sorted(os.listdir(folder)) == sorted(
            socket_name(port) for port in (PROXY_PORT, upstream.target.port)
        )
    assert not folder.exists()


def test_unlisted_targets_are_refused_once_each_and_never_reached(upstream: RawServer) -> None:
    refused: list[str] = []
    with egress_proxy.serving(EgressPolicy(), refused) as folder:
        for _ in range(2):
            got = ask(folder, PROXY_PORT, f"CONNECT {upstream.target} HTTP/1.1\r\n\r\n".encode())
            assert got.startswith(b"HTTP/1.1 403 ")
        got = ask(folder, PROXY_PORT, b"GET http://[::1]:9/x HTTP/1.1\r\nHost: x\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 403 ")
        assert ask(folder, PROXY_PORT, b"GET /x HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert refused == [str(upstream.target), "[::1]:9"]
    assert upstream.received == []


def test_a_real_value_never_goes_in_clear_text_to_the_https_port(upstream: RawServer) -> None:
    """`http://host:443/` through the proxy, for a host the secret is for: the request goes,
    with the stand-in; the same request to a plain-HTTP port gets the real value."""
    try:
        https_port = RawServer(answer_ok, port=443)
    except OSError as exc:  # an ordinary user may not bind port 443
        pytest.skip(f"cannot listen on 127.0.0.1:443 here: {exc.strerror}")
    targets = (https_port.target, upstream.target)
    secret = LentSecret("API_KEY", REAL, targets)
    try:
        with egress_proxy.serving(EgressPolicy(hosts=targets, secrets=(secret,)), []) as folder:
            for target in targets:
                request = (
                    f"GET http://{target}/v1 HTTP/1.1\r\nHost: {target}\r\n"
                    f"x-api-key: {secret.stand_in}\r\n\r\n"
                )
                assert ask(folder, PROXY_PORT, request.encode()).startswith(b"HTTP/1.1 200 ")
    finally:
        https_port.close()
    (to_https,) = https_port.received
    (to_plain,) = upstream.received
    assert REAL.encode() not in to_https
    assert secret.stand_in.encode() in to_https
    assert f"x-api-key: {REAL}".encode() in to_plain


def test_a_chunked_body_goes_through_exactly_and_nothing_after_it(upstream: RawServer) -> None:
    target = upstream.target
    secret = secret_for(target)
    policy = EgressPolicy(hosts=(target,), secrets=(secret,))
    body = f"4\r\nab{secret.stand_in[:2]}\r\n0\r\n\r\n"
    request = (
        f"POST http://{target}/v1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        f"X-Key: {secret.stand_in}\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\n\r\n{body}"
        f"GET http://{target}/second HTTP/1.1\r\nX-Key: {secret.stand_in}\r\n\r\n"
    )
    with egress_proxy.serving(policy, []) as folder:
        got = ask(folder, PROXY_PORT, request.encode())
    assert got.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Connection: close\r\n" in got
    assert got.endswith(b"\r\n\r\nok")
    (sent,) = upstream.received
    head, _, rest = bytes(sent).partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"POST /v1 HTTP/1.1"
    assert f"X-Key: {REAL}".encode() in head
    assert b"X-Drop" not in head  # named in Connection: hop-by-hop
    assert b"Connection: close" in head
    assert rest == body.encode()  # the body as it was: no rewriting there, nothing after it


@pytest.mark.parametrize(
    "head",
    [
        "Content-Length: 3\r\nTransfer-Encoding: chunked",
        "Content-Length: 3\r\nContent-Length: 4",
        "Transfer-Encoding: gzip",
        "X-Folded: a\r\n b",
    ],
    ids=["length-and-chunked", "two-lengths", "not-chunked", "folded-line"],
)
def test_ambiguous_framing_is_refused_before_anything_is_sent(
    upstream: RawServer, head: str
) -> None:
    policy = EgressPolicy(hosts=(upstream.target,))
    request = f"POST http://{upstream.target}/ HTTP/1.1\r\n{head}\r\n\r\nabc"
    with egress_proxy.serving(policy, []) as folder:
        assert ask(folder, PROXY_PORT, request.encode()).startswith(b"HTTP/1.1 400 ")
    assert upstream.received == []


def test_expect_continue_is_answered_before_the_body(upstream: RawServer) -> None:
    policy = EgressPolicy(hosts=(upstream.target,))
    with (
        egress_proxy.serving(policy, []) as folder,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn,
    ):
        conn.connect(str(folder / socket_name(upstream.target.port)))
        conn.sendall(b"PUT /f HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        assert conn.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        conn.sendall(b"hi")
        got = b""
        while chunk := conn.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 200 OK")
    assert bytes(upstream.received[0]).endswith(b"\r\n\r\nhi")
    assert b"Expect" not in bytes(upstream.received[0])


def test_an_upgrade_is_piped_both_ways_after_its_head() -> None:
    def websocket(conn: socket.socket, record: bytearray) -> None:
        read_until(conn, record, b"\r\n\r\n")
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
        while data := conn.recv(65536):
            conn.sendall(b"echo:" + data)

    server = RawServer(websocket)
    policy = EgressPolicy(hosts=(server.target,))
    try:
        with (
            egress_proxy.serving(policy, []) as folder,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn,
        ):
            conn.connect(str(folder / socket_name(server.target.port)))
            conn.sendall(b"GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            assert head.startswith(b"HTTP/1.1 101 ")
            conn.sendall(b"frame")
            assert conn.recv(65536) == b"echo:frame"
        sent = bytes(server.received[0])
        assert b"Connection: Upgrade\r\n" in sent
        assert b"Upgrade: websocket\r\n" in sent
    finally:
        server.close()


def test_a_mirror_pipes_a_protocol_that_is_not_http() -> None:
    def redis(conn: socket.socket, record: bytearray) -> None:
        read_until(conn, record, b"\r\n")
        conn.sendall(b"+PONG\r\n")

    server = RawServer(redis)
    policy = EgressPolicy(hosts=(server.target,))
    try:
        with egress_proxy.serving(policy, []) as folder:
            assert ask(folder, server.target.port, b"PING\r\n") == b"+PONG\r\n"
    finally:
        server.close()


def test_a_secret_goes_only_to_the_hosts_it_is_lent_for(upstream: RawServer) -> None:
    """Two allowed hosts, a secret lent for one: the other gets the stand-in, never the value,
    whichever way the request is sent (absolute-form through the proxy, or its mirror port)."""
    other = RawServer(answer_ok)
    secret = secret_for(upstream.target)
    policy = EgressPolicy(hosts=(upstream.target, other.target), secrets=(secret,))
    try:
        with egress_proxy.serving(policy, []) as folder:
            for target, port in ((other.target, PROXY_PORT), (other.target, other.target.port)):
                path = f"http://{target}/x" if port == PROXY_PORT else "/x"
                request = (
                    f"GET {path} HTTP/1.1\r\nHost: {target}\r\nX-Key: {secret.stand_in}\r\n\r\n"
                )
                assert ask(folder, port, request.encode()).endswith(b"ok")
            request = f"GET /x HTTP/1.1\r\nX-Key: {secret.stand_in}\r\n\r\n"
            assert ask(folder, upstream.target.port, request.encode()).endswith(b"ok")
    finally:
        other.close()
    assert len(other.received) == 2
    for sent in other.received:
        assert secret.stand_in.encode() in sent
        assert REAL.encode() not in sent
    assert f"X-Key: {REAL}".encode() in bytes(upstream.received[0])


def test_a_secret_that_would_split_the_head_is_not_put_in(upstream: RawServer) -> None:
    secret = secret_for(upstream.target, "bad\r\nX-Injected: 1")
    policy = EgressPolicy(hosts=(upstream.target,), secrets=(secret,))
    request = f"GET / HTTP/1.1\r\nAuthorization: {secret.stand_in}\r\n\r\n"
    with egress_proxy.serving(policy, []) as folder:
        assert ask(folder, upstream.target.port, request.encode()).endswith(b"ok")
    sent = bytes(upstream.received[0])
    assert secret.stand_in.encode() in sent
    assert b"X-Injected" not in sent


def test_leaving_serving_ends_a_response_still_streaming() -> None:
    started = threading.Event()

    def endless(conn: socket.socket, record: bytearray) -> None:
        read_until(conn, record, b"\r\n\r\n")
        started.set()  # before sending: the client may read the event before a later set()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n")
        while conn.recv(65536):
            pass

    server = RawServer(endless)
    policy = EgressPolicy(hosts=(server.target,))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            with egress_proxy.serving(policy, []) as folder:
                conn.connect(str(folder / socket_name(server.target.port)))
                conn.sendall(b"GET /stream HTTP/1.1\r\n\r\n")
                got = b""
                while b"data: 1" not in got:
                    got += conn.recv(65536)
                assert started.is_set()
            # The proxy is gone: the stream ends instead of hanging.
            while conn.recv(65536):
                pass
    finally:
        server.close()
