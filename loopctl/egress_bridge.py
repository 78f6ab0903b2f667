"""The bridge inside a sandbox's network namespace: loopback ports to the proxy's unix sockets.

    python -I -S egress_bridge.py SOCKDIR PORT... -- COMMAND ARGS...

It listens on 127.0.0.1 (and ::1 where the namespace has it) at each PORT, pipes every
connection to `SOCKDIR/p<PORT>` (loopctl's egress proxy, outside), starts COMMAND with the same
stdin, stdout, stderr and environment, passes SIGTERM, SIGINT and SIGHUP on to it, and ends the
way it ends: its exit code, or its terminating signal raised again.

A standalone program (it imports nothing from loopctl: it runs in the sandbox with `-I -S`, and
its start is paid by every agent), single-threaded: threads count against the sandbox's process
limit. The child is watched through a pidfd (a SIGCHLD wake-up pipe where there is none). It
uses the C modules `_socket`, `_signal` and `select.epoll` directly: `socket`, `selectors` and
`signal` would import enum and collections, about 8 ms more at every agent's start.
"""

import _signal  # type: ignore[import-not-found]
import _socket
import errno
import os
import select
import sys

_CHUNK = 64 * 1024
_FORWARDED = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
_READ = select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR | select.EPOLLRDHUP
_WRITE = select.EPOLLOUT | select.EPOLLERR


class _Link:
    """One inner connection and its unix socket to the proxy: bytes both ways."""

    __slots__ = ("pending", "reading", "registered", "socks")

    def __init__(self, inner: _socket.socket, outer: _socket.socket) -> None:
        self.socks = (inner, outer)
        self.pending = [b"", b""]  # bytes waiting to be written to socks[i]
        self.reading = [True, True]
        self.registered = [0, 0]


class _Bridge:
    def __init__(self, folder: str, ports: list[int]) -> None:
        self.poll = select.epoll()
        self.listeners: dict[int, tuple[_socket.socket, str]] = {}
        self.links: dict[int, tuple[_Link, int]] = {}  # fd: (link, index of the socket)
        for port in ports:
            path = os.path.join(folder, f"p{port}")
            for family, host in ((_socket.AF_INET, "127.0.0.1"), (_socket.AF_INET6, "::1")):
                try:
                    listener = _socket.socket(family, _socket.SOCK_STREAM)
                except OSError:
                    continue  # no IPv6 in this namespace
                try:
                    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
                    if family == _socket.AF_INET6:
                        listener.setsockopt(_socket.IPPROTO_IPV6, _socket.IPV6_V6ONLY, 1)
                    listener.bind((host, port))
                    listener.listen(128)
                except OSError as exc:
                    listener.close()
                    if family == _socket.AF_INET:
                        # A port below 1024 needs a capability the sandbox does not hold: the
                        # agent still runs, without that port.
                        sys.stderr.write(f"loopctl egress bridge: no {host}:{port}: {exc}\n")
                    continue
                listener.setblocking(False)
                self.listeners[listener.fileno()] = (listener, path)
                self.poll.register(listener.fileno(), select.EPOLLIN)

    def accept(self, fd: int) -> None:
        listener, path = self.listeners[fd]
        while True:
            try:
                accepted, _ = listener._accept()  # type: ignore[attr-defined]
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of descriptors: the client sees its connection close
            inner = _socket.socket(fileno=accepted)
            outer = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                outer.connect(path)
            except OSError:
                inner.close()
                outer.close()
                continue
            inner.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            inner.setblocking(False)
            outer.setblocking(False)
            link = _Link(inner, outer)
            self.links[inner.fileno()] = (link, 0)
            self.links[outer.fileno()] = (link, 1)
            self.update(link)

    def update(self, link: _Link) -> None:
        """Register each socket of `link` for what it waits on; close the link when done."""
        for index, sock in enumerate(link.socks):
            events = (_READ if link.reading[index] and not link.pending[1 - index] else 0) | (
                select.EPOLLOUT if link.pending[index] else 0
            )
            was = link.registered[index]
            if events == was:
                continue
            if not was:
                self.poll.register(sock.fileno(), events)
            elif events:
                self.poll.modify(sock.fileno(), events)
            else:
                self.poll.unregister(sock.fileno())
            link.registered[index] = events
        if not any(link.registered):
            self.close(link)

    def close(self, link: _Link) -> None:
        for index, sock in enumerate(link.socks):
            if sock.fileno() < 0:
                continue
            if link.registered[index]:
                self.poll.unregister(sock.fileno())
            self.links.pop(sock.fileno(), None)
            sock.close()
        link.registered = [0, 0]

    def step(self, fd: int, mask: int) -> None:
        link, index = self.links[fd]
        sock, other = link.socks[index], 1 - index
        try:
            if mask & _WRITE and link.pending[index]:
                self.send(link, index)
            if mask & _READ and link.reading[index] and not link.pending[other]:
                try:
                    data = sock.recv(_CHUNK)
                except (BlockingIOError, InterruptedError):
                    data = None
                if data:
                    link.pending[other] = data
                    self.send(link, other)  # at once: no round through epoll for the common case
                elif data is not None:
                    link.reading[index] = False
                    if not link.pending[other]:
                        _shut_write(link.socks[other])
        except OSError:
            self.close(link)
            return
        self.update(link)

    def send(self, link: _Link, index: int) -> None:
        try:
            sent = link.socks[index].send(link.pending[index])
        except (BlockingIOError, InterruptedError):
            return
        link.pending[index] = link.pending[index][sent:]
        if not link.pending[index] and not link.reading[1 - index]:
            _shut_write(link.socks[index])


