"""Agent backends behind one interface; the engine asks `backend_for(agent)`."""

from __future__ import annotations

from typing import cast

from loopctl import backend_registry
from loopctl.backends.base import (
    AgentBackend,
    AgentRequest,
    AgentResult,
    AgentStatus,
    ProbeCheck,
)
from loopctl.definitions.agents import Agent

__all__ = [
    "AgentBackend",
    "AgentRequest",
    "AgentResult",
    "AgentStatus",
    "ProbeCheck",
    "backend_for",
]


def backend_for(agent: Agent) -> AgentBackend:
    """The backend that runs `agent`, as its module declared it (`loopctl.backend_registry`;
    the modules load on the first call: start-up stays fast)."""
    spec = backend_registry.find(agent.backend)
    if spec is None:  # the definitions accept only registered names
        raise LookupError(f"no agent backend is named {agent.backend!r}")
    return cast(AgentBackend, spec.factory())
