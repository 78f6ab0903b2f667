"""What one sandboxed process may reach on the network, and the secrets lent to it (issue 25).

Every agent and check gets a network namespace of its own. In `proxy` mode (the default for
agents) the only way out is loopctl's egress proxy, which runs outside the sandbox
(`egress_proxy`) and is reached from inside through unix sockets bound into it; a small program
inside (`egress_bridge`) listens on loopback ports of the private namespace and pipes each
connection to its socket. The proxy lets through only `EgressPolicy.hosts`, refuses and records
everything else, and puts a lent secret's real value into requests to the hosts that secret is
for: inside, the variable holds a stand-in.

Inside the sandbox, on loopback (nothing else exists there):

- `PROXY_PORT`: an HTTP proxy (CONNECT for HTTPS, absolute-form requests for plain HTTP);
  `HTTP(S)_PROXY` point at it, `NO_PROXY` keeps loopback direct.
- `ROUTE_PORT + i`: route `i`, a model endpoint the CLI is pointed at through its base-URL
  variable (`Route.variable`, e.g. ANTHROPIC_BASE_URL). The CLI speaks plain HTTP to it; the proxy
  speaks TLS upstream, so no certificate authority is planted and headers can be rewritten.
- every allowed loopback `host:port` (a local model server a `base_url` names) on the same port:
  the URL the agent was given works unchanged.

This module is pure policy: no sockets, no processes.
"""

from __future__ import annotations

import ipaddress
import secrets as random_tokens
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit

PROXY_PORT = 47000  # the forward proxy, inside the sandbox's own network namespace
ROUTE_PORT = 47001  # the first base-URL route; route i listens on ROUTE_PORT + i
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
STAND_IN_PREFIX = "loopctl-stand-in-"
# Where the sandbox sees the proxy's socket folder (read-only), one socket per inner port.
INSIDE_SOCKETS = "/tmp/.loopctl-egress"


def socket_name(port: int) -> str:
    """The name of the proxy's unix socket for inner port `port`, in its folder."""
    return f"p{port}"


class NetworkMode(StrEnum):
    PROXY = "proxy"  # own namespace; only listed hosts, through loopctl's proxy (the default)
    NONE = "none"  # own namespace with loopback only: not even the model
    OPEN = "open"  # the host's network, unfiltered: the explicit opt-out, noted in the log


@dataclass(frozen=True, slots=True, order=True)
class HostPort:
    """One reachable endpoint: a lower-case host name or IP literal and a TCP port."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str, default_port: int = 443) -> HostPort:
        """`api.example.com`, `api.example.com:8443`, `[::1]:8080`, or a URL
        (`http://127.0.0.1:5555/v1`: the scheme gives the default port). ValueError if not."""
        raw = text.strip()
        if "://" in raw:
            parts = urlsplit(raw)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{text!r} is not an http:// or https:// URL")
            port = parts.port or (80 if parts.scheme == "http" else 443)
            return cls(parts.hostname.lower(), port)
        parts = urlsplit(f"//{raw}")
        try:
            given = parts.port
        except ValueError as error:
            raise ValueError(f"{text!r} has no valid port") from error
        if not parts.hostname or parts.path or parts.query or parts.username:
            raise ValueError(f"{text!r} is not a host or host:port")
        return cls(parts.hostname.lower(), given or default_port)

    @property
    def is_loopback(self) -> bool:
        if self.host in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Route:
    """A model endpoint the CLI reaches through a base-URL variable pointed at the proxy."""

    variable: str  # the CLI's base-URL variable, e.g. ANTHROPIC_BASE_URL
    upstream: str  # where the proxy sends it: "https://api.anthropic.com", "https://x/v1"

    @property
    def target(self) -> HostPort:
        return HostPort.parse(self.upstream)

    def inner_url(self, index: int) -> str:
        """The value `variable` gets inside: plain HTTP on the route's loopback port, with the
        upstream's path (`/v1`) kept."""
        path = urlsplit(self.upstream).path.rstrip("/")
        return f"http://127.0.0.1:{ROUTE_PORT + index}{path}"


