"""Who may use the dashboard: the session token, the Host header, and the origin of a change.

The token is made in memory when the server starts and is shown once, in the URL printed on the
user's terminal (and handed to the browser it opens). It is never written to a file, an
environment variable or a command line of anything an agent can see: an agent's sandbox hides
other processes and the host's /tmp, so it cannot read the server's memory, argv or terminal.

- Every request carries the token: in the URL once (exchanged for an HttpOnly SameSite=Strict
  cookie, then dropped from the address bar), in that cookie after.
- `Host` must name the address the server is bound to: a page whose DNS name rebinds to
  127.0.0.1 sends its own name and is refused.
- A change (approve, reject, …) is a POST whose `Origin` is this server exactly (scheme, host
  and port: a page on another port of 127.0.0.1 is the same *site* for SameSite cookies, not
  the same origin) and whose `Sec-Fetch-Site`, when the browser sends it, says same-origin.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("0.0.0.0", "::", "")


def new_token() -> str:
    """A fresh session token: 256 random bits, URL-safe."""
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

    token: str
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

    def token_ok(self, presented: str | None) -> bool:
        if not presented:
            return False
        return hmac.compare_digest(presented.encode(), self.token.encode())

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
