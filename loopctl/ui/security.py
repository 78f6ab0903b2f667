"""Who may use the dashboard: one-time links, sessions, the Host header, and the origin of a change.

A link token is made in memory and shown once, in the URL printed on the user's terminal (and
handed to the browser it opens). It is never written to a file, an environment variable or a
command line of anything an agent can see: an agent's sandbox hides other processes and the
host's /tmp, so it cannot read the server's memory, argv or terminal.

- A link works once: the first GET that presents its token trades it for a session (a new random
  id in an HttpOnly SameSite=Strict cookie) and the token dies, so a token found later (in a
  browser's history, a terminal's scrollback, a screenshot) opens nothing. A new link comes
  from the terminal that runs `loopctl ui` (Enter) or a signal, never over HTTP.
- Sessions are kept as hashes of their ids, never the ids: they end when idle and at a fixed
  age. So that a restart of `loopctl ui` on the same address and port keeps its open tabs, the
  hashes and their times are also written to a 0600 file under loopctl's home (atomically) and
  read back when it starts again, expiring as before; a hash opens nothing by itself (the cookie
  must hash to it), and an agent's sandbox cannot write there. Links are never written.
- `Host` must name the address the server is bound to: a page whose DNS name rebinds to
  127.0.0.1 sends its own name and is refused.
- A change (approve, reject, …) is a POST whose `Origin` is this server exactly (scheme, host
  and port: a page on another port of 127.0.0.1 is the same *site* for SameSite cookies, not
  the same origin) and whose `Sec-Fetch-Site`, when the browser sends it, says same-origin.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from loopctl.atomicfile import write_atomic
from loopctl.paths import repo_slug

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("0.0.0.0", "::", "")


# A session ends after this long without a page opened or an action taken, and at this age.
IDLE_S = 30 * 60.0
MAX_AGE_S = 12 * 3600.0
# Live sessions kept at most (the oldest goes first): a human opens a handful.
MAX_SESSIONS = 64
# A session's last activity is written again after this much more of it (not on every request):
# a restart may then count it idle up to this much early, never late.
SAVE_EVERY_S = 15.0
STORE_FORMAT = 1


def new_token() -> str:
    """A fresh token (a link's or a session's id): 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Guard:
    """The checks every request passes, for a server bound to `host`:`port`."""

    host: str
    port: int

    @property
    def cookie(self) -> str:
        # Cookies ignore ports: two dashboards on one machine must not overwrite each other's.
        return f"loopctl_ui_{self.port}"

    def hosts(self) -> frozenset[str]:
        """`Host` values that name this server."""
        names = {*LOOPBACK_NAMES, _bracketed(self.host)} - {""}
        return frozenset(f"{name}:{self.port}" for name in names)

    def host_ok(self, value: str | None) -> bool:
        if not value:
            return False
        value = value.lower()
        if value in self.hosts():
            return True
        if self.host in WILDCARDS:
            # Bound to every address: any IP literal of this port (a DNS name could rebind;
            # an address cannot).
            name, _, port = value.rpartition(":")
            return port == str(self.port) and _is_ip_literal(name)
        return False

    def origin_ok(self, origin: str | None, fetch_site: str | None, host: str | None) -> bool:
        """Whether a state-changing request comes from a page of this very server."""
        if fetch_site is not None and fetch_site != "same-origin":
            return False
        if not origin or origin == "null" or not host:
            return False
        return origin.lower() == f"http://{host.lower()}" and self.host_ok(host)


def query_token(pairs: Iterable[tuple[str, str]]) -> str | None:
    """The `token` parameter of a query string, if any."""
    return next((value for key, value in pairs if key == "token"), None)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "replace")).digest()


@dataclass(slots=True)
class _Session:
    started: float
    seen: float