@dataclass(frozen=True, slots=True)
class LentSecret:
    """A secret-named variable lent to an agent: inside it holds `stand_in`; the proxy puts
    `value` in its place in the headers of requests to `hosts`, and nowhere else."""

    name: str
    value: str = field(repr=False)
    hosts: tuple[HostPort, ...]
    stand_in: str = field(default_factory=lambda: STAND_IN_PREFIX + random_tokens.token_hex(16))


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """What one sandboxed process may reach. `hosts` covers CONNECT tunnels, plain-HTTP forwards
    and loopback mirrors; each route's upstream is allowed with it."""

    mode: NetworkMode = NetworkMode.PROXY
    hosts: tuple[HostPort, ...] = ()
    routes: tuple[Route, ...] = ()
    secrets: tuple[LentSecret, ...] = ()

    @property
    def proxied(self) -> bool:
        """Whether the process needs the proxy and the bridge (own namespace, something out)."""
        return self.mode is NetworkMode.PROXY

    @property
    def isolated(self) -> bool:
        """Whether the process gets a network namespace of its own."""
        return self.mode is not NetworkMode.OPEN

    def allowed(self) -> tuple[HostPort, ...]:
        if self.mode is not NetworkMode.PROXY:
            return ()
        found = dict.fromkeys([*self.hosts, *(route.target for route in self.routes)])
        return tuple(found)

    def allows(self, target: HostPort) -> bool:
        return target in self.allowed()

    def mirrors(self) -> tuple[HostPort, ...]:
        """Allowed loopback endpoints, listened on at the same port inside."""
        return tuple(
            target
            for target in self.allowed()
            if target.is_loopback and target.port not in self.reserved_ports()
        )

    def reserved_ports(self) -> tuple[int, ...]:
        return (PROXY_PORT, *(ROUTE_PORT + index for index in range(len(self.routes))))

    def ports(self) -> tuple[int, ...]:
        """Every loopback port listened on inside (proxy mode): the proxy, each route, and
        each mirrored port once (`localhost:8080` and `127.0.0.1:8080` share one)."""
        if self.mode is not NetworkMode.PROXY:
            return ()
        return tuple(dict.fromkeys([*self.reserved_ports(), *(m.port for m in self.mirrors())]))

    def secret_for(self, stand_in: str) -> LentSecret | None:
        return next((s for s in self.secrets if s.stand_in == stand_in), None)

    def inner_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` as the sandboxed process gets it: lent secrets replaced by their stand-ins,
        base-URL variables pointed at their routes, the proxy variables set (proxy mode)."""
        inner = dict(env)
        for secret in self.secrets:
            if secret.name in inner:
                inner[secret.name] = secret.stand_in
        if self.mode is not NetworkMode.PROXY:
            return inner
        for index, route in enumerate(self.routes):
            inner[route.variable] = route.inner_url(index)
        proxy = f"http://127.0.0.1:{PROXY_PORT}"
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            inner[name] = proxy
        for name in ("NO_PROXY", "no_proxy"):
            inner[name] = "localhost,127.0.0.1,::1"
        return inner

    def describe(self) -> dict[str, object]:
        """For `doctor`, `--dry-run` and the log: never a secret's value or stand-in."""
        return {
            "network": self.mode.value,
            "hosts": [str(target) for target in self.allowed()],
            "routes": {route.variable: route.upstream for route in self.routes},
            "secrets": {s.name: [str(h) for h in s.hosts] for s in self.secrets},
        }


def parse_hosts(texts: Sequence[str]) -> tuple[HostPort, ...]:
    """`[sandbox] hosts` entries; ValueError naming the first bad one."""
    return tuple(dict.fromkeys(HostPort.parse(text) for text in texts))