def _shut_write(sock: _socket.socket) -> None:
    try:  # noqa: SIM105 (contextlib would be one more import at each start)
        sock.shutdown(_socket.SHUT_WR)
    except OSError:
        pass


def _child_watch(pid: int) -> int:
    """A descriptor that becomes readable when the child may have ended."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        _signal.set_wakeup_fd(write)
        _signal.signal(_signal.SIGCHLD, lambda *_: None)
        return read


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") < 1 or argv.index("--") == len(argv) - 1:
        sys.stderr.write("usage: egress_bridge.py SOCKDIR PORT... -- COMMAND ARGS...\n")
        return 2
    split = argv.index("--")
    folder, ports, command = argv[0], [int(p) for p in argv[1:split]], argv[split + 1 :]
    bridge = _Bridge(folder, ports)
    child = 0
    early: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child:
            try:  # noqa: SIM105
                os.kill(child, signum)
            except ProcessLookupError:
                pass
        else:
            early.append(signum)

    for signum in _FORWARDED:
        _signal.signal(signum, forward)
    try:
        child = os.posix_spawnp(command[0], command, os.environ)
    except OSError as exc:
        sys.stderr.write(f"loopctl egress bridge: cannot start {command[0]}: {exc.strerror}\n")
        return 127 if exc.errno == errno.ENOENT else 126
    watch = _child_watch(child)
    bridge.poll.register(watch, select.EPOLLIN)
    for pending in early:
        os.kill(child, pending)
    while True:
        for fd, mask in bridge.poll.poll():
            if fd == watch:
                try:
                    while os.read(watch, 512):  # the wake-up pipe; a pidfd reads nothing
                        pass
                except OSError:
                    pass
                done, status = os.waitpid(child, os.WNOHANG)
                if done:
                    return _exit_like(status)
            elif fd in bridge.listeners:
                bridge.accept(fd)
            elif fd in bridge.links:  # not closed by an earlier event of this round
                bridge.step(fd, mask)


def _exit_like(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    signum = -code
    _signal.signal(signum, _signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum  # a signal that does not end a process (never one that ended it)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