class Sessions:
    """The dashboard's one live link and the sessions links opened.

    Only hashes are kept, so that not even a dump of this object (or its file) holds a usable
    id. `clock` is monotonic seconds (a test passes its own to move time); `wall` is the time
    of day, for the file only (a monotonic clock starts again with the machine)."""

    def __init__(
        self,
        *,
        idle_s: float = IDLE_S,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.idle_s = idle_s
        self.max_age_s = max_age_s
        self._clock = clock
        self._wall = wall
        # Requests are served from several threads; a link must not open two sessions.
        self._lock = threading.Lock()
        self._link: bytes | None = None
        self._sessions: dict[bytes, _Session] = {}
        self._store: Path | None = None
        self._saved: dict[bytes, float] = {}  # each session's `seen` as last written

    def persist(self, store: Path) -> None:
        """Keep the sessions in `store` from now on, first taking back those a previous server
        on the same address and port wrote there that have not ended."""
        with self._lock:
            self._store = store
            now = self._clock()
            offset = self._wall() - now  # wall time = monotonic time + offset
            for key, started, seen in _read_store(store):
                if key not in self._sessions:
                    self._sessions[key] = _Session(started=started - offset, seen=seen - offset)
            self._prune(now)
            self._save()

    def _save(self) -> None:
        """Write the live sessions' hashes and times (the caller holds the lock)."""
        if self._store is None:
            return
        offset = self._wall() - self._clock()
        records = {
            key.hex(): {"started": s.started + offset, "seen": s.seen + offset}
            for key, s in self._sessions.items()
        }
        data = json.dumps({"format": STORE_FORMAT, "sessions": records}, sort_keys=True)
        try:
            self._store.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomic(self._store, data + "\n", mode=0o600)
        except OSError:
            return  # the sessions still work; only a restart forgets them
        self._saved = {key: s.seen for key, s in self._sessions.items()}

    def new_link(self) -> str:
        """A fresh one-time link token; any unused earlier one dies."""
        token = new_token()
        with self._lock:
            self._link = _digest(token)
        return token

    def exchange(self, token: str) -> str | None:
        """A new session id for the live link's token (which then dies), else None."""
        with self._lock:
            if self._link is None or not hmac.compare_digest(_digest(token), self._link):
                return None
            self._link = None
            now = self._clock()
            self._prune(now)
            while len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions, key=lambda key: self._sessions[key].started)
                del self._sessions[oldest]
            session = new_token()
            self._sessions[_digest(session)] = _Session(started=now, seen=now)
            self._save()
            return session

    def valid(self, session: str | None, *, touch: bool = True) -> bool:
        """Whether `session` is live; `touch` counts this request as activity (a page's own
        background stream does not: a tab left open on a live run still goes idle)."""
        if not session:
            return False
        key = _digest(session)
        with self._lock:
            now = self._clock()
            found = self._sessions.get(key)
            if found is None or self._ended(found, now):
                if self._sessions.pop(key, None) is not None:
                    self._save()
                return False
            if touch:
                found.seen = now
                if now - self._saved.get(key, 0.0) >= SAVE_EVERY_S:
                    self._save()
            return True

    def _ended(self, session: _Session, now: float) -> bool:
        return now - session.seen > self.idle_s or now - session.started > self.max_age_s

    def _prune(self, now: float) -> None:
        for key in [k for k, s in self._sessions.items() if self._ended(s, now)]:
            del self._sessions[key]


def store_path(home: Path, root: Path, host: str, port: int) -> Path:
    """Where the sessions of a dashboard of `root` on `host`:`port` are kept: one file per
    address, as the browser's cookie is per port."""

    name = "".join(c if c.isalnum() or c in ".-" else "_" for c in host) or "any"
    return home / "ui-sessions" / f"{repo_slug(root)}-{name}-{port}.json"


def _read_store(store: Path) -> list[tuple[bytes, float, float]]:
    """(hash, started, seen) of each session in `store`, wall-clock times; nothing when the
    file is missing, unreadable, not ours, open to others, or not what we write."""
    # O_NONBLOCK: a FIFO in the store's place must not hold the open (it is refused below).
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(store, flags)
    except OSError:
        return []
    info = os.fstat(fd)
    # A folder or a FIFO there, or a file open to others, is not what we wrote.
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        os.close(fd)
        return []
    with contextlib.closing(os.fdopen(fd, "rb")) as handle:
        try:
            data = json.loads(handle.read(1 << 20))
        except (OSError, ValueError):
            return []
    if not isinstance(data, dict) or data.get("format") != STORE_FORMAT:
        return []
    records = data.get("sessions")
    found = []
    for key, times in records.items() if isinstance(records, dict) else ():
        try:
            digest = bytes.fromhex(key)
            started, seen = float(times["started"]), float(times["seen"])
        except (TypeError, ValueError, KeyError):
            continue
        if len(digest) == hashlib.sha256().digest_size:
            found.append((digest, started, seen))
    return found
