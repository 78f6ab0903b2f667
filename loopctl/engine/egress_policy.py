"""What each agent turn and each check may reach, and the secrets lent to it (issue 25).

An agent gets its backend's model endpoints (loopctl.backends.endpoints) plus `[sandbox] hosts`;
a check gets what `[checker] network` says (nothing by default: it runs the agent's code). A
secret-named variable lent to an agent reaches it as a stand-in; the proxy puts the real value
into requests to the hosts that secret is for: those `[env.secrets]` declares for it, else the
presets below, plus the model endpoint the user chose (`base_url`, or a base-URL variable they
set) when it is one of its backend's own credentials.
`NAME = "real"` lends the value unchanged, and so does `network = "open"`, where no proxy runs.

Pure: the same definitions and environment give the same policy (stand-ins aside).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loopctl.backends.endpoints import ModelEndpoints, model_endpoints
from loopctl.backends.model_api import ModelApiBackend
from loopctl.definitions import Agent
from loopctl.definitions.agents import HTTP_BACKENDS
from loopctl.definitions.loops import CheckerSpec
from loopctl.egress import EgressPolicy, HostPort, LentSecret, NetworkMode
from loopctl.secrets import build_env, is_secret_name

if TYPE_CHECKING:
    from loopctl.definitions import Project

# The hosts a well-known credential is for, whichever agent it is lent to.
_ANTHROPIC = (HostPort("api.anthropic.com", 443),)
_OPENAI = (HostPort("api.openai.com", 443),)
_GITHUB = (HostPort("api.github.com", 443),)
_GOOGLE = (HostPort("generativelanguage.googleapis.com", 443),)
SECRET_PRESETS: Mapping[str, tuple[HostPort, ...]] = {
    "ANTHROPIC_API_KEY": _ANTHROPIC,
    "ANTHROPIC_AUTH_TOKEN": _ANTHROPIC,
    "CLAUDE_CODE_OAUTH_TOKEN": _ANTHROPIC,
    "OPENAI_API_KEY": _OPENAI,
    "CODEX_API_KEY": _OPENAI,
    "GH_TOKEN": _GITHUB,
    "GITHUB_TOKEN": _GITHUB,
    "OPENROUTER_API_KEY": (HostPort("openrouter.ai", 443),),
    "GEMINI_API_KEY": _GOOGLE,
    "GOOGLE_API_KEY": _GOOGLE,
    "GROQ_API_KEY": (HostPort("api.groq.com", 443),),
    "DEEPSEEK_API_KEY": (HostPort("api.deepseek.com", 443),),
}


def agent_policy(agent: Agent, env: Mapping[str, str]) -> EgressPolicy:
    """The policy of one turn of `agent`, lent `env` (the engine's scrubbed environment)."""
    mode = agent.sandbox.network
    endpoints = model_endpoints(agent, env)
    if mode is not NetworkMode.PROXY:
        # No proxy to put a real value in: "open" lends values unchanged, "none" reaches no
        # one, so a stand-in there only keeps the real value out.
        secrets = lent_secrets(agent, env, endpoints) if mode is NetworkMode.NONE else ()
        return EgressPolicy(mode=mode, secrets=secrets)
    return EgressPolicy(
        mode=mode,
        hosts=tuple(dict.fromkeys([*endpoints.hosts, *agent.sandbox.hosts])),
        routes=endpoints.routes,
        secrets=lent_secrets(agent, env, endpoints),
    )


def check_policy(checker: CheckerSpec) -> EgressPolicy:
    """The policy of a check command: `[checker] network`, none by default."""
    if checker.network is NetworkMode.PROXY:
        return EgressPolicy(mode=NetworkMode.PROXY, hosts=checker.hosts)
    return EgressPolicy(mode=checker.network)


def lent_secrets(
    agent: Agent, env: Mapping[str, str], endpoints: ModelEndpoints
) -> tuple[LentSecret, ...]:
    """Each secret `env` lends `agent`, with the hosts its real value may go to."""
    declared = {rule.name: rule for rule in agent.secret_hosts}
    withheld = _own_key(agent)
    found: list[LentSecret] = []
    for name, value in env.items():
        if not value or name == withheld or not (is_secret_name(name) or name in declared):
            continue
        rule = declared.get(name)
        if rule is not None and rule.real:
            continue
        if rule is not None:
            hosts = rule.hosts
        else:
            hosts = SECRET_PRESETS.get(name, ())
            if name in endpoints.secret_names or name == agent.api_key_env:
                hosts = (*hosts, *endpoints.custom)
        found.append(LentSecret(name=name, value=value, hosts=tuple(dict.fromkeys(hosts))))
    return tuple(found)


def _own_key(agent: Agent) -> str | None:
    """The variable loopctl's own agent reads its API key from: never lent to its tools."""
    if agent.backend not in HTTP_BACKENDS:
        return None

    return ModelApiBackend(agent.backend.value).key_env(agent)


def unreachable_secrets(policy: EgressPolicy, endpoints: ModelEndpoints) -> list[str]:
    """One line per lent secret no request can carry for real: each of its hosts is reached
    through an encrypted tunnel (CONNECT), or is not allowed at all."""
    lines: list[str] = []
    allowed = set(policy.allowed())
    for secret in policy.secrets:
        usable = [h for h in secret.hosts if h in allowed and h not in endpoints.tunnelled]
        if usable or not policy.proxied:
            continue
        tunnelled = [str(h) for h in secret.hosts if h in endpoints.tunnelled]
        if tunnelled:
            verb = "is" if len(tunnelled) == 1 else "are"
            why = (
                f"{', '.join(tunnelled)} {verb} reached through CONNECT, where the proxy cannot"
                " put it in"
            )
        elif secret.hosts:
            why = f"{', '.join(str(h) for h in secret.hosts)} is not an allowed host"
        else:
            why = "no host is declared for it"
        lines.append(
            f"{secret.name} reaches the agent as a stand-in only: {why}"
            f' (declare its hosts in [env.secrets], or {secret.name} = "real" to lend it'
            " unchanged)"
        )
    return lines


def egress_summary(agent: Agent, env: Mapping[str, str]) -> dict[str, Any]:
    """What `doctor` and `--dry-run` show of an agent's policy: `EgressPolicy.describe()`
    (never a value or a stand-in), the names lent unchanged, the hosts reached through CONNECT
    and a line per secret no request can carry for real."""
    endpoints = model_endpoints(agent, env)
    policy = agent_policy(agent, env)
    summary = policy.describe()
    standing = {secret.name for secret in policy.secrets}
    declared = {rule.name for rule in agent.secret_hosts}
    withheld = _own_key(agent)
    summary["real"] = [
        name
        for name, value in env.items()
        if value
        and name != withheld
        and name not in standing
        and (is_secret_name(name) or name in declared)
    ]
    allowed = policy.allowed()
    summary["tunnelled"] = [str(h) for h in endpoints.tunnelled if h in allowed]
    summary["stand_in_only"] = unreachable_secrets(policy, endpoints)
    return summary


def check_summary(checker: CheckerSpec) -> dict[str, Any]:
    """`[checker] network` as `doctor` and `--dry-run` show it."""
    return {**check_policy(checker).describe(), "real": [], "tunnelled": [], "stand_in_only": []}


_MODES = {
    NetworkMode.PROXY.value: "proxy (its own network namespace; out only to the hosts below)",
    NetworkMode.NONE.value: "none (its own network namespace, loopback only)",
    NetworkMode.OPEN.value: 'open (the host\'s network, unfiltered: network = "open")',
}


def egress_lines(summary: Mapping[str, Any], indent: str = "") -> list[str]:
    """A summary (egress_summary, check_summary) for people, one fact a line."""
    if not summary:
        return []
    mode = str(summary.get("network"))
    lines = [f"{indent}network:  {_MODES.get(mode, mode)}"]
    if mode == NetworkMode.PROXY.value:
        hosts = ", ".join(summary.get("hosts") or ()) or "none"
        lines.append(f"{indent}hosts:    {hosts}")
    for variable, upstream in (summary.get("routes") or {}).items():
        lines.append(f"{indent}route:    {variable} -> {upstream} (through the proxy, over TLS)")
    for name, hosts in (summary.get("secrets") or {}).items():
        where = ", ".join(hosts) or "no host"
        lines.append(
            f"{indent}secret:   {name} (a stand-in inside; the real value only to {where})"
        )
    for name in summary.get("real") or ():
        lines.append(f"{indent}secret:   {name} (lent unchanged: the real value is inside)")
    tunnelled = summary.get("tunnelled") or ()
    if tunnelled:
        verb = "is" if len(tunnelled) == 1 else "are"
        lines.append(
            f"{indent}note:     {', '.join(tunnelled)} {verb} reached through CONNECT: an"
            " encrypted tunnel the proxy cannot put a real key into"
        )
    lines += [f"{indent}note:     {line}" for line in summary.get("stand_in_only") or ()]
    return lines


def project_egress(project: Project) -> dict[str, Any]:
    """Per agent, what its turns may reach and the secrets lent to it (as this machine's
    environment would lend them); per loop, what its checks may reach. For `doctor`."""

    agents: dict[str, Any] = {}
    for name, agent in sorted(project.agents.items()):
        env = build_env(allow=(*agent.env_allow, *project.config.env_allow))
        agents[name] = {"backend": agent.backend.value, **egress_summary(agent, env)}
    checks = {name: check_summary(loop.checker) for name, loop in sorted(project.loops.items())}
    return {"agents": agents, "checks": checks}
