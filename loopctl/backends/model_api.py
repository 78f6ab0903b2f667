"""Backends "openai" and "anthropic": loopctl's own tool-using agent over a model API.

The API key is read here, in loopctl's process, from the variable `api_key_env` names, and sent
only in the request's header. The agent's tools get the scrubbed environment without it, its
value is redacted from everything the session writes, and it never enters a prompt.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from loopctl.backend_registry import BackendSpec, register
from loopctl.backends.base import (
    AgentRequest,
    AgentResult,
    AgentStatus,
    Invocation,
    ProbeCheck,
)
from loopctl.definitions.agents import Agent
from loopctl.errors import AgentUnavailable
from loopctl.secrets import Redactor
from loopctl.toolagent.wire import wire_for


class ModelApiBackend:
    def __init__(self, wire_name: str) -> None:
        # The session, its client and httpx are imported where they are used (run, probe):
        # the registry imports every backend module to read its declaration, and the engine
        # asks this class for an agent's key variable, but the tool agent (~60 ms,
        # `python -X importtime`, asyncio and ssl with it) is for a model-API agent only, not
        # for every `loopctl run` of a CLI agent. tests/test_lazy_imports.py holds that.
        self.name = wire_name
        self.wire = wire_for(wire_name)

    def base_url(self, agent: Agent) -> str:
        return agent.base_url or self.wire.default_base_url

    def key_env(self, agent: Agent) -> str | None:
        """The variable holding the key; a local server (base_url set) may need none."""
        if agent.api_key_env:
            return agent.api_key_env
        if self.name == "openai" and agent.base_url:
            return None
        return self.wire.default_key_env

    def check_available(self, agent: Agent, env: dict[str, str]) -> None:
        name = self.key_env(agent)
        if name is not None and not os.environ.get(name):
            raise AgentUnavailable(
                f"agent {agent.name!r} (backend {self.name}) reads its API key from ${name},"
                f" which is not set: export it, or name another variable with api_key_env in"
                f" {agent.path}"
            )
        if not agent.model:
            raise AgentUnavailable(f"agent {agent.name!r} needs a 'model' ({agent.path})")

    def _api_key(self, agent: Agent) -> str | None:
        name = self.key_env(agent)
        return (os.environ.get(name) or None) if name is not None else None

    def _tool_env(self, request: AgentRequest, key: str | None) -> dict[str, str]:
        """The environment of the agent's tools: never the API key, whatever holds it."""
        key_env = self.key_env(request.agent)
        return {
            name: value
            for name, value in request.env.items()
            if name != key_env and (key is None or value != key)
        }

    def preview(self, request: AgentRequest) -> Invocation:
        # No program: loopctl's own agent talks to the API; its tools get this environment.
        return Invocation([], request.prompt, self._tool_env(request, self._api_key(request.agent)))

    def run(self, request: AgentRequest) -> AgentResult:
        from loopctl.toolagent.session import SessionConfig, run_session  # lazy: see __init__

        agent = request.agent
        key = self._api_key(agent)
        # The key is redacted everywhere, whatever its variable is called.
        redactor = Redactor((*request.redactor.secrets, *([key] if key else [])))
        tool_env = self._tool_env(request, key)
        config = SessionConfig(
            wire=self.wire,
            base_url=self.base_url(agent),
            model=agent.model or "",
            api_key=key,
            instructions=agent.instructions,
            prompt=request.prompt,
            worktree=request.worktree,
            tool_env=tool_env,
            redactor=redactor,
            max_turns=agent.max_turns or 60,
            timeout_s=agent.timeout_s,
            context_window=agent.context_window or 100_000,
            connectors=agent.connectors,
            ask=agent.ask,
            approved=request.approved_commands,
            read_only=request.role != "maker",
            skills={skill.name: skill for skill in request.skills},
            request_approval=request.request_approval,
            cancel=request.cancel,
            transcript=request.stdout_path,
            notes=request.stderr_path,
            sandbox=request.sandbox,
            cassette=request.cassette,
        )
        started = time.monotonic()
        result = run_session(config)
        extra: dict[str, object] = {"turns": result.turns, "requests": result.requests}
        for key_name, value in (
            ("model", result.model or agent.model),
            ("stop", result.stop),
            ("error", result.error),
            ("approval_item", result.approval_item),
        ):
            if value:
                extra[key_name] = value
        if result.error_status is not None:
            # With the wait the API asked for, it tells a rate limit, a quota or an overload
            # (backends.rate_limits).
            extra["http_status"] = result.error_status
        if result.retry_after_s is not None:
            extra["retry_after_s"] = round(result.retry_after_s, 3)
        if result.compactions:
            extra["compactions"] = result.compactions
        if result.approvals_used:
            extra["approvals_used"] = list(result.approvals_used)
        if result.retries:
            extra["retries"] = result.retries
        if result.tool_calls:
            extra["tool_calls"] = list(result.tool_calls)  # execute_tool spans (journal.traces)
        tail = _tail(request.stdout_path)
        return AgentResult(
            status=AgentStatus(result.status),
            exit_code=None,
            duration_s=time.monotonic() - started,
            text=result.text[-4000:],
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            cached_tokens=result.cached_tokens,
            cost_usd=None,
            session_id=None,
            output_tail=redactor.redact(tail),
            extra=extra,
        )

    def probe(self, agent: Agent, env: dict[str, str], cwd: Path) -> list[ProbeCheck]:
        import httpx  # lazy: see __init__

        from loopctl.toolagent.client import uses_environment  # lazy: see __init__

        checks: list[ProbeCheck] = []
        name = self.key_env(agent)
        key = self._api_key(agent)
        if name is None:
            checks.append(ProbeCheck("credentials", True, "no API key (none configured)", True))
        elif key is None:
            checks.append(ProbeCheck("credentials", False, f"${name} is not set; export it first"))
            return checks
        else:
            checks.append(ProbeCheck("credentials", True, f"key read from ${name}"))
        url = self.wire.url(self.base_url(agent), "models")
        redactor = Redactor([key] if key else [])
        try:
            proxies = uses_environment(url)
            with httpx.Client(trust_env=proxies, timeout=httpx.Timeout(15.0)) as client:
                response = client.get(url, headers=self.wire.headers(key))
        except httpx.HTTPError as exc:
            checks.append(ProbeCheck("api", False, redactor.redact(f"cannot reach {url}: {exc}")))
            return checks
        if response.status_code in (401, 403):
            checks.append(
                ProbeCheck("api", False, f"{url} rejected the key ({response.status_code})")
            )
            return checks
        if response.status_code >= 400:
            checks.append(
                ProbeCheck(
                    "api",
                    response.status_code == 404,
                    f"{url} answered {response.status_code} (reachable; it lists no models)",
                    warning=response.status_code == 404,
                )
            )
            return checks
        checks.append(ProbeCheck("api", True, f"{url} answered {response.status_code}"))
        models = _model_ids(response)
        if models is not None and agent.model:
            listed = agent.model in models
            checks.append(
                ProbeCheck(
                    "model",
                    True,
                    f"{agent.model} is listed"
                    if listed
                    else f"{agent.model} is not listed among {len(models)} models",
                    warning=not listed,
                )
            )
        return checks


def _model_ids(response: object) -> set[str] | None:
    try:
        payload = response.json()  # type: ignore[attr-defined]
    except ValueError:
        return None
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    return {str(item.get("id")) for item in data if isinstance(item, dict) and item.get("id")}


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-limit:]


# One module, two wire formats: the model's own HTTP API, called by loopctl's tool agent.
OPENAI = register(
    BackendSpec(
        name="openai",
        factory=lambda: ModelApiBackend("openai"),
        preference=70,
        provider="openai",
    )
)
ANTHROPIC = register(
    BackendSpec(
        name="anthropic",
        factory=lambda: ModelApiBackend("anthropic"),
        preference=80,
        provider="anthropic",
    )
)
