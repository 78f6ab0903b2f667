"""The egress policy of each backend's turns and of checks (issue 25): routes for https model
endpoints behind a base-URL variable, hosts for loopback servers and CONNECT, lent secrets with
the hosts their real value may go to. Pure: no process, no socket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopctl.definitions.agents import Agent, Backend
from loopctl.definitions.loops import CheckerSpec
from loopctl.definitions.sandbox import AgentSandbox, SecretHosts
from loopctl.egress import HostPort, NetworkMode, Route
from loopctl.engine.egress_policy import (
    agent_policy,
    check_policy,
    egress_lines,
    egress_summary,
)

ANTHROPIC = HostPort("api.anthropic.com", 443)
OPENAI = HostPort("api.openai.com", 443)
GITHUB = HostPort("api.github.com", 443)
KEY = "sk-real-key-0123456789"
BASE_VARIABLES = (
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_API_BASE",
    "OPENAI_HOST",
    "ANTHROPIC_HOST",
)


@pytest.fixture(autouse=True)
def no_base_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The presets pass a user's own base-URL variables through: none here unless a test
    sets one."""
    for name in BASE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def agent(backend: Backend, **fields: object) -> Agent:
    extra: dict[str, object] = (
        {"model": "m"} if backend in (Backend.OPENAI, Backend.ANTHROPIC) else {}
    )
    if backend is Backend.COMMAND:
        extra["argv"] = ("true",)
    return Agent(name="a", path=Path("agents/a.toml"), backend=backend, **{**extra, **fields})  # type: ignore[arg-type]


def secrets_of(policy: object) -> dict[str, tuple[HostPort, ...]]:
    return {s.name: s.hosts for s in policy.secrets}  # type: ignore[attr-defined]


