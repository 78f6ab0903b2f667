"""loopctl's own agent on a model cassette (issue 31, item 5).

Its model calls leave from loopctl's own process, not through the egress proxy, so they are
recorded here: each response, once read, is told to the turn's tape as the proxy would tell
an exchange (its body as decoded, so its head loses any content or transfer encoding and says
its length). Replaying offline, the tape's `redirect` is where the calls go instead: the base
URL keeps its path, on the replay's 127.0.0.1 server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from loopctl.egress import HostPort
from loopctl.egress_cassette import EgressTap, Exchange

_FRAMING = frozenset({"content-encoding", "transfer-encoding", "content-length", "connection"})


def base_url(url: str, tape: EgressTap | None) -> str:
    """`url`, or (offline) the same path on the tape's replay server."""
    if tape is None or tape.redirect is None:
        return url
    parts = urlsplit(url)
    where = tape.redirect
    return urlunsplit(("http", f"{where.host}:{where.port}", parts.path, parts.query, ""))


def response_hook(url: str, tape: EgressTap | None) -> list[Callable[[Any], None]]:
    """The httpx response hooks that record each exchange on `tape` (none offline)."""
    if tape is None or tape.redirect is not None:
        return []
    try:
        target = str(HostPort.parse(url))
    except ValueError:
        target = url

    def record(response: Any) -> None:
        response.read()
        request = response.request
        body = response.content
        head = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
        head += [f"{k}: {v}" for k, v in response.headers.items() if k.lower() not in _FRAMING]
        head.append(f"content-length: {len(body)}")
        tape.exchange(
            Exchange(
                target=target,
                method=request.method,
                path=request.url.raw_path.decode("ascii", errors="replace"),
                headers=tuple(request.headers.items()),
                body=request.content,
                response_head="\r\n".join(head).encode("latin-1", errors="replace"),
                response_body=body,
            )
        )

    return [record]
