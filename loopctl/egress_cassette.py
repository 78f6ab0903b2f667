"""Model cassettes: every HTTP exchange the egress proxy forwards for one agent turn (issue 31,
item 5), kept beside the attempt's files as `<role>.cassette.jsonl`, and how one is read back.

The proxy (`egress_proxy`) hands each forwarded exchange to the turn's `EgressTap`: a
`CassetteWriter` while a run is recorded, a player (`egress_replay`) while one is replayed
offline. A cassette is JSON lines: a header (`cassette`: the format, `cap`, the turn's worktree
and checkout), then one line per exchange — the request as the agent sent it (method, path,
headers, body: stand-ins, never a real key) and the response as the upstream sent it (head and
body as framed on the wire, so a replay answers byte for byte).

Redacted: headers that carry credentials (Authorization, X-Api-Key, cookies, any name a secret
would have) are not written; bodies go through the run's `Redactor` (the values loopctl
withholds, and each secret lent to the turn). Capped: a cassette holds at most `CAP_BYTES`;
the exchange that would pass it is replaced by a `capped` line, and nothing after it is kept,
so a capped cassette says so and is never replayed. A tunnel (CONNECT) is encrypted and cannot
be recorded: it leaves a `tunnelled` line, and such a cassette is not replayable either.

Written by loopctl, outside the sandbox, in the attempt folder of the main checkout, which no
agent can write; every open follows no link all the same (`nofollow`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import stat
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from loopctl.egress import STAND_IN_PREFIX, HostPort
from loopctl.errors import ExitCode, LoopctlError
from loopctl.nofollow import open_folder, read_file
from loopctl.secrets import REDACTED, Redactor, is_secret_name

CASSETTE_FORMAT = 1
CAP_BYTES = 32 * 1024 * 1024  # per turn's cassette: requests and responses together
SUFFIX = ".cassette.jsonl"
# Set (to the replay's plan file) in the environment of the loopctl that replays a run offline
# (loopctl.egress_replay serves it; named here, where every run's engine looks for it).
REPLAY_PLAN = "LOOPCTL_REPLAY_PLAN"
# Request and response headers never written: they carry credentials or session cookies.
_CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie"}
)


class CassetteError(LoopctlError):
    """A cassette that cannot be replayed: missing, capped, tunnelled, or not a cassette."""

    exit_code = ExitCode.USAGE  # the run named cannot be replayed: not a divergence (1)


class Sink(Protocol):
    """Where the proxy copies bytes to: a socket, or a `Tee` in front of one."""

    def sendall(self, data: bytes, /) -> None: ...


@dataclass(frozen=True, slots=True)
class Exchange:
    """One forwarded request and its response, as the proxy saw them."""

    target: str  # host:port the request was for
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes  # the request's body, de-chunked
    response_head: bytes  # the upstream's status line and headers, as it sent them
    response_body: bytes  # as framed on the wire (chunks and all)
    complete: bool = True  # False: a body passed what a tee keeps (the cassette is capped)


class EgressTap(Protocol):
    """What the proxy tells about one turn's traffic, and (offline) where it goes instead."""

    @property
    def redirect(self) -> HostPort | None:
        """Offline: every forwarded request goes to this 127.0.0.1 server, over plain HTTP."""

    def exchange(self, exchange: Exchange) -> None: ...

    def tunnelled(self, target: HostPort) -> None: ...


class Tee:
    """A sink that also keeps what passes through it, up to `cap` bytes."""

    def __init__(self, sink: Sink, cap: int = CAP_BYTES) -> None:
        self.sink, self.cap = sink, cap
        self.kept = bytearray()
        self.over = False

    def sendall(self, data: bytes, /) -> None:
        self.sink.sendall(data)
        if len(self.kept) + len(data) > self.cap:
            self.over = True
        elif not self.over:
            self.kept += data


