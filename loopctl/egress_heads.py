"""Request and response heads as loopctl's egress proxy rewrites them (`egress_proxy`).

Upstream, a request goes in origin form with the upstream's Host and `Connection: close` (or its
upgrade), hop-by-hop fields dropped, and a lent secret's stand-in replaced by its real value in
header values only, for the secrets the caller passes (those lent to the request's host). Back,
a response says `Connection: close`, so the client never sends a second, unparsed request.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopctl.egress import LentSecret

HOP_BY_HOP = frozenset(
    {
        "connection",
        "proxy-connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
        "host",
        "expect",
    }
)


@dataclass(frozen=True, slots=True)
class Head:
    """A parsed request head: the request line's parts and the header fields, in order."""

    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name]

    def tokens(self, name: str) -> set[str]:
        return {t.strip().lower() for v in self.values(name) for t in v.split(",") if t.strip()}


def rewrite_request(
    head: Head, path: str, host: str, upgrade: bool, secrets: tuple[LentSecret, ...]
) -> bytes:
    """The upstream head: origin-form, the upstream's Host, `Connection: close` (or the
    upgrade), hop-by-hop fields dropped, stand-ins of `secrets` replaced in header values."""
    listed = head.tokens("connection")
    lines = [f"{head.method} {path} {head.version}", f"Host: {host}"]
    for name, value in head.headers:
        key = name.lower()
        if key in HOP_BY_HOP or key in listed:
            continue
        lines.append(f"{name}: {inject(value, secrets)}")
    if upgrade:
        lines += [f"Upgrade: {head.values('upgrade')[0]}", "Connection: Upgrade"]
    else:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def inject(value: str, secrets: tuple[LentSecret, ...]) -> str:
    for secret in secrets:
        if secret.stand_in in value:
            real = secret.value.encode("utf-8").decode("latin-1")
            if any(c in real for c in "\r\n\0"):
                continue  # it would split the head: the stand-in goes as it is
            value = value.replace(secret.stand_in, real)
    return value


def rewrite_response(raw: bytes) -> bytes:
    """The response head with `Connection: close`: the client must not send a second request
    on this connection (it would not be parsed)."""
    lines = raw[:-4].decode("latin-1").split("\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        name = line.partition(":")[0].strip().lower()
        if name not in ("connection", "keep-alive", "proxy-connection"):
            kept.append(line)
    kept.append("Connection: close")
    return ("\r\n".join(kept) + "\r\n\r\n").encode("latin-1")
