"""Where each backend's model is, as the egress proxy needs it (issue 25).

A CLI preset names the base-URL variables it reads (`CliPreset.base_url_variables`), the model
hosts it reaches without one (`model_hosts`) and what its own login talks to (`login_hosts`).
From those, the agent's `base_url` and the environment the CLI gets:

- an https endpoint carried by a base-URL variable becomes a `Route`: the variable is pointed at
  the proxy on loopback, and the proxy speaks TLS upstream, so it can put the real key in;
- an http endpoint (a local model server on loopback, or plain HTTP elsewhere) is an allowed
  host: mirrored at the same port inside, or forwarded as plain HTTP;
- an https endpoint with no variable (a URL in argv or in the CLI's own config, a provider with
  no base-URL setting) is an allowed host reached through CONNECT: the proxy sees only an
  encrypted tunnel there, so it cannot put a real key into it (`tunnelled`).

loopctl's own agent (backends openai and anthropic) calls its model from loopctl's process,
outside the sandbox, and a command agent names no model: both get no model endpoint here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from loopctl.backends import backend_for
from loopctl.backends.presets import CliPreset
from loopctl.definitions.agents import Agent
from loopctl.egress import HostPort, Route


@dataclass(frozen=True, slots=True)
class ModelEndpoints:
    """The model endpoints of one agent: routes, and hosts it reaches directly."""

    routes: tuple[Route, ...] = ()
    hosts: tuple[HostPort, ...] = ()
    tunnelled: tuple[HostPort, ...] = ()  # https hosts of `hosts`: CONNECT, no key put in
    secret_names: tuple[str, ...] = ()  # the backend's own credentials
    # The endpoints the user chose (base_url, or a base-URL variable they set): the backend's
    # own credentials are for these as well as their usual hosts.
    custom: tuple[HostPort, ...] = ()

    @property
    def targets(self) -> tuple[HostPort, ...]:
        return tuple(dict.fromkeys([*(r.target for r in self.routes), *self.hosts]))


def model_endpoints(agent: Agent, env: Mapping[str, str]) -> ModelEndpoints:
    """The endpoints of `agent`'s model, given the environment it is lent (before its backend
    adds its own variables, which this asks the backend for)."""
    backend = backend_for(agent)
    if not isinstance(backend, CliPreset):
        return ModelEndpoints()
    lent = backend.environment(agent, env)
    routes: list[Route] = []
    hosts: list[HostPort] = []
    tunnelled: list[HostPort] = []
    custom: list[HostPort] = []
    for endpoint in backend.model_urls(agent, lent):
        url = endpoint.url
        try:
            target = HostPort.parse(url)
        except ValueError:
            continue  # a malformed URL in the user's environment: the CLI reports it itself
        if endpoint.custom:
            custom.append(target)
        https = urlsplit(url).scheme == "https"
        if https and endpoint.variable is not None:
            routes.append(Route(endpoint.variable, url.rstrip("/")))
            continue
        hosts.append(target)
        if https and not target.is_loopback:
            tunnelled.append(target)
    return ModelEndpoints(
        routes=tuple(routes),
        hosts=tuple(dict.fromkeys(hosts)),
        tunnelled=tuple(dict.fromkeys(tunnelled)),
        secret_names=backend.secret_names,
        custom=tuple(dict.fromkeys(custom)),
    )