def dechunk(data: bytes) -> bytes:
    """A chunked body's content (what passes the framing: trailers dropped); the bytes as
    they are when they do not parse as chunks."""
    out, rest = bytearray(), data
    while True:
        line, crlf, rest = rest.partition(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            return data
        if not crlf or size < 0:
            return data
        if size == 0:
            return bytes(out)
        out += rest[:size]
        rest = rest[size + 2 :]


def _text(data: bytes) -> dict[str, str]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _bytes(value: Any) -> bytes:
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"]).encode("utf-8")
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        return base64.b64decode(str(value["base64"]))
    raise ValueError("a body that is neither text nor base64")


def kept_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """`headers` without the ones that carry credentials."""
    return [
        (name, value)
        for name, value in headers
        if name.lower() not in _CREDENTIAL_HEADERS and not is_secret_name(name.replace("-", "_"))
    ]


def _response_head(raw: bytes, redactor: Redactor) -> bytes:
    lines = raw.split(b"\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        name = line.partition(b":")[0].strip().decode("latin-1")
        if line and (name.lower() in _CREDENTIAL_HEADERS or is_secret_name(name.replace("-", "_"))):
            continue
        kept.append(line)
    return redactor.redact_bytes(b"\r\n".join(kept))


class CassetteWriter:
    """The recording tap of one agent turn: appends each exchange to `path` (under `within`,
    reached without following a link), redacted, until `cap` bytes."""

    redirect: HostPort | None = None

    def __init__(
        self,
        path: Path,
        *,
        within: Path,
        redactor: Redactor,
        meta: Mapping[str, Any],
        cap: int = CAP_BYTES,
    ) -> None:
        self.path, self.within, self.redactor, self.cap = path, within, redactor, cap
        self.meta = dict(meta)
        self._lock = threading.Lock()
        self._written = -1  # bytes in the file; -1: not opened yet
        self._capped = False

    def exchange(self, exchange: Exchange) -> None:
        redact = self.redactor.redact_bytes
        line = {
            "target": exchange.target,
            "method": exchange.method,
            "path": self.redactor.redact(exchange.path),
            "headers": [
                [name, self.redactor.redact(value)]
                for name, value in kept_headers(exchange.headers)
            ],
            "body": _text(redact(exchange.body)),
            "response_head": _text(_response_head(exchange.response_head, self.redactor)),
            "response_body": _text(redact(exchange.response_body)),
        }
        self._append(line, complete=exchange.complete)

    def tunnelled(self, target: HostPort) -> None:
        self._append({"tunnelled": str(target)})

    def open(self) -> None:
        """Write the header (once): a turn with a cassette was recorded, if it asked nothing."""
        with self._lock:
            if self._written < 0:
                header = {"cassette": CASSETTE_FORMAT, "cap": self.cap, **self.meta}
                self._written = self._write((json.dumps(header) + "\n").encode("utf-8"))

    def _append(self, record: Mapping[str, Any], *, complete: bool = True) -> None:
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        self.open()
        with self._lock:
            if self._capped:
                return
            if not complete or self._written + len(data) > self.cap:
                self._capped = True
                data = (json.dumps({"capped": self.cap}) + "\n").encode("utf-8")
            self._written += self._write(data)

    def _write(self, data: bytes) -> int:
        relative = self.path.relative_to(self.within)
        parent = open_folder(self.within, relative.parent)
        try:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(relative.name, flags, 0o600, dir_fd=parent)
        finally:
            os.close(parent)
        with os.fdopen(fd, "ab") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise OSError(f"{self.path} is not a regular file")
            handle.write(data)
        return len(data)


@dataclass(frozen=True, slots=True)
class Recorded:
    """One recorded exchange, read back: the request to match, the response to answer with."""

    index: int
    method: str
    path: str
    body: bytes
    response: bytes  # head and body, as the upstream sent them


@dataclass(frozen=True, slots=True)
class Cassette:
    """One turn's cassette, read back."""

    path: Path
    meta: dict[str, Any]
    exchanges: tuple[Recorded, ...] = ()
    capped: bool = False
    tunnelled: tuple[str, ...] = field(default=())

    def refusal(self) -> str | None:
        """Why it cannot be replayed, or None."""
        if self.capped:
            return (
                f"{self.path} is capped at {self.meta.get('cap', CAP_BYTES)} bytes: the turn's"
                " model traffic was larger, so it cannot be replayed"
            )
        if self.tunnelled:
            return (
                f"{self.path} has traffic it could not record (an encrypted tunnel to"
                f" {', '.join(self.tunnelled)}), so it cannot be replayed"
            )
        return None


def read_cassette(path: Path, *, within: Path) -> Cassette:
    """The cassette at `path` (under `within`, reached without following a link)."""
    try:
        raw = read_file(path, within=within)
    except OSError as exc:
        raise CassetteError(f"cannot read the cassette {path}: {exc.strerror or exc}") from exc
    lines = raw.decode("utf-8", errors="replace").splitlines()
    try:
        meta = json.loads(lines[0]) if lines else {}
        if not isinstance(meta, dict) or meta.get("cassette") != CASSETTE_FORMAT:
            raise ValueError("no cassette header")
        exchanges: list[Recorded] = []
        capped, tunnelled = False, []
        for text in lines[1:]:
            if not text.strip():
                continue
            record = json.loads(text)
            if "cassette" in record:
                continue  # a turn redone in the same attempt (resumed) appends after a header
            if "capped" in record:
                capped = True
            elif "tunnelled" in record:
                tunnelled.append(str(record["tunnelled"]))
            else:
                head = _bytes(record["response_head"])
                exchanges.append(
                    Recorded(
                        index=len(exchanges),
                        method=str(record["method"]),
                        path=str(record["path"]),
                        body=_bytes(record["body"]),
                        response=head + b"\r\n\r\n" + _bytes(record["response_body"]),
                    )
                )
    except (ValueError, KeyError, TypeError) as exc:
        raise CassetteError(f"{path} is not a loopctl cassette ({exc})") from exc
    return Cassette(path, meta, tuple(exchanges), capped, tuple(tunnelled))


# -- comparing a replayed request with a recorded one ------------------------------------------

# What two runs of the same work differ in by nature: fresh ids, the day, stand-ins.
_VOLATILE = (
    (
        re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
        b"<uuid>",
    ),
    (
        re.compile(
            rb"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)?"
        ),
        b"<date>",
    ),
    (re.compile(re.escape(STAND_IN_PREFIX.encode()) + rb"[0-9a-f]+"), b"<stand-in>"),
    # A clock in epoch milliseconds (Codex's request metadata): 13 digits, 2001 to 2033.
    (re.compile(rb"(?<![0-9])1[0-9]{12}(?![0-9])"), b"<epoch-ms>"),
    # How long a command took, as Codex reports it back to the model.
    (re.compile(rb"Wall time: [0-9.]+ seconds"), b"Wall time: <seconds>"),
)
# JSON fields of a model request that name the session or the account, not the work.
_VOLATILE_FIELDS = ("metadata",)


def normalised(body: bytes, places: Mapping[str, str]) -> bytes:
    """A request body as compared: JSON re-serialised with sorted keys and without
    `metadata`; each of `places` (a path → its name) replaced; ids, dates and stand-ins
    replaced by placeholders."""
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        parsed = json.loads(body)
        if isinstance(parsed, dict):
            for name in _VOLATILE_FIELDS:
                parsed.pop(name, None)
        body = json.dumps(parsed, sort_keys=True, ensure_ascii=False).encode("utf-8")
    for path, name in sorted(places.items(), key=lambda item: -len(item[0])):
        if path:
            body = body.replace(path.encode("utf-8"), name.encode("utf-8"))
    for pattern, placeholder in _VOLATILE:
        body = pattern.sub(placeholder, body)
    return body.replace(REDACTED.encode("ascii"), b"<redacted>")


def first_difference(recorded: bytes, asked: bytes, width: int = 60) -> str:
    """Where two normalised bodies first differ: the offset and a few bytes of each."""
    at = next(
        (i for i, (a, b) in enumerate(zip(recorded, asked, strict=False)) if a != b),
        min(len(recorded), len(asked)),
    )
    start = max(at - 20, 0)

    def show(data: bytes) -> str:
        part = data[start : at + width].decode("utf-8", errors="replace")
        return json.dumps(part, ensure_ascii=False)

    return f"at byte {at}: recorded {show(recorded)}, replayed {show(asked)}"