def test_claude_reaches_anthropic_through_a_route_with_the_key_put_in_by_the_proxy() -> None:
    env = {"PATH": "/usr/bin", "ANTHROPIC_API_KEY": KEY}
    policy = agent_policy(agent(Backend.CLAUDE), env)
    assert policy.mode is NetworkMode.PROXY
    assert policy.routes == (Route("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),)
    assert policy.allowed() == (ANTHROPIC,)
    assert secrets_of(policy) == {"ANTHROPIC_API_KEY": (ANTHROPIC,)}
    inner = policy.inner_env(env)
    assert inner["ANTHROPIC_API_KEY"] == policy.secrets[0].stand_in != KEY
    assert inner["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:47001"
    # A key lent means no login: claude.ai's token refresh hosts are not opened.
    assert "console.anthropic.com:443" not in policy.describe()["hosts"]  # type: ignore[operator]


def test_a_logged_in_claude_reaches_its_hosts_as_it_would_and_may_refresh_its_token() -> None:
    policy = agent_policy(agent(Backend.CLAUDE), {"PATH": "/usr/bin"})
    # No key to put in: no route, the CLI's own URL through CONNECT.
    assert policy.routes == ()
    assert ANTHROPIC in policy.allowed()
    assert HostPort("console.anthropic.com", 443) in policy.allowed()
    assert policy.secrets == ()
    assert "ANTHROPIC_BASE_URL" not in policy.inner_env({"PATH": "/usr/bin"})


def test_a_loopback_base_url_is_a_mirrored_host_and_the_key_goes_there_too() -> None:
    env = {"ANTHROPIC_API_KEY": KEY}
    local = HostPort("127.0.0.1", 18080)
    policy = agent_policy(agent(Backend.CLAUDE, base_url="http://127.0.0.1:18080"), env)
    assert policy.routes == ()  # the URL given works unchanged inside
    assert policy.mirrors() == (local,)
    assert secrets_of(policy) == {"ANTHROPIC_API_KEY": (ANTHROPIC, local)}
    assert "ANTHROPIC_BASE_URL" not in policy.inner_env(env)  # the backend sets it, untouched


def test_an_https_base_url_becomes_the_route() -> None:
    env = {"ANTHROPIC_AUTH_TOKEN": KEY}
    policy = agent_policy(agent(Backend.CLAUDE, base_url="https://llm.corp:8443/anthropic/"), env)
    assert policy.routes == (Route("ANTHROPIC_BASE_URL", "https://llm.corp:8443/anthropic"),)
    assert policy.inner_env(env)["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:47001/anthropic"
    # One of claude's own credentials: for Anthropic's API and the model endpoint chosen.
    assert secrets_of(policy) == {"ANTHROPIC_AUTH_TOKEN": (ANTHROPIC, HostPort("llm.corp", 8443))}


def test_a_base_url_variable_the_user_exported_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://gateway.example.com")
    policy = agent_policy(agent(Backend.CLAUDE), {"ANTHROPIC_API_KEY": KEY})
    assert policy.routes == (Route("ANTHROPIC_BASE_URL", "https://gateway.example.com"),)


def test_codex_routes_openai_and_a_chatgpt_login_reaches_its_own_hosts() -> None:
    with_key = agent_policy(agent(Backend.CODEX), {"OPENAI_API_KEY": KEY})
    assert with_key.routes == (Route("OPENAI_BASE_URL", "https://api.openai.com/v1"),)
    assert with_key.allowed() == (OPENAI,)
    assert secrets_of(with_key) == {"OPENAI_API_KEY": (OPENAI,)}
    login = agent_policy(agent(Backend.CODEX), {})
    # A ChatGPT login picks its own backend URL: OPENAI_BASE_URL must stay unset.
    assert login.routes == ()
    assert set(login.allowed()) == {
        OPENAI,
        HostPort("chatgpt.com", 443),
        HostPort("auth.openai.com", 443),
    }


def test_codex_with_its_own_provider_reaches_it_directly() -> None:
    local = agent_policy(agent(Backend.CODEX, base_url="http://127.0.0.1:18081/v1"), {})
    assert local.routes == ()
    assert local.allowed() == (HostPort("127.0.0.1", 18081),)
    remote = agent(Backend.CODEX, base_url="https://llm.corp/v1")
    summary = egress_summary(remote, {"OPENAI_API_KEY": KEY})
    assert summary["hosts"] == ["llm.corp:443"]
    assert summary["tunnelled"] == ["llm.corp:443"]
    (note,) = summary["stand_in_only"]  # type: ignore[misc]
    assert note.startswith("OPENAI_API_KEY reaches the agent as a stand-in only")
    assert "CONNECT" in note
    assert 'OPENAI_API_KEY = "real"' in note


def test_aider_and_goose_route_each_provider_variable() -> None:
    aider = agent_policy(agent(Backend.AIDER), {"OPENAI_API_KEY": KEY})
    assert [r.variable for r in aider.routes] == ["OPENAI_API_BASE", "ANTHROPIC_API_BASE"]
    goose = agent_policy(agent(Backend.GOOSE), {"ANTHROPIC_API_KEY": KEY})
    assert goose.routes == (
        Route("OPENAI_HOST", "https://api.openai.com"),
        Route("ANTHROPIC_HOST", "https://api.anthropic.com"),
    )
    assert HostPort("openrouter.ai", 443) in goose.allowed()


def test_opencode_has_no_base_url_variable_so_its_hosts_are_tunnelled() -> None:
    summary = egress_summary(agent(Backend.OPENCODE), {"ANTHROPIC_API_KEY": KEY})
    assert summary["routes"] == {}
    assert "api.anthropic.com:443" in summary["tunnelled"]  # type: ignore[operator]
    (note,) = summary["stand_in_only"]  # type: ignore[misc]
    assert note.startswith("ANTHROPIC_API_KEY reaches the agent as a stand-in only")
    text = "\n".join(egress_lines(summary))
    assert "an encrypted tunnel the proxy cannot put a real key into" in text
    # A provider's key is for that provider: never put into requests to another one.
    assert summary["secrets"] == {"ANTHROPIC_API_KEY": ["api.anthropic.com:443"]}
    keys = egress_summary(agent(Backend.OPENCODE), {"OPENAI_API_KEY": KEY, "GROQ_API_KEY": KEY})
    assert keys["secrets"] == {
        "OPENAI_API_KEY": ["api.openai.com:443"],
        "GROQ_API_KEY": ["api.groq.com:443"],
    }


def test_loopctls_own_agent_keeps_its_key_and_its_tools_get_only_their_hosts() -> None:
    own = agent(Backend.OPENAI, sandbox=AgentSandbox(hosts=(HostPort("pypi.org", 443),)))
    policy = agent_policy(own, {"OPENAI_API_KEY": KEY, "GH_TOKEN": "ghp_0123456789"})
    assert policy.routes == ()
    assert policy.allowed() == (HostPort("pypi.org", 443),)
    # The model key stays in loopctl's process; GitHub's token is for GitHub's API only.
    assert secrets_of(policy) == {"GH_TOKEN": (GITHUB,)}


def test_command_agent_secrets_follow_presets_and_declarations() -> None:
    rules = (
        SecretHosts("MY_TOKEN", (HostPort("api.example.com", 443),)),
        SecretHosts("RAW_SECRET", real=True),
    )
    env = {
        "GITHUB_TOKEN": "ghp_0123456789",
        "MY_TOKEN": "mine-0123456789",
        "RAW_SECRET": "raw-0123456789",
        "OTHER_KEY": "other-0123456789",
        "PATH": "/usr/bin",
    }
    command = agent(Backend.COMMAND, secret_hosts=rules)
    policy = agent_policy(command, env)
    assert policy.routes == ()
    assert policy.allowed() == ()
    assert secrets_of(policy) == {
        "GITHUB_TOKEN": (GITHUB,),
        "MY_TOKEN": (HostPort("api.example.com", 443),),
        "OTHER_KEY": (),
    }
    inner = policy.inner_env(env)
    assert inner["RAW_SECRET"] == "raw-0123456789"  # the explicit opt-out
    assert inner["PATH"] == "/usr/bin"
    assert all(inner[n].startswith("loopctl-stand-in-") for n in ("GITHUB_TOKEN", "OTHER_KEY"))
    summary = egress_summary(command, env)
    assert summary["real"] == ["RAW_SECRET"]
    shown = json.dumps(summary) + "\n".join(egress_lines(summary))
    for secret in (*env.values(), *(s.stand_in for s in policy.secrets)):
        if secret != "/usr/bin":
            assert secret not in shown  # names and hosts only, never a value or stand-in


def test_none_cuts_even_the_model_and_open_lends_values_unchanged() -> None:
    env = {"ANTHROPIC_API_KEY": KEY}
    none = agent_policy(agent(Backend.CLAUDE, sandbox=AgentSandbox(network=NetworkMode.NONE)), env)
    assert none.allowed() == ()
    assert none.routes == ()
    assert none.inner_env(env)["ANTHROPIC_API_KEY"] != KEY
    opened = agent(Backend.CLAUDE, sandbox=AgentSandbox(network=NetworkMode.OPEN))
    policy = agent_policy(opened, env)
    assert not policy.isolated
    assert policy.inner_env(env)["ANTHROPIC_API_KEY"] == KEY
    assert egress_summary(opened, env)["real"] == ["ANTHROPIC_API_KEY"]


def test_checks_get_no_network_unless_the_loop_says() -> None:
    assert check_policy(CheckerSpec()).mode is NetworkMode.NONE
    pypi = HostPort("pypi.org", 443)
    listed = check_policy(CheckerSpec(network=NetworkMode.PROXY, hosts=(pypi,)))
    assert listed.allowed() == (pypi,)
    assert listed.secrets == ()
    assert check_policy(CheckerSpec(network=NetworkMode.OPEN)).mode is NetworkMode.OPEN
