"""`loopctl agents test NAME`: is the agent's backend installed, configured and reachable?

A dry run: the CLI's `--version`, the credentials it would get, or a model API's model list
with the key. Nothing is asked of a model and no worktree is touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopctl.backends import backend_for
from loopctl.backends.base import ProbeCheck
from loopctl.definitions import Project
from loopctl.secrets import build_env


@dataclass(frozen=True, slots=True)
class AgentTest:
    agent: str
    backend: str
    model: str | None
    checks: tuple[ProbeCheck, ...]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "backend": self.backend,
            "model": self.model,
            "ok": self.ok,
            "checks": [
                {"name": c.name, "ok": c.ok, "warning": c.warning, "detail": c.detail}
                for c in self.checks
            ],
        }


def probe_agent(project: Project, name: str) -> AgentTest:
    agent = project.agent(name)
    env = build_env(allow=(*agent.env_allow, *project.config.env_allow))
    checks = backend_for(agent).probe(agent, env, project.root)
    return AgentTest(agent.name, agent.backend.value, agent.model, tuple(checks))
